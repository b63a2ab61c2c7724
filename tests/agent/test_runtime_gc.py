"""open_runtime(gc_threshold=): the opt-in tuning of CPython's cyclic collector (issue #43)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import trio

import trio_agents as ta

# Not any interpreter's default, so a test cannot pass by finding the default in place.
BEFORE = (911, 13, 17)


@pytest.fixture(autouse=True)
def known_thresholds() -> Iterator[None]:
    """Every test starts from BEFORE, and the process gets its own thresholds back after."""
    saved = gc.get_threshold()
    gc.set_threshold(*BEFORE)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


async def test_the_threshold_holds_while_the_runtime_is_open_and_is_restored_after() -> None:
    """Generation 0 takes the threshold inside, all three come back after; no option, no change."""
    seen: list[tuple[int, int, int]] = []
    async with ta.open_runtime(gc_threshold=100_000) as root:
        seen.append(gc.get_threshold())
        handle = await root.agents.create()
        handle.agent.prompt("hello")
        await handle.agent.when_idle()
        seen.append(gc.get_threshold())
    async with ta.open_runtime():  # the default leaves the process-global setting alone
        seen.append(gc.get_threshold())
    assert seen == [(100_000, 13, 17), (100_000, 13, 17), BEFORE]
    assert gc.get_threshold() == BEFORE


async def test_the_threshold_is_in_place_until_the_last_teardown_step() -> None:
    """An agent's teardown, the last thing the runtime does, still runs under the threshold."""
    at_teardown: list[tuple[int, int, int]] = []

    def disposed(event: ta.AgentDisposed) -> None:
        at_teardown.append(gc.get_threshold())

    async with ta.open_runtime(gc_threshold=50_000) as root:
        root.on(ta.AgentDisposed, disposed)
        await root.agents.create()
    assert at_teardown == [(50_000, 13, 17)]
    assert gc.get_threshold() == BEFORE


async def test_the_previous_thresholds_come_back_when_the_block_raises() -> None:
    """An error out of the runtime's block restores the thresholds on its way out."""
    inside: list[tuple[int, int, int]] = []

    async def fail_inside() -> None:
        async with ta.open_runtime(gc_threshold=100_000):
            inside.append(gc.get_threshold())
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match=r"^boom$"):
        await fail_inside()
    assert inside == [(100_000, 13, 17)]
    assert gc.get_threshold() == BEFORE


async def test_the_previous_thresholds_come_back_when_the_runtime_is_cancelled() -> None:
    """A cancellation of the task holding the runtime restores them too."""
    with trio.CancelScope() as scope:
        async with ta.open_runtime(gc_threshold=100_000):
            scope.cancel()
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert gc.get_threshold() == BEFORE


async def test_nested_runtimes_restore_in_reverse_order() -> None:
    """An inner runtime's exit gives back the outer one's threshold, the outer's the original."""
    async with ta.open_runtime(gc_threshold=20_000):
        async with ta.open_runtime(gc_threshold=100_000):
            assert gc.get_threshold() == (100_000, 13, 17)
        assert gc.get_threshold() == (20_000, 13, 17)
    assert gc.get_threshold() == BEFORE


@pytest.mark.parametrize("threshold", [0, -5, 2.5, True, "100000"])
async def test_a_threshold_that_is_not_a_positive_int_is_refused_before_anything_opens(
    threshold: object,
) -> None:
    """A bad value is one readable error, raised before the runtime or the collector changes."""
    with pytest.raises(ValueError, match=r"^gc_threshold is the collector's generation-0 "):
        async with ta.open_runtime(gc_threshold=threshold):  # type: ignore[arg-type]
            pytest.fail("the runtime opened")  # pragma: no cover
    assert gc.get_threshold() == BEFORE
