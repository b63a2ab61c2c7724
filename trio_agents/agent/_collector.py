"""The opt-in tuning of CPython's cyclic garbage collector: ``open_runtime(gc_threshold=)``.

Rules:
- Nothing changes unless the option is given: the collector's thresholds are process-global,
  so the library touches them only when the application asks.
- Given, the generation-0 threshold is set when the runtime opens and the previous thresholds
  (all three) are restored when it closes, on every path (an error, a cancellation); the
  generation-1 and generation-2 thresholds are left as they were.

Why it pays (issue #43, ``python -m benchmarks --only many``): with thousands of agents live,
the objects of every turn in flight survive the young collections, are promoted, and make
full collections (each walking every live agent's objects) frequent: 24-65 % of the CPU at
10,000 agents. A threshold of 100,000 lets a turn's objects die young; see
``docs/benchmarks.rst`` for the figures with and without.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


def check_gc_threshold(threshold: int | None) -> None:
    """Refuse a threshold the collector cannot take (before anything is opened).

    Raises:
        ValueError: ``threshold`` is not a positive int.
    """
    if threshold is None:
        return
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ValueError(
            f"gc_threshold is the collector's generation-0 threshold, an int >= 1 "
            f"(e.g. 100_000), or None to leave the collector alone; got {threshold!r}"
        )


@asynccontextmanager
async def collector_threshold(threshold: int | None) -> AsyncIterator[None]:
    """Set the collector's generation-0 threshold inside the block; restore all three after.

    Async only to sit first in ``open_runtime``'s ``async with``, whose next entry
    checkpoints; it does not checkpoint itself.
    """
    if threshold is None:
        yield
        return
    previous = gc.get_threshold()
    gc.set_threshold(threshold, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
