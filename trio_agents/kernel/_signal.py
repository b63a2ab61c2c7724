"""A one-shot signal that costs an event only once someone waits for it.

Rules:
- ``set()`` is sticky and idempotent; ``wait()`` returns at once (after a checkpoint) when set.
- The :class:`trio.Event` behind it (an event and a parking lot, about 0.5 KiB) is made by the
  first ``wait()`` that has to block: a fiber or an agent holds several signals that nobody
  awaits for most of its life (its end, its application's end), and a long-lived server
  holds many fibers.
"""

from __future__ import annotations

from typing import final

import trio

__all__ = ["Signal"]


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

    async def wait(self) -> None:
        """Return once the signal is set (a checkpoint either way)."""
        if self._set:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()

    def __repr__(self) -> str:
        return f"<Signal {'set' if self._set else 'unset'}>"
