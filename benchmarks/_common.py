"""Helpers shared by the benchmarks: best-of-N timing, the raw-trio turn floor and the printed
lines."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import trio

__all__ = ["RawAgent", "best_rates", "drive_raw", "line"]


async def best_rates(
    sides: Sequence[tuple[str, Callable[[int], Awaitable[float]]]], rounds: int, iterations: int
) -> dict[str, float]:
    """Run every side ``rounds`` times, interleaved, and keep each side's best rate.

    Each side is ``(name, fn)`` where ``await fn(iterations)`` returns the seconds taken.
    Interleaving the rounds means a slow spell of the machine hits every side alike; keeping the
    best round means a noisy neighbour only ever makes a figure smaller, never larger.

    Returns:
        ``{name: operations per second}``.
    """
    best = {name: float("inf") for name, _ in sides}
    for _ in range(rounds):
        for name, fn in sides:
            best[name] = min(best[name], await fn(iterations))
    return {name: iterations / seconds for name, seconds in best.items()}


def line(label: str, value: float, unit: str = "/s") -> str:
    """One aligned figure line."""
    return f"  {label:<56}{value:>12,.0f} {unit}"


#: A raw-trio agent: reads messages from the inbox, keeps its records, sends each reply.
RawAgent = Callable[
    [trio.MemoryReceiveChannel[str], trio.MemorySendChannel[str], list[tuple[str, ...]]],
    Awaitable[None],
]


async def drive_raw(agent: RawAgent, turns: int) -> float:
    """Seconds for ``turns`` message -> reply rounds with ``agent`` in a raw trio task and two
    channels: the floor the runtime's turns are measured against."""
    records: list[tuple[str, ...]] = []
    send_inbox, receive_inbox = trio.open_memory_channel[str](1)
    send_reply, receive_reply = trio.open_memory_channel[str](0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent, receive_inbox, send_reply, records)
        start = time.perf_counter()
        for i in range(turns):
            send_inbox.send_nowait(f"hello {i}")
            await receive_reply.receive()
        elapsed = time.perf_counter() - start
        nursery.cancel_scope.cancel()
    return elapsed
