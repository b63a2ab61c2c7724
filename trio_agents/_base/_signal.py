"""A one-shot signal that costs an event only once someone waits for it.

Rules:
- ``set()`` is sticky and idempotent; ``wait()`` returns at once (after a checkpoint) when set.
- The :class:`trio.Event` behind it (an event and a parking lot, about 0.5 KiB) is made by the
  first ``wait()`` that has to block: a fiber or an agent holds several signals that nobody
  awaits for most of its life (its end, its application's end), and a long-lived server
  holds many fibers.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import final

import trio

__all__ = ["Signal", "Wake"]


@final
class Signal:
    """Like :class:`trio.Event` (``set``, ``is_set``, ``wait``), made lazily."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: trio.Event | None = None

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Set the signal and wake every waiter."""
        if not self._set:
            self._set = True
            if self._event is not None:
                self._event.set()

    def wait(self) -> Awaitable[None]:
        """Return once the signal is set (a checkpoint either way): ``await signal.wait()``.

        A plain function that hands back trio's own awaitable, so a waiter holds no frame of
        this one.
        """
        if self._set:
            return trio.lowlevel.checkpoint()  # noqa: ASYNC105 - the caller awaits it
        if self._event is None:
            self._event = trio.Event()
        return self._event.wait()

    def __repr__(self) -> str:
        return f"<Signal {'set' if self._set else 'unset'}>"


@final
class Wake:
    """A one-shot wake-up for a single waiting task: what a fiber's task and an agent's loop
    park on while idle. The waiter parks itself with ``wait_task_rescheduled`` and ``set``
    reschedules it, so an idle task holds no :class:`trio.Event`, no parking lot and two
    frames less than one waiting on an Event.

    Raises:
        RuntimeError: a second task waits while one is waiting.
    """

    __slots__ = ("_set", "_task")

    def __init__(self) -> None:
        self._set = False
        self._task: trio.lowlevel.Task | None = None

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Set it and wake the waiter, if one waits."""
        if self._set:
            return
        self._set = True
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def wait(self) -> Awaitable[None]:
        """Return once it is set (a checkpoint either way): ``await wake.wait()``.

        A plain function that registers the calling task and hands back trio's own trap, so
        the parked waiter holds no frame of this one (450 B less per idle agent). Call it in
        the task that waits and await what it returns at once: ``start_soon(wake.wait)``
        would register the spawning task, since trio calls the function there.
        """
        if self._set:
            return trio.lowlevel.checkpoint()  # noqa: ASYNC105 - the caller awaits it
        if self._task is not None:
            raise RuntimeError(f"{self!r} already has a waiter ({self._task.name})")
        self._task = trio.lowlevel.current_task()
        return trio.lowlevel.wait_task_rescheduled(self._abort)  # noqa: ASYNC105 - awaited by the caller

    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def __repr__(self) -> str:
        return f"<Wake {'set' if self._set else 'unset'}>"
