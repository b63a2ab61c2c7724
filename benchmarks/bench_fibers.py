"""Fiber apply + dispose per second, for a plugin with three effects, against raw trio and anyio.

The floor does the same work by hand: a child task started with ``nursery.start`` that enters
the same three effects on a :class:`contextlib.AsyncExitStack`, reports started, and unwinds
when cancelled. That is the least a trio program can do to get what a fiber gives (a started
child owning a LIFO stack of effects, torn down by cancellation), so the ratio is the price of
the fiber's bookkeeping (states, services, memoized dispose). The peer is the same hand-written
pattern on anyio (``anyio.create_task_group()`` + ``AsyncExitStack``, with anyio's own
checkpoints and shields) on anyio's trio backend, i.e. what the most common structured
concurrency layer above trio costs for the same job. All sides run in the same process and
the same ``trio.run``, rounds interleaved; each figure is the best of several rounds, so a
noisy neighbour only ever makes a round slower.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import anyio
import anyio.abc
import anyio.lowlevel
import trio

from trio_agents.kernel import Context, open_root

from ._common import best_rates, line

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


@contextlib.asynccontextmanager
async def anyio_resource() -> AsyncIterator[None]:
    """The same effect written with anyio's primitives, as an anyio program would."""
    await anyio.lowlevel.checkpoint()
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.lowlevel.checkpoint()


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


async def _anyio_child(
    *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(3):
            await stack.enter_async_context(anyio_resource())
        task_status.started()
        await anyio.sleep_forever()


async def anyio_peer(iterations: int) -> float:
    """Seconds for ``iterations`` start + cancel-and-await rounds with an anyio task group."""
    start = time.perf_counter()
    for _ in range(iterations):
        async with anyio.create_task_group() as tg:
            await tg.start(_anyio_child)
            tg.cancel_scope.cancel()
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


async def measure(rounds: int = ROUNDS, iterations: int = ITERATIONS) -> dict[str, float]:
    """Best-of-``rounds`` rates (operations per second) of every side, and the ratios."""
    rates = await best_rates(
        [("raw", raw_floor), ("anyio", anyio_peer), ("fiber", fibers)], rounds, iterations
    )
    return {
        **rates,
        "ratio": rates["raw"] / rates["fiber"],
        "anyio_ratio": rates["raw"] / rates["anyio"],
        "fiber_vs_anyio": rates["anyio"] / rates["fiber"],
    }


def main() -> None:
    """Measure and print."""
    result = trio.run(measure)
    print(f"fiber apply+dispose, 3 effects (best of {ROUNDS} x {ITERATIONS}):")
    print(line("raw trio floor (nursery.start + AsyncExitStack):", result["raw"]))
    print(line("anyio peer (task group start + AsyncExitStack):", result["anyio"]))
    print(line("trio_agents fiber (ctx.plugin + dispose):", result["fiber"]))
    print(f"  ratio: the fiber costs {result['ratio']:.1f}x the raw floor")
    print(f"  ratio: anyio costs {result['anyio_ratio']:.1f}x the raw floor")
    print(f"  ratio: the fiber costs {result['fiber_vs_anyio']:.1f}x the anyio peer")


if __name__ == "__main__":
    main()
