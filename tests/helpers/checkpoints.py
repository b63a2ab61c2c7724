"""Cancel an operation's caller at its k-th checkpoint, for every k (the rule of issue 9).

Imported as ``from tests.helpers.checkpoints import ...``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")


class AtStep(trio.abc.Instrument):
    """Calls ``action()`` right after the ``k``-th task step of the run (any task) from now:
    so ``k = 1, 2, ...`` reaches every checkpoint of an operation and of the tasks it
    starts. Whatever order trio picks for one batch, every assertion must hold."""

    def __init__(self, k: int, action: Callable[[], object]) -> None:
        self.k = k
        self.action = action
        self.steps = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1
        if self.steps == self.k:
            self.action()

    @property
    def fired(self) -> bool:
        return self.steps >= self.k


async def cancelled_at_step(
    k: int, call: Callable[[], Awaitable[T]]
) -> tuple[T | None, bool, bool]:
    """Await ``call()`` with the caller cancelled right after the ``k``-th task step from now:
    its result (``None`` if it did not return), whether the cancel was caught, and whether
    step ``k`` came before it returned."""
    scope = trio.CancelScope()
    instrument = AtStep(k, scope.cancel)
    trio.lowlevel.add_instrument(instrument)
    result = None
    fired = True
    try:
        with scope:
            result = await call()
            fired = instrument.fired
    finally:
        trio.lowlevel.remove_instrument(instrument)
    return result, scope.cancelled_caught, fired
