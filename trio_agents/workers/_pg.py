"""The queue's database access from trio: a few connections used from worker threads, and a
``LISTEN`` connection that waits in a thread of its own.

Rules:
- A call runs ``fn(conn, *args)`` in a worker thread, shielded (a thread cannot be
  cancelled; shielding keeps the connection's bookkeeping whole); a broken connection is
  dropped and the next call opens a new one.
- The listener's thread waits in ``select`` on its connection and on a pipe; the listener's
  task writes the pipe when it is cancelled, so the thread ends at once and the task returns
  only after it has (no thread outlives the fiber that owns the listener). Notifications
  reach trio through ``TrioToken.run_sync_soon`` (the thread never blocks on trio). A lost
  connection is opened again after a second, and the callback is called with an empty
  channel then, since notifications may have been missed.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import attrs
import outcome
import psycopg
import trio
from psycopg import sql as pgsql

from . import _sql as sql

__all__ = ["Listener", "Pool", "where"]

log = logging.getLogger("trio_agents")

P = ParamSpec("P")
T = TypeVar("T")


def where(dsn: str) -> str:
    """The DSN without its password, for messages."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    host, port, db = parts.get("host", "localhost"), parts.get("port", 5432), parts.get("dbname")
    return f"PostgreSQL at {host}:{port}" + (f" (database {db})" if db else "")


def _call(
    pool: Pool, conn: sql.Conn | None, fn: Callable[..., T], args: tuple[Any, ...]
) -> tuple[sql.Conn | None, outcome.Outcome[T]]:
    if conn is None or conn.closed:
        try:
            conn = sql.connect(pool.dsn, pool.stalled_after)
        except BaseException as exc:
            return None, outcome.Error(exc)
    result = outcome.capture(fn, conn, *args)
    if conn.broken:
        sql.close_quietly(conn)
        return None, result
    return conn, result


@attrs.define(eq=False)
class Pool:
    """A few connections, each used by one thread at a time."""

    dsn: str
    #: Seconds idle in a transaction after which the server ends a connection (a stopped
    #: process's): the worker's lease.
    stalled_after: float = 30.0
    limit: trio.CapacityLimiter = attrs.field(factory=lambda: trio.CapacityLimiter(4))
    idle: builtins.list[sql.Conn] = attrs.field(factory=builtins.list)
    closed: bool = False

    async def run(self, fn: Callable[Concatenate[sql.Conn, P], T], *args: Any) -> T:
        async with self.limit:
            conn = self.idle.pop() if self.idle else None
            with trio.CancelScope(shield=True):
                kept, result = await trio.to_thread.run_sync(_call, self, conn, fn, args)
            if kept is not None:
                if self.closed:
                    sql.close_quietly(kept)
                else:
                    self.idle.append(kept)
        if isinstance(result, outcome.Error) and isinstance(result.error, psycopg.OperationalError):
            raise ConnectionError(
                f"cannot reach the work queue's database, {where(self.dsn)}: "
                f"{' '.join(str(result.error).split())}; check that the server runs and the "
                f"DSN is right"
            ) from result.error
        return result.unwrap()

    async def aclose(self) -> None:
        self.closed = True
        conns, self.idle = self.idle, []
        # Shielded: a teardown under a cancel (the worker's task was cancelled) still closes.
        with trio.CancelScope(shield=True):
            for conn in conns:
                await trio.to_thread.run_sync(sql.close_quietly, conn)


@attrs.define(eq=False)
class Listener:
    """``LISTEN`` on ``channels``; ``notify(channel, payload)`` runs in trio for each
    notification (``("", "")`` after a reconnection)."""

    dsn: str
    channels: Sequence[str]
    notify: Callable[[str, str], object]
    #: The listening threads alive now (the disposal test reads it).
    threads: builtins.set[threading.Thread] = attrs.field(factory=set)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        token = trio.lowlevel.current_trio_token()
        stop_read, stop_write = os.pipe()
        listening = trio.Event()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._stopper, stop_write)
                thread_done = trio.Event()

                async def thread() -> None:
                    try:
                        await trio.to_thread.run_sync(
                            self._loop, token, stop_read, lambda: token.run_sync_soon(listening.set)
                        )
                    finally:
                        thread_done.set()

                nursery.start_soon(thread)
                await listening.wait()
                task_status.started()
                await thread_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            os.close(stop_read)
            with contextlib.suppress(OSError):
                os.close(stop_write)

    async def _stopper(self, stop_write: int) -> None:
        try:
            await trio.sleep_forever()
        finally:
            os.write(stop_write, b"x")

    def _loop(self, token: trio.lowlevel.TrioToken, stop: int, started: Callable[[], None]) -> None:
        self.threads.add(threading.current_thread())
        try:
            first = True
            while True:
                try:
                    conn = sql.connect(self.dsn)
                except psycopg.Error as exc:
                    log.warning("the work queue's LISTEN connection failed (%s)", exc)
                    if select.select([stop], [], [], 1.0)[0]:
                        return
                    continue
                try:
                    for channel in self.channels:
                        conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(channel)))
                    if first:
                        started()
                        first = False
                    else:
                        token.run_sync_soon(self.notify, "", "")
                    if self._wait(conn, token, stop):
                        return
                except psycopg.Error as exc:
                    log.warning("the work queue's LISTEN connection broke (%s)", exc)
                    if select.select([stop], [], [], 1.0)[0]:
                        return
                finally:
                    sql.close_quietly(conn)
        finally:
            self.threads.discard(threading.current_thread())

    def _wait(self, conn: sql.Conn, token: trio.lowlevel.TrioToken, stop: int) -> bool:
        """Deliver notifications until ``stop`` is written (``True``) or the connection
        breaks (raises)."""
        sock = conn.pgconn.socket
        while True:
            ready = select.select([sock, stop], [], [])[0]
            if stop in ready:
                return True
            for note in conn.notifies(timeout=0):
                token.run_sync_soon(self.notify, note.channel, note.payload)
            if conn.broken or conn.closed:
                raise psycopg.OperationalError("the LISTEN connection closed")
