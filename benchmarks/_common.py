"""Helpers shared by the benchmarks: best-of-N timing and the printed lines."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

__all__ = ["best_rates", "line"]


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
