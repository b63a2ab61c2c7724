"""The queue's database access from trio: a few connections used from worker threads, and a
``LISTEN`` connection that waits in a thread of its own.

Rules:
- Calls run in worker threads on a :class:`ThreadConnections` (the session store's kind):
  shielded, a broken connection dropped and the next call opening a new one.
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
from typing import ParamSpec, TypeVar

import attrs
import psycopg
import trio
from psycopg import sql as pgsql

from .._base import ThreadConnections, close_quietly
from . import _sql as sql

log = logging.getLogger("trio_agents")

P = ParamSpec("P")
T = TypeVar("T")


def where(dsn: str) -> str:
    """The DSN without its password, for messages."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    host, port, db = parts.get("host", "localhost"), parts.get("port", 5432), parts.get("dbname")
    return f"PostgreSQL at {host}:{port}" + (f" (database {db})" if db else "")


def pool(dsn: str, stalled_after: float = 30.0) -> ThreadConnections[sql.Conn]:
    """A few connections to the queue's database (at most 4 at once), each ended by the server
    when it idles ``stalled_after`` seconds in a transaction (a stopped process's: the worker's
    lease)."""

    def unreachable(exc: BaseException) -> Exception | None:
        if not isinstance(exc, psycopg.OperationalError):
            return None
        return ConnectionError(
            f"cannot reach the work queue's database, {where(dsn)}: "
            f"{' '.join(str(exc).split())}; check that the server runs and the DSN is right"
        )

    return ThreadConnections(
        lambda: sql.connect(dsn, stalled_after), trio.CapacityLimiter(4), unreachable
    )


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
                    close_quietly(conn)
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
