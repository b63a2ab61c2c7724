"""``ThreadConnections``: a few blocking database connections, used from trio through worker
threads, each by one thread at a time (the PostgreSQL store and the work queue share it).

Rules:
- A call runs ``fn(conn, *args)`` in a worker thread, shielded: a thread cannot be cancelled,
  and shielding keeps the connection's bookkeeping whole.
- A connection is opened in the thread when none is idle; one that is ``broken`` after a call
  is closed and dropped, so the next call opens a new one.
- An error the caller's ``unreachable`` recognizes (the server cannot be reached) is raised as
  what it returns; any other error of ``fn`` is raised as it is.
- After ``aclose`` every idle connection is closed, and one a call hands back is closed too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, final

import attrs
import outcome
import trio

P = ParamSpec("P")
T = TypeVar("T")


class BlockingConnection(Protocol):
    """What the pool needs of a connection (a psycopg ``Connection`` is one)."""

    @property
    def closed(self) -> bool:
        """Whether the connection was closed."""

    @property
    def broken(self) -> bool:
        """Whether the connection was lost (it must not be used again)."""

    def close(self) -> None:
        """Close it."""


C = TypeVar("C", bound=BlockingConnection)


def _close_quietly(conn: BlockingConnection) -> None:
    with contextlib.suppress(Exception):  # a broken connection may refuse to close cleanly
        conn.close()


@final
@attrs.define(eq=False)
class ThreadConnections(Generic[C]):
    """At most ``limit`` connections opened with ``connect()``, each used by one thread at a
    time.

    Attributes:
        connect: opens a connection (called in a worker thread).
        limit: how many calls run at once (and so how many connections are open at most).
        unreachable: maps an error of a call to the error to raise instead (the server cannot
            be reached: a readable one-line error), or ``None`` to raise the error as it is.
    """

    connect: Callable[[], C]
    limit: trio.CapacityLimiter
    unreachable: Callable[[BaseException], Exception | None] = lambda exc: None
    _idle: list[C] = attrs.field(factory=list, init=False)
    _closed: bool = attrs.field(default=False, init=False)

    async def run(self, fn: Callable[Concatenate[C, P], T], *args: Any) -> T:
        """``fn(conn, *args)`` in a worker thread, on an idle connection or a new one."""
        async with self.limit:
            conn = self._idle.pop() if self._idle else None
            with trio.CancelScope(shield=True):
                kept, result = await trio.to_thread.run_sync(self._call, conn, fn, args)
            if kept is not None:
                if self._closed:
                    _close_quietly(kept)
                else:
                    self._idle.append(kept)
        if isinstance(result, outcome.Error):
            replaced = self.unreachable(result.error)
            if replaced is not None:
                raise replaced from result.error
        return result.unwrap()

    def _call(
        self, conn: C | None, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> tuple[C | None, outcome.Outcome[T]]:
        """In a worker thread: run ``fn(conn, *args)`` on ``conn`` (or a new connection)."""
        if conn is None or conn.closed:
            try:
                conn = self.connect()
            except BaseException as exc:
                return None, outcome.Error(exc)
        result = outcome.capture(fn, conn, *args)
        if conn.broken:
            _close_quietly(conn)
            return None, result
        return conn, result

    async def aclose(self) -> None:
        """Close every idle connection (shielded: a teardown under a cancel still closes)."""
        self._closed = True
        conns, self._idle = self._idle, []
        with trio.CancelScope(shield=True):
            for conn in conns:
                await trio.to_thread.run_sync(_close_quietly, conn)
