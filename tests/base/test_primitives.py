"""Signal and Wake: the base layer's one-shot primitives, made lazily / for one waiter."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agents._base import Signal, Wake


@pytest.mark.parametrize("kind", [Signal, Wake])
async def test_a_set_one_returns_at_once_after_a_checkpoint(kind: type[Signal | Wake]) -> None:
    """wait() on a set one returns at once, and still delivers a pending cancel."""
    signal = kind()
    signal.set()
    signal.set()  # idempotent
    assert signal.is_set()
    with trio.CancelScope() as scope:
        scope.cancel()
        await signal.wait()  # a checkpoint: the pending cancel is delivered
    assert scope.cancelled_caught


@pytest.mark.parametrize("kind", [Signal, Wake])
async def test_set_wakes_the_waiter_and_a_cancelled_waiter_leaves(
    kind: type[Signal | Wake],
) -> None:
    """set() wakes the waiter; a cancelled waiter leaves and another may wait."""
    signal = kind()
    woken: list[str] = []

    async def waiter(name: str) -> None:
        await signal.wait()
        woken.append(name)

    async with trio.open_nursery() as nursery:
        cancelled = trio.CancelScope()

        async def cancelled_waiter() -> None:
            with cancelled:
                await signal.wait()

        nursery.start_soon(cancelled_waiter)
        await trio.testing.wait_all_tasks_blocked()
        cancelled.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert cancelled.cancelled_caught
        nursery.start_soon(waiter, "a")  # a Wake takes a new waiter once the first left
        await trio.testing.wait_all_tasks_blocked()
        assert woken == []
        signal.set()
    assert woken == ["a"]


async def test_a_signal_wakes_every_waiter() -> None:
    """One set() wakes every task waiting on a Signal."""
    signal = Signal()
    woken: list[int] = []

    async def waiter(n: int) -> None:
        await signal.wait()
        woken.append(n)

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(waiter, n)
        await trio.testing.wait_all_tasks_blocked()
        signal.set()
    assert sorted(woken) == [0, 1, 2]


async def test_a_wake_refuses_a_second_waiter() -> None:
    """A second task waiting on a Wake while one waits gets a RuntimeError."""
    wake = Wake()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wake.wait)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError, match=r"^<Wake unset> already has a waiter \(.*\)$"):
            await wake.wait()
        wake.set()


@pytest.mark.parametrize("kind", [Signal, Wake])
async def test_wait_is_a_coroutine_that_registers_the_task_awaiting_it(
    kind: type[Signal | Wake], autojump_clock: trio.testing.MockClock
) -> None:
    """wait() does nothing until awaited: started as a task, it parks that task, not its spawner."""
    signal = kind()
    waiting = signal.wait()  # not awaited: registers no one
    with trio.fail_after(1):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(signal.wait)
            await trio.testing.wait_all_tasks_blocked()
            signal.set()
        await waiting  # set by then: returns at once
