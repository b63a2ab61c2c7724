"""Fiber apply + dispose per second, for a plugin with three effects, against raw trio.

The floor does the same work by hand: a child task started with ``nursery.start`` that enters
the same three effects on a :class:`contextlib.AsyncExitStack`, reports started, and unwinds
when cancelled. Both sides run in the same process and the same ``trio.run``; each figure is
the best of several rounds, so a noisy neighbour only ever makes a round slower.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import trio

from trio_agents.kernel import Context, open_root

ROUNDS = 5
ITERATIONS = 2_000


@contextlib.asynccontextmanager
async def resource() -> AsyncIterator[None]:
    """A minimal effect: a checkpoint on the way in and on the way out."""
    await trio.lowlevel.checkpoint()
    try:
        yield
    finally:
        with trio.CancelScope(shield=True):
            await trio.lowlevel.checkpoint()


class ThreeEffects:
    """The benchmarked plugin."""

    name = "three-effects"

    async def apply(self, ctx: Context, config: None) -> None:
        for _ in range(3):
            await ctx.effect(resource())


async def _raw_child(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(resource())
        task_status.started()
        await trio.sleep_forever()


async def raw_floor(iterations: int) -> float:
    """Seconds for ``iterations`` start + cancel-and-await rounds in plain trio."""
    start = time.perf_counter()
    for _ in range(iterations):
        async with trio.open_nursery() as nursery:
            await nursery.start(_raw_child)
            nursery.cancel_scope.cancel()
    return time.perf_counter() - start


async def fibers(iterations: int) -> float:
    """Seconds for ``iterations`` ``ctx.plugin`` + ``fiber.dispose`` rounds."""
    plugin = ThreeEffects()
    async with open_root() as root:
        start = time.perf_counter()
        for _ in range(iterations):
            fiber = await root.plugin(plugin)
            await fiber.dispose()
        return time.perf_counter() - start


async def measure(rounds: int = ROUNDS, iterations: int = ITERATIONS) -> dict[str, Any]:
    """Best-of-``rounds`` rates (operations per second) of both sides, and their ratio."""
    best_raw = min([await raw_floor(iterations) for _ in range(rounds)])
    best_fiber = min([await fibers(iterations) for _ in range(rounds)])
    raw_rate = iterations / best_raw
    fiber_rate = iterations / best_fiber
    return {"raw": raw_rate, "fiber": fiber_rate, "ratio": raw_rate / fiber_rate}


def main() -> None:
    """Measure and print."""
    result = trio.run(measure)
    print(f"fiber apply+dispose, 3 effects (best of {ROUNDS} x {ITERATIONS}):")
    print(f"  raw trio floor (nursery.start + AsyncExitStack): {result['raw']:>10,.0f} /s")
    print(f"  trio_agents fiber (ctx.plugin + dispose):        {result['fiber']:>10,.0f} /s")
    print(f"  ratio: the fiber costs {result['ratio']:.1f}x the raw floor")


if __name__ == "__main__":
    main()
