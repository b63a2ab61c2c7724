"""Memory per idle agent against memory per idle raw trio task, measured with tracemalloc.

An idle agent is what a long-lived server holds most of the time: a live ``agents.create()``
on a :class:`MemoryStore` with nothing queued. The figure is the growth of traced Python
memory between before and after creating ``AGENTS`` of them (after a warm-up and a
``gc.collect()``), divided by their number; it covers the agent's fiber, exit stack, session,
inbox, registry entry and the loop task parked on its wake-up. The floor is the least a trio
program can hold per long-lived worker: one task in a nursery blocked on a
:class:`trio.Event`, the idiom for "a task waiting for work". Both are measured in one
``trio.run`` under the same tracer; tracemalloc counts only Python allocations (not the C
stacks of the interpreter), so the ratio is the one to read, and each figure is the best
(smallest) of a few rounds.
"""

from __future__ import annotations

import gc
import tracemalloc

import trio
import trio.testing

import trio_agents as ta
from trio_agents.agent import AgentHandle
from trio_agents.kernel import Context

from ._common import line

ROUNDS = 3
AGENTS = 1_000


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def _waiter(event: trio.Event) -> None:
    await event.wait()


async def raw_task_bytes(count: int) -> float:
    """Traced bytes per raw trio task parked on an Event in a nursery."""
    async with trio.open_nursery() as nursery:
        events: list[trio.Event] = []
        before = _traced()
        for _ in range(count):
            event = trio.Event()
            events.append(event)
            nursery.start_soon(_waiter, event)
        await trio.testing.wait_all_tasks_blocked()
        after = _traced()
        for event in events:
            event.set()
    return (after - before) / count


async def agent_bytes(root: Context, count: int) -> float:
    """Traced bytes per idle agent (created, nothing queued)."""
    model = ta.ScriptedModel.echo()
    handles: list[AgentHandle] = []
    before = _traced()
    try:
        for _ in range(count):
            handles.append(await root.agents.create(model=model))
        await trio.testing.wait_all_tasks_blocked()
        after = _traced()
    finally:
        async with trio.open_nursery() as nursery:
            for handle in handles:
                nursery.start_soon(handle.dispose)
    return (after - before) / count


async def measure() -> dict[str, float]:
    """Best (smallest) bytes per idle task and per idle agent, and their ratio."""
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        # Warm-up: first-use caches (attrs, cattrs, classes) are not per-agent memory.
        await raw_task_bytes(50)
        await agent_bytes(root, 50)
        raw = agent = float("inf")
        for _ in range(ROUNDS):
            raw = min(raw, await raw_task_bytes(AGENTS))
            agent = min(agent, await agent_bytes(root, AGENTS))
    return {"raw": raw, "agent": agent, "ratio": agent / raw}


def main() -> None:
    """Measure (under tracemalloc) and print."""
    tracemalloc.start()
    try:
        r = trio.run(measure)
    finally:
        tracemalloc.stop()
    print(f"memory per idle agent, tracemalloc (best of {ROUNDS} x {AGENTS:,}):")
    print(line("raw trio floor (a task waiting on an Event):", r["raw"], "B/task"))
    print(line("trio_agents idle agent (agents.create, MemoryStore):", r["agent"], "B/agent"))
    print(f"  ratio: an idle agent holds {r['ratio']:.1f}x the memory of a raw task")


if __name__ == "__main__":
    main()
