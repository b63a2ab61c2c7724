"""The one LIFO stack of everything a fiber owns.

Rules:
- An :class:`Entry` is one owned thing with one async exit. Entries unwind strictly last in,
  first out, one at a time, each awaited to completion.
- A failing exit never skips later entries: every failure is collected and returned.
- Unlike :class:`contextlib.AsyncExitStack`, an exit never sees the previous exit's exception,
  so no entry can swallow another entry's failure.
- An entry whose thing ended on its own (a finished task, a child fiber disposed directly)
  leaves the stack with :meth:`Entry.discard`; a fiber that spawns many short tasks does not
  accumulate entries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import final

import trio

__all__ = ["Entry", "OwnedStack"]


@final
class Entry:
    """One thing a fiber owns, and the async exit that releases it.

    The exit runs at most once; concurrent closers join the one run.
    """

    __slots__ = ("_about", "_args", "_closed", "_exit", "_kind", "_stack")

    def __init__(
        self,
        label: str,
        exit: Callable[..., Awaitable[object]],
        *args: object,
        about: object = None,
    ) -> None:
        # The label is made when read: "<label> <about>" (a function is named by its
        # qualified name), so an entry holds no string of its own.
        self._kind = label
        self._about = about
        # The exit is `await exit(*args)`: arguments instead of a closure per entry.
        self._exit = exit
        self._args = args
        self._stack: OwnedStack | None = None
        self._closed: trio.Event | None = None

    @property
    def label(self) -> str:
        """What the entry owns, for statistics and error messages."""
        about = self._about
        if about is None:
            return self._kind
        return f"{self._kind} {getattr(about, '__qualname__', about)}"

    @property
    def owned(self) -> bool:
        """Whether the entry is still on its fiber's stack."""
        return self._stack is not None

    def discard(self) -> None:
        """Leave the stack without running the exit (the owned thing already ended)."""
        if self._stack is not None:
            self._stack._entries.pop(self, None)
            self._stack = None

    async def close(self) -> None:
        """Release the thing now, ahead of its fiber's teardown."""
        self.discard()
        await self._run_exit()

    async def _run_exit(self) -> None:
        if self._closed is not None:
            await self._closed.wait()
            return
        self._closed = trio.Event()
        try:
            await self._exit(*self._args)
        finally:
            self._closed.set()

    def __repr__(self) -> str:
        return f"<Entry {self.label!r} owned={self.owned}>"


@final
class OwnedStack:
    """The ordered entries of one fiber application."""

    __slots__ = ("_entries", "closed")

    def __init__(self) -> None:
        # Invariant: dict order is push order, so popitem() yields the newest entry.
        # Keyed by the entries themselves (identity): no key object per entry.
        self._entries: dict[Entry, None] = {}
        #: Set when a section's stack starts to unwind: it takes no more entries.
        self.closed = False

    def push(self, entry: Entry) -> Entry:
        """Own ``entry``; it will unwind before every entry pushed earlier."""
        entry._stack = self
        self._entries[entry] = None
        return entry

    def labels(self) -> tuple[str, ...]:
        """The labels of the entries, oldest first."""
        return tuple(e.label for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    async def unwind(self) -> list[BaseException]:
        """Exit every entry, newest first; return the failures in the order they happened."""
        errors: list[BaseException] = []
        while self._entries:
            entry, _ = self._entries.popitem()
            entry._stack = None
            try:
                await entry._run_exit()
            except BaseException as exc:  # collected; the caller raises them
                errors.append(exc)
        return errors
