"""The one LIFO stack of everything a fiber owns.

Rules:
- An :class:`Entry` is one owned thing with one async exit. Entries unwind strictly last in,
  first out, one at a time, each awaited to completion.
- A failing exit never skips later entries: every failure is collected and returned.
- An effect's exit sees the exception unwinding the stack, as under
  :class:`contextlib.AsyncExitStack`: what unwinds the fiber (its failure, or ``Cancelled``),
  or, once an exit failed, that exit's failure (passed on, with its ``__context__`` set).
- Unlike :class:`contextlib.AsyncExitStack`, no exit can suppress: its return value is
  ignored, so no entry can swallow the fiber's failure or another entry's. An exit that
  re-raises the exception it was given (as is, or inside a group, as a nursery does) adds no
  failure of its own.
- An entry whose thing ended on its own (a finished task, a child fiber disposed directly)
  leaves the stack with :meth:`Entry.discard`; a fiber that spawns many short tasks does not
  accumulate entries.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import final

import attrs
import trio


@final
@attrs.define(eq=False, repr=False)
class Entry:
    """One thing a fiber owns, and the async exit that releases it.

    The exit is ``await exit(*args)``. Trick: arguments, not a closure per entry; closures
    would be 2 KiB more per idle agent (python -m benchmarks --only memory). It runs at most
    once; concurrent closers join the one run, which is shielded: a closer cancelled
    mid-exit does not cut it short, and every closer returns after it.

    With ``unwinding=True`` the exit is called as ``await exit(*args, type, value,
    traceback)`` of the exception unwinding the stack (``None`` three times on a clean
    unwind), as ``__aexit__`` is.

    Args:
        label: what kind of thing it owns (``"effect"``, ``"task"``); the :attr:`label` is
            made when read, ``"<label> <about>"`` (a function named by its qualified name).
            Trick: an entry holds no string of its own, 570 B less per idle agent (python -m
            benchmarks --only memory).
        exit: the async exit, called with ``args``.
        about: what it owns, for the label.
    """

    _kind: str = attrs.field(alias="label")
    _exit: Callable[..., Awaitable[object]] = attrs.field(alias="exit")
    _args: tuple[object, ...] = attrs.field(default=(), alias="args")
    _about: object = attrs.field(default=None, kw_only=True, alias="about")
    _unwinding: bool = attrs.field(default=False, kw_only=True, alias="unwinding")
    _stack: OwnedStack | None = attrs.field(default=None, init=False)
    _closed: trio.Event | None = attrs.field(default=None, init=False)

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
        """Release the thing now, ahead of its fiber's teardown (a clean exit).

        Returns when the exit has run to completion, also for a concurrent closer.
        """
        self.discard()
        await self._run_exit(None, shield=True)

    async def _run_exit(self, unwinding: BaseException | None, *, shield: bool = False) -> None:
        if self._closed is not None:
            await self._closed.wait()
            return
        self._closed = trio.Event()
        args = self._args
        if self._unwinding:
            if unwinding is None:
                args = (*args, None, None, None)
            else:
                args = (*args, type(unwinding), unwinding, unwinding.__traceback__)
        try:
            if shield:
                # Invariant: the exit runs to completion once started; a joiner waits on
                # `_closed`, which a cancelled first closer must not set early (pinned by
                # tests/kernel/test_stack.py::test_cancelled_first_closer_still_completes_the_exit).
                with trio.CancelScope(shield=True):
                    await self._exit(*args)
            else:
                await self._exit(*args)
        finally:
            self._closed.set()

    def __repr__(self) -> str:
        return f"<Entry {self.label!r} owned={self.owned}>"


@final
@attrs.define(eq=False, repr=False)
class OwnedStack:
    """The ordered entries of one fiber application."""

    # Invariant: dict order is push order, so popitem() yields the newest entry. Keyed by the
    # entries themselves (identity): no key object per entry.
    _entries: dict[Entry, None] = attrs.field(factory=dict, init=False)
    #: Set when a section's stack starts to unwind: it takes no more entries.
    closed: bool = attrs.field(default=False, init=False)

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

    async def unwind(self, unwinding: BaseException | None = None) -> list[BaseException]:
        """Exit every entry, newest first; return the failures in the order they happened.

        Args:
            unwinding: the exception that unwinds the stack (``None`` for a clean unwind);
                an exit that takes it sees it, or the failure of a later exit.
        """
        errors: list[BaseException] = []
        while self._entries:
            entry, _ = self._entries.popitem()
            entry._stack = None
            try:
                await entry._run_exit(unwinding)
            except BaseException as exc:  # collected; the caller raises them
                failure = _own_part(exc, unwinding)
                if failure is not None:
                    errors.append(failure)
                    if failure is exc:
                        _chain(exc, unwinding)
                    unwinding = exc
        return errors


def _own_part(raised: BaseException, given: BaseException | None) -> BaseException | None:
    """What ``raised`` adds to ``given``: ``None`` if it is ``given``, as is or in a group."""
    if given is None:
        return raised
    if raised is given:
        return None
    if isinstance(raised, BaseExceptionGroup):
        _, rest = raised.split(lambda exc: exc is given)
        return rest
    return raised


def _chain(raised: BaseException, given: BaseException | None) -> None:
    """Put ``given`` at the end of ``raised``'s context chain, as AsyncExitStack does."""
    if given is None:
        return
    chain = [raised]
    while (context := chain[-1].__context__) is not None:
        if context is given:
            return
        chain.append(context)
    seen: BaseException | None = given
    while seen is not None:
        if any(seen is exc for exc in chain):
            return  # linking would make a cycle
        seen = seen.__context__
    chain[-1].__context__ = given
