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

The traced figure depends on the process's string-hash seed: ``contextvars`` keeps a
context's variables in a hash trie keyed by their hashes (which mix the seed with where each
variable was allocated), so one seed puts two of them in one node where another does not, and
one layout of the same code reads up to 256 B more per agent than another. So each figure is
measured in a fresh interpreter per seed of ``SEEDS`` (``PYTHONHASHSEED`` fixed: the run is
the same each time), and the one reported is the largest, the worst layout: the goal holds
for every seed measured.

The resident set of ``IDLE`` idle agents (100,000 by default) is measured in a subprocess of
its own (``python -m benchmarks.bench_memory rss agents N``), so that its RSS holds nothing
of the other benchmarks: the process's ``VmRSS`` once every agent is idle, beside the same
figure for as many raw tasks on an Event in another subprocess. Goal: under 2 GiB.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc

import trio
import trio.testing

import trio_agents as ta
from trio_agents.agent import AgentHandle
from trio_agents.kernel import Context

from ._common import line

ROUNDS = 2
AGENTS = 1_000
IDLE = 100_000
SEEDS = (0, 1, 2)


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


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for row in status:
            if row.startswith("VmRSS:"):
                return int(row.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status; the RSS figure needs Linux")


async def _hold_raw(count: int) -> int:
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(_waiter, trio.Event())
        await trio.testing.wait_all_tasks_blocked()
        rss = _rss_bytes()
        nursery.cancel_scope.cancel()
    return rss


async def _hold_agents(count: int) -> int:
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        model = ta.ScriptedModel.echo()
        handles = [await root.agents.create(model=model) for _ in range(count)]
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        rss = _rss_bytes()
        async with trio.open_nursery() as nursery:
            for handle in handles:
                nursery.start_soon(handle.dispose)
    return rss


def _held(kind: str, count: int) -> int:
    """Run ``rss KIND COUNT`` in a fresh interpreter; its RSS in bytes while all are idle."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_memory", "rss", kind, str(count)],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout.split()[-1])


def rss(count: int = IDLE) -> dict[str, float]:
    """RSS of ``count`` idle agents, of ``count`` raw tasks and of an empty runtime."""
    return {
        "rss_empty": _held("agents", 0),
        "rss_raw": _held("raw", count),
        "rss_agents": _held("agents", count),
    }


def _traced_here() -> dict[str, float]:
    tracemalloc.start()
    try:
        return trio.run(measure)
    finally:
        tracemalloc.stop()


def traced(seed: int) -> dict[str, float]:
    """``measure()`` in a fresh interpreter whose string-hash seed is ``seed``."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_memory", "traced"],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": str(seed)},
    )
    figures: dict[str, float] = json.loads(out.stdout)
    return figures


def main(idle: int = IDLE) -> dict[str, float]:
    """Measure (under tracemalloc) once per hash seed, then the RSS, in subprocesses; print."""
    runs = [traced(seed) for seed in SEEDS]
    agents = [run["agent"] for run in runs]
    raw = min(run["raw"] for run in runs)
    r = {"raw": raw, "agent": max(agents), "agent_best": min(agents), "ratio": max(agents) / raw}
    print(
        f"memory per idle agent, tracemalloc (best of {ROUNDS} x {AGENTS:,}, "
        f"worst of hash seeds {', '.join(map(str, SEEDS))}):"
    )
    print(line("raw trio floor (a task waiting on an Event):", r["raw"], "B/task"))
    print(line("trio_agents idle agent (agents.create, MemoryStore):", r["agent"], "B/agent"))
    print("  per seed: " + ", ".join(f"{a:,.0f}" for a in agents) + " B/agent")
    verdict = "met" if r["agent"] <= 12 * 1024 else "NOT MET"
    print(f"  goal: at most 12 KiB (12,288 B) per idle agent: {verdict}")
    print(f"  ratio: an idle agent holds {r['ratio']:.1f}x the memory of a raw task")
    if idle:
        r.update(rss(idle))
        mib = 1024 * 1024
        print(f"resident set (VmRSS) of {idle:,} idle ones, each in a process of its own:")
        print(line("an empty runtime (no agent):", r["rss_empty"] / mib, "MiB"))
        print(
            line(f"raw trio floor ({idle:,} tasks waiting on an Event):", r["rss_raw"] / mib, "MiB")
        )
        print(line(f"trio_agents ({idle:,} idle agents):", r["rss_agents"] / mib, "MiB"))
        per = (r["rss_agents"] - r["rss_empty"]) / idle
        r["rss_per_agent"] = per
        print(line("  per agent:", per / 1024, "KiB"))
    return r


if __name__ == "__main__":
    if sys.argv[1:2] == ["traced"]:
        print(json.dumps(_traced_here()))
    elif sys.argv[1:2] == ["rss"]:
        kind, count = sys.argv[2], int(sys.argv[3])
        print(trio.run(_hold_raw if kind == "raw" else _hold_agents, count))
    else:
        main()
