"""Latency of cancelling an in-flight turn, p50 and p99, against a raw-trio floor.

Each sample starts a turn whose model is parked inside its stream (on an :class:`trio.Event`
that is never set), lets every task block (``wait_all_tasks_blocked``), then times from
``agent.cancel()`` until ``await agent.when_idle()`` returns: the cancel reaching the turn's
cause scope, the model stream closing, the closing ``TurnEnded`` record and its events, and
the agent idle again. The floor is measured the same way: a task inside a cancel scope
blocked on an Event, the clock read from ``scope.cancel()`` until the task has signalled its
exit on a second Event that the caller awaits. Samples of both sides are interleaved in one
``trio.run``. Goals: p50 at most 2x the floor's, p99 at most 250 us.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator

import trio
import trio.testing

import trio_agents as ta
from trio_agents.kernel import Context
from trio_agents.model import Finished, FinishReason, ModelEvent, ModelRequest, TextDelta, Usage

from ._common import line

SAMPLES = 400


class Parked:
    """Starts its answer, then waits forever: a turn that is in flight until cancelled."""

    name = "bench-parked"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        yield TextDelta("thinking")
        await trio.Event().wait()
        yield Finished(FinishReason.STOP, Usage())  # pragma: no cover - never reached


async def raw_waiter(
    event: trio.Event, done: trio.Event, *, task_status: trio.TaskStatus[trio.CancelScope]
) -> None:
    with trio.CancelScope() as scope:
        task_status.started(scope)
        await event.wait()
    done.set()


async def raw_cancel(nursery: trio.Nursery) -> float:
    """Seconds from ``scope.cancel()`` to the blocked task's exit, seen by the caller."""
    done = trio.Event()
    scope = await nursery.start(raw_waiter, trio.Event(), done)
    await trio.testing.wait_all_tasks_blocked()
    start = time.perf_counter()
    scope.cancel()
    await done.wait()
    return time.perf_counter() - start


async def agent_cancel(agent: ta.Agent) -> float:
    """Seconds from ``agent.cancel()`` of an in-flight turn until ``when_idle`` returns."""
    agent.prompt("go")
    await trio.testing.wait_all_tasks_blocked()
    start = time.perf_counter()
    agent.cancel()
    await agent.when_idle()
    return time.perf_counter() - start


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def measure(samples: int = SAMPLES) -> dict[str, float]:
    """p50 and p99 of both sides, in microseconds, and the ratio of the p50s."""
    raw: list[float] = []
    agent_side: list[float] = []
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        ctx: Context = root
        handle = await ctx.agents.create(model=Parked())
        async with trio.open_nursery() as nursery:
            for _ in range(10):  # warm-up
                await raw_cancel(nursery)
                await agent_cancel(handle.agent)
            for _ in range(samples):
                raw.append(await raw_cancel(nursery))
                agent_side.append(await agent_cancel(handle.agent))
        await handle.dispose()
    us = 1e6
    r = {
        "raw_p50": _percentile(raw, 0.5) * us,
        "raw_p99": _percentile(raw, 0.99) * us,
        "agent_p50": _percentile(agent_side, 0.5) * us,
        "agent_p99": _percentile(agent_side, 0.99) * us,
    }
    r["ratio"] = r["agent_p50"] / r["raw_p50"]
    return r


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(f"cancel of an in-flight turn until idle ({SAMPLES} samples each, interleaved):")
    print(line("raw trio floor p50 (cancel a scope around Event.wait):", r["raw_p50"], "us"))
    print(line("raw trio floor p99:", r["raw_p99"], "us"))
    print(line("trio_agents agent.cancel() -> when_idle() p50:", r["agent_p50"], "us"))
    print(line("trio_agents p99:", r["agent_p99"], "us"))
    print(f"  ratio: a turn's cancel takes {r['ratio']:.1f}x the floor (p50)")
    return r


if __name__ == "__main__":
    main()
