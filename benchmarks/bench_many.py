"""Aggregate turns per second with 10, 1,000 and 10,000 agents prompted at once.

Every agent is created first (untimed), on the same constant-cost echo model and a
:class:`MemoryStore`; then one task per agent runs its share of the turns (``prompt`` then
``await when_idle()``) and the clock covers from the first prompt to the last agent idle.
Every size runs the same total number of turns (``TOTAL``), so each agent runs ``TOTAL / n``
turns. The figure at 1,000 and 10,000 agents is read against the 10-agent rate of the same
run: what the scheduler, the registry and the per-agent state cost when many agents are live
and runnable at once. Goal: at least 0.8x the 10-agent rate at 1,000 and at 10,000 agents.
"""

from __future__ import annotations

import time

import trio

import trio_agents as ta
from trio_agents.kernel import Context

from ._common import line
from .bench_agents import _Echo

SIZES = (10, 1_000, 10_000)
TOTAL = 10_000
ROUNDS = 2


async def _turns(agent: ta.Agent, turns: int) -> None:
    for i in range(turns):
        agent.prompt(f"hello {i}")
        await agent.when_idle()


async def aggregate(root: Context, agents: int, total: int) -> float:
    """Turns per second of ``total`` turns spread over ``agents`` concurrent agents."""
    model = _Echo()
    handles = [await root.agents.create(model=model) for _ in range(agents)]
    per_agent = max(1, total // agents)
    try:
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for handle in handles:
                nursery.start_soon(_turns, handle.agent, per_agent)
        elapsed = time.perf_counter() - start
    finally:
        async with trio.open_nursery() as nursery:
            for handle in handles:
                nursery.start_soon(handle.dispose)
    return per_agent * agents / elapsed


async def measure(
    sizes: tuple[int, ...] = SIZES, total: int = TOTAL, rounds: int = ROUNDS
) -> dict[str, float]:
    """Best-of-``rounds`` aggregate rate at every size, and each against the smallest."""
    best = dict.fromkeys(sizes, 0.0)
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        await aggregate(root, sizes[0], sizes[0] * 10)  # warm-up
        for _ in range(rounds):
            for n in sizes:
                best[n] = max(best[n], await aggregate(root, n, total))
    r = {f"rate_{n}": best[n] for n in sizes}
    r.update({f"ratio_{n}": best[n] / best[sizes[0]] for n in sizes})
    return r


def main(sizes: tuple[int, ...] = SIZES) -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure, sizes)
    print(f"aggregate turns, {TOTAL:,} turns over n concurrent echo agents (best of {ROUNDS}):")
    for n in sizes:
        print(line(f"{n:,} agents at once:", r[f"rate_{n}"]))
    for n in sizes[1:]:
        print(f"  ratio: at {n:,} agents the aggregate rate is {r[f'ratio_{n}']:.2f}x {sizes[0]}")
    return r


if __name__ == "__main__":
    main()
