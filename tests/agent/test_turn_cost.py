"""A turn's cost does not grow with its session: no copy of the history per turn.

Time is not asserted (no timed tests); memory is: the peak of what one turn allocates, traced
by ``tracemalloc``, on a session of a few records and on one of thousands. A turn that copied
the history (a snapshot of the records, a rebuilt request, a re-encoded file) would allocate
at least a pointer per record, 8 bytes each: at 10,000 records that is 80 KB more than the
fresh turn, far above the allowance below. The model answers at a constant cost (the scripted echo
model's usage counts compare the request with the previous one, a pass over the messages).
"""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.store_backends import BACKENDS
from trio_agents.model import Finished, FinishReason, ModelEvent, ModelRequest, TextDelta, Usage
from trio_agents.session import TurnEnded

GROWN = 10_000  # records
ALLOWANCE = 24_000  # bytes a grown turn may allocate beyond a fresh one


class _Echo:
    """Answers with the newest message, at the same cost at every history length."""

    name = "constant-echo"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        await trio.lowlevel.checkpoint()
        yield TextDelta(request.messages[-1].content)
        yield Finished(FinishReason.STOP, Usage())


async def _turn_peak(agent: ag.Agent, text: str) -> int:
    """Bytes traced at the peak of one prompt + when_idle, above what was held before."""
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        agent.prompt(text)
        await agent.when_idle()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


async def _least_peak(agent: ag.Agent) -> int:
    # The least of a few turns: a turn that happens to meet a batch of the store's writer or
    # a resize of a list is not the turn's own cost.
    return min([await _turn_peak(agent, f"measured {i}") for i in range(5)])


@pytest.mark.parametrize("backend", ["memory", "jsonl", "sqlite"])
async def test_a_turn_allocates_nothing_that_grows_with_the_session(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    store = BACKENDS[backend](request, tmp_path)()
    async with ag.open_runtime(store=store, model=_Echo()) as root:
        agent = (await root.agents.create()).agent
        fresh = await _least_peak(agent)
        while agent.session.last_seq < GROWN:
            agent.prompt("grow")
            await agent.when_idle()
        grown = await _least_peak(agent)
    assert grown - fresh < ALLOWANCE, (
        f"a turn on a {GROWN:,}-record session allocates {grown:,} B at its peak, "
        f"{grown - fresh:,} B more than on a fresh one ({fresh:,} B)"
    )


class _Steps(trio.abc.Instrument):
    """Counts the steps the scheduler runs of one task."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


class _Parked:
    """Starts its answer, then waits until cancelled: a turn in flight."""

    name = "parked"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        yield TextDelta("thinking")
        await trio.Event().wait()
        yield Finished(FinishReason.STOP, Usage())  # pragma: no cover - never reached


@pytest.mark.parametrize("ending", ["completed", "cancelled"])
async def test_when_idle_is_scheduled_once_per_turn(ending: str) -> None:
    """A waiter wakes when the agent becomes idle, not at every change on the way (a status
    change, the end of the work), and returns from that wake-up: each extra wake-up is a
    scheduler pass of the waiting task in every turn."""
    model = _Echo() if ending == "completed" else _Parked()
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create()).agent
        steps = _Steps(trio.lowlevel.current_task())
        for turn in range(3):
            agent.prompt(f"turn {turn}")
            if ending == "cancelled":
                await trio.testing.wait_all_tasks_blocked()
                agent.cancel()
            trio.lowlevel.add_instrument(steps)
            try:
                await agent.when_idle()
            finally:
                trio.lowlevel.remove_instrument(steps)
        ended = [r.stop_reason.value for r in agent.session.records if isinstance(r, TurnEnded)]
    assert ended == [ending] * 3
    assert steps.steps == 3, f"the waiter ran {steps.steps} steps in 3 turns, not one each"


class _Passes(trio.abc.Instrument):
    """Counts the scheduler's passes (each waits for I/O once, maybe for no time)."""

    def __init__(self) -> None:
        self.passes = 0

    def before_io_wait(self, timeout: float) -> None:
        self.passes += 1


async def test_a_turn_on_a_memory_store_is_three_passes() -> None:
    """On a store with nothing to wait for, a turn's durable end takes no pass of its own:
    the loop wakes, the model streams, the loop records the end and idles, the waiter
    wakes (the flush's checkpoint was a fourth pass in every turn)."""
    async with ag.open_runtime(model=_Echo()) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("warm up")
        await agent.when_idle()
        await trio.testing.wait_all_tasks_blocked()
        passes = _Passes()
        trio.lowlevel.add_instrument(passes)
        try:
            agent.prompt("counted")
            await agent.when_idle()
        finally:
            trio.lowlevel.remove_instrument(passes)
        assert agent.session.statistics().flushed_seq == agent.session.last_seq
    assert passes.passes == 3, f"a turn took {passes.passes} scheduler passes, not 3"
