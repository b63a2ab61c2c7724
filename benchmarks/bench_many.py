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

Every size runs twice in each round: on a runtime as it comes, and on one opened with
``open_runtime(gc_threshold=GC_THRESHOLD)`` (the opt-in tuning of the collector, issue #43),
each against the 10-agent rate of its own runtime. The machine's load moves the wall-clock
rates, so each size also reports turns per CPU second of the task (``time.thread_time``).
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
#: The ``gc_threshold`` of the tuned runtime: the figure ``docs/benchmarks.rst`` gives for it.
GC_THRESHOLD = 100_000


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


async def _round(
    r: dict[str, float], prefix: str, sizes: tuple[int, ...], total: int, threshold: int | None
) -> None:
    """One round of every size on a runtime of its own; keeps each size's best in ``r``."""
    async with ta.open_runtime(store=ta.MemoryStore(), gc_threshold=threshold) as root:
        await aggregate(root, sizes[0], sizes[0] * 10)  # warm-up
        for n in sizes:
            watch = GcWatch()
            rate, cpu = await aggregate(root, n, total, watch)
            if rate > r.get(f"{prefix}rate_{n}", 0.0):
                r[f"{prefix}rate_{n}"] = rate
                # The collector's figures of the best round: its CPU share and work.
                r[f"{prefix}cpu_{n}"] = cpu
                for g in range(3):
                    r[f"{prefix}gc{g}_{n}"] = watch.collections[g]
                    r[f"{prefix}gc{g}_s_{n}"] = watch.seconds[g]
            turns = max(1, total // n) * n
            r[f"{prefix}cpu_rate_{n}"] = max(r.get(f"{prefix}cpu_rate_{n}", 0.0), turns / cpu)


async def measure(
    sizes: tuple[int, ...] = SIZES, total: int = TOTAL, rounds: int = ROUNDS
) -> dict[str, float]:
    """Best-of-``rounds`` aggregate rate at every size, and each against the smallest, on a
    runtime as it comes and (keys prefixed ``tuned_``) on one with ``GC_THRESHOLD``."""
    r: dict[str, float] = {}
    for _ in range(rounds):
        await _round(r, "", sizes, total, None)
        await _round(r, "tuned_", sizes, total, GC_THRESHOLD)
    for prefix in ("", "tuned_"):
        for n in sizes:
            r[f"{prefix}ratio_{n}"] = r[f"{prefix}rate_{n}"] / r[f"{prefix}rate_{sizes[0]}"]
            r[f"{prefix}cpu_ratio_{n}"] = (
                r[f"{prefix}cpu_rate_{n}"] / r[f"{prefix}cpu_rate_{sizes[0]}"]
            )
    return r


def main(sizes: tuple[int, ...] = SIZES) -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure, sizes)
    print(f"aggregate turns, {TOTAL:,} turns over n concurrent echo agents (best of {ROUNDS}):")
    for prefix, runtime in (("", "open_runtime()"), ("tuned_", _TUNED)):
        print(f"  {runtime}:")
        for n in sizes:
            print(
                line(f"  {n:,} agents at once:", r[f"{prefix}rate_{n}"])
                + f"  ({r[f'{prefix}cpu_rate_{n}']:,.0f} per CPU s)"
            )
        for n in sizes:
            gc_s = sum(r[f"{prefix}gc{g}_s_{n}"] for g in range(3))
            cpu = r[f"{prefix}cpu_{n}"]
            per_gen = ", ".join(
                f"gen{g} {r[f'{prefix}gc{g}_{n}']:.0f}x {r[f'{prefix}gc{g}_s_{n}'] * 1e3:,.0f} ms"
                for g in range(3)
            )
            print(
                f"    collector at {n:,} agents: {gc_s * 1e3:,.0f} ms of {cpu * 1e3:,.0f} ms"
                f" CPU ({gc_s / cpu:.0%}): {per_gen}"
            )
        for n in sizes[1:]:
            print(
                f"    ratio: at {n:,} agents the aggregate rate is "
                f"{r[f'{prefix}ratio_{n}']:.2f}x {sizes[0]} "
                f"(per CPU second: {r[f'{prefix}cpu_ratio_{n}']:.2f}x)"
            )
    return r


_TUNED = f"open_runtime(gc_threshold={GC_THRESHOLD:_})"


if __name__ == "__main__":
    main()
