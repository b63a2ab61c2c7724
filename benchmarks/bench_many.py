"""Aggregate turns per second with 10, 1,000 and 10,000 agents prompted at once.

Every agent is created first (untimed), on the same constant-cost echo model and a
:class:`MemoryStore`; then one task per agent runs its share of the turns (``prompt`` then
``await when_idle()``) and the clock covers from the first prompt to the last agent idle.
Every size runs the same total number of turns (``TOTAL``), so each agent runs ``TOTAL / n``
turns. The figure at 1,000 and 10,000 agents is read against the 10-agent rate of the same
run: what the scheduler, the registry and the per-agent state cost when many agents are live
and runnable at once. Goal: at least 0.8x the 10-agent rate at 1,000 and at 10,000 agents.

Each size also reports what the cyclic garbage collector took of the timed run (collections
per generation and their CPU time, from ``gc.callbacks``): with many agents live, a full
collection traverses every agent's objects, and turns in flight across a young collection
are promoted, so that share, not the turn itself, is most of the loss (issue #17).
"""

from __future__ import annotations

import gc
import time
from typing import Any

import trio

import trio_agents as ta
from trio_agents.kernel import Context

from ._common import line
from .bench_agents import Echo

SIZES = (10, 1_000, 10_000)
TOTAL = 10_000
ROUNDS = 2


async def _turns(agent: ta.Agent, turns: int) -> None:
    for i in range(turns):
        agent.prompt(f"hello {i}")
        await agent.when_idle()


class GcWatch:
    """Counts the collections of each generation and their CPU time (``time.thread_time``)
    while it is entered."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.thread_time()
        else:
            generation = info["generation"]
            self.collections[generation] += 1
            self.seconds[generation] += time.thread_time() - self._began

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


async def aggregate(
    root: Context, agents: int, total: int, watch: GcWatch | None = None
) -> tuple[float, float]:
    """Turns per second of ``total`` turns spread over ``agents`` concurrent agents, and the
    CPU seconds the run took (the collector's share goes to ``watch``)."""
    model = Echo()
    handles = [await root.agents.create(model=model) for _ in range(agents)]
    per_agent = max(1, total // agents)
    try:
        with watch if watch is not None else GcWatch():
            start, cpu = time.perf_counter(), time.thread_time()
            async with trio.open_nursery() as nursery:
                for handle in handles:
                    nursery.start_soon(_turns, handle.agent, per_agent)
            elapsed, cpu = time.perf_counter() - start, time.thread_time() - cpu
    finally:
        async with trio.open_nursery() as nursery:
            for handle in handles:
                nursery.start_soon(handle.dispose)
    return per_agent * agents / elapsed, cpu


async def measure(
    sizes: tuple[int, ...] = SIZES, total: int = TOTAL, rounds: int = ROUNDS
) -> dict[str, float]:
    """Best-of-``rounds`` aggregate rate at every size, and each against the smallest."""
    best = dict.fromkeys(sizes, 0.0)
    r: dict[str, float] = {}
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        await aggregate(root, sizes[0], sizes[0] * 10)  # warm-up
        for _ in range(rounds):
            for n in sizes:
                watch = GcWatch()
                rate, cpu = await aggregate(root, n, total, watch)
                if rate > best[n]:
                    best[n] = rate
                    # The collector's figures of the best round: its CPU share and work.
                    r[f"cpu_{n}"] = cpu
                    for g in range(3):
                        r[f"gc{g}_{n}"] = watch.collections[g]
                        r[f"gc{g}_s_{n}"] = watch.seconds[g]
    r.update({f"rate_{n}": best[n] for n in sizes})
    r.update({f"ratio_{n}": best[n] / best[sizes[0]] for n in sizes})
    return r


def main(sizes: tuple[int, ...] = SIZES) -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure, sizes)
    print(f"aggregate turns, {TOTAL:,} turns over n concurrent echo agents (best of {ROUNDS}):")
    for n in sizes:
        print(line(f"{n:,} agents at once:", r[f"rate_{n}"]))
    for n in sizes:
        gc_s = sum(r[f"gc{g}_s_{n}"] for g in range(3))
        per_gen = ", ".join(
            f"gen{g} {r[f'gc{g}_{n}']:.0f}x {r[f'gc{g}_s_{n}'] * 1e3:,.0f} ms" for g in range(3)
        )
        print(
            f"  collector at {n:,} agents: {gc_s * 1e3:,.0f} ms of {r[f'cpu_{n}'] * 1e3:,.0f} ms"
            f" CPU ({gc_s / r[f'cpu_{n}']:.0%}): {per_gen}"
        )
    for n in sizes[1:]:
        print(f"  ratio: at {n:,} agents the aggregate rate is {r[f'ratio_{n}']:.2f}x {sizes[0]}")
    return r


if __name__ == "__main__":
    main()
