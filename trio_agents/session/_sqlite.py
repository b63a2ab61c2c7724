"""The SQLite backend: every session in one database file, written by one background task.

Rules:
- Appends are serialized at once (a record JSON cannot hold is refused by ``append``, as in
  every backend) and queued; the writer task commits queued rows within ``flush_interval``
  in a *write* batch (no fsync: the OS keeps them across a process kill).
- ``flush`` is group commit: it asks for the *next* sync batch and waits for it. A sync batch
  commits every dirty session in one transaction, in one worker-thread round trip, with one
  fsync of the write-ahead log (``synchronous=FULL``); flushes that arrive while a batch is in
  flight share the next one. See :mod:`._sqlite_io` for the database rules.
- Only the writer task (and, holding the same lock, ``enter``'s, ``abandon``'s and
  ``delete``'s short transactions) uses the writing connection; reads (``load``, ``list``)
  use a second connection and never wait for a commit.
- A cancelled flush loses and duplicates nothing: the caller only waits for the batch; the
  batch runs to its end in its thread, shielded, and its rows are committed exactly once
  (or, when the transaction fails, queued again whole).
- A batch that fails (a full disk, an I/O error, a refused row) costs nothing already
  committed: the transaction rolls back, its rows are queued again in order, the flush that
  asked raises ``SessionWriteError``, and the session's writes stop there; the next flush
  writes them again.
- A read-only store (``read_only=True``) never writes: it creates no file, takes no lock and
  refuses ``enter`` and ``delete``. A writable store owns its database: a second writer, in
  another process or another store object, is refused when it is applied.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, final

import attrs
import trio

from . import _sqlite_io as io
from ._backend import Stored
from ._batches import Batch, BatchWriter, WriteState, read_only_refusal, write_failure
from ._convert import dump_record
from ._errors import (
    SessionFormatError,
    SessionNotFoundError,
    SessionWriteError,
)
from ._records import Record
from ._session import Session
from ._state import SessionState
from ._store import SessionStore
from ._summary import SessionInfo
from ._writelog import WriteLog

if TYPE_CHECKING:
    from ..kernel import Context

T = TypeVar("T")


@attrs.define(eq=False, kw_only=True)
class _Row(WriteState[str]):
    """The SQLite backend's state for one session; its log holds the JSON lines of the
    session's records (a committed row is never lost, so it keeps no unsynced lines)."""

    # Invariant: a *new* session's first write replaces any stored session of its id.
    new: bool
    # Whether the database holds this session's row (resumed, or written by a batch of it).
    stored: bool


@final
class SqliteStore(SessionStore[_Row]):
    """A :class:`SessionStore` that keeps every session in one SQLite database file.

    Args:
        path: the database file (created, with its directory, when applied writable).
        flush_interval: the longest time, in seconds, an appended record waits before the
            background writer commits it (without fsync).
        read_only: only read (``list``, ``load``): the store creates nothing, takes no lock,
            and refuses ``enter`` and ``delete`` with a :class:`SessionWriteError`.

    Applying the store opens the database (writable: takes the lock that keeps other
    writers out, and creates the tables).

    Raises:
        ValueError: ``flush_interval`` is negative or not finite.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval: float = 0.05,
        read_only: bool = False,
    ) -> None:
        super().__init__()
        self._path = Path(path)
        self._batches = BatchWriter(flush_interval, self._run_batch)
        self._read_only = read_only
        self._writer_db: io.Database | None = None
        self._reader_db: io.Database | None = None
        # Invariant: one thread at a time on each connection.
        self._write_lock = trio.Lock()
        self._read_lock = trio.Lock()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def read_only(self) -> bool:
        """Whether this store only reads (see the class arguments)."""
        return self._read_only

    def __repr__(self) -> str:
        return f"<SqliteStore {str(self._path)!r}>"

    # -- the database ------------------------------------------------------------------------

    async def _open(self, ctx: Context) -> None:
        self._batches.reset()
        # Invariant: pushed before the writer task, so the connections close after it stopped.
        ctx.defer(self._close_databases)
        if self._read_only:
            reader = await trio.to_thread.run_sync(
                partial(io.open_database, self._path, read_only=True)
            )
            if reader is not None:
                self._reader_db = reader
                await self._reading(reader.check)
            return
        self._writer_db = await trio.to_thread.run_sync(
            partial(io.open_database, self._path, read_only=False)
        )
        self._reader_db = await trio.to_thread.run_sync(io.open_reader, self._path)
        await ctx.start(self._batches.run)

    async def _close_databases(self) -> None:
        for db in (self._reader_db, self._writer_db):
            if db is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(db.close)
        self._reader_db = self._writer_db = None

    async def _writing(self, fn: Callable[[], T]) -> T:
        # The thread cannot be cancelled anyway; shielding keeps the bookkeeping whole.
        with trio.CancelScope(shield=True):
            async with self._write_lock:
                result: T = await trio.to_thread.run_sync(fn)
        return result

    async def _reading(self, fn: Callable[[], T]) -> T:
        async with self._read_lock:
            return await trio.to_thread.run_sync(fn)

    def _refuse_write(self, what: str) -> SessionWriteError:
        return read_only_refusal(f"the session database {self._path}", what)

    # -- the writer task ---------------------------------------------------------------------

    async def _run_batch(self, batch: Batch | None, rows: dict[Session, _Row]) -> None:
        sync = batch is not None
        now = time.time()
        jobs: builtins.list[io.WriteJob] = []
        for session, row in rows.items():
            first = row.log.written_seq + 1
            jobs.append(
                io.WriteJob(session.id, row.new and not row.stored, first, row.log.take(), now)
            )
        self._write_batches += 1
        self._sync_batches += sync
        db = self._writer_db
        assert db is not None
        results: builtins.list[Exception | None] | None = None
        failure: Exception | None = None
        try:
            results = await self._writing(partial(db.write_batch, jobs, sync=sync))
        except Exception as exc:  # sqlite3.Error, OSError: nothing was committed
            failure = exc
        finally:
            for i, (session, row) in enumerate(rows.items()):
                error = failure if results is None else results[i]
                if error is None and results is None:
                    error = RuntimeError("the write batch did not complete")
                self._settle(session, row, error, sync)
            if batch is not None:
                batch.done.set()

    def _settle(self, session: Session, row: _Row, error: BaseException | None, sync: bool) -> None:
        if error is not None:
            # The transaction (or this session's savepoint) rolled back: its lines wait for
            # the next flush, in order.
            row.log.fail()
            self._fail(session, row, error)
            return
        row.stored = True
        row.log.settle(synced=sync)
        if not sync and not row.abandoned:
            self._batches.mark_sync(session, row)

    def _fail(self, session: Session, row: _Row, error: BaseException) -> None:
        # An error of the database as a whole already names the file and the cause.
        why = (
            f"failed: {error}"
            if isinstance(error, SessionFormatError | SessionWriteError)
            else f"to {self._path} failed ({error})"
        )
        message = (
            f"writing session {session.id!r} {why}; its records from seq "
            f"{row.log.synced_seq + 1} on are not durable — the next flush writes them again"
        )
        self._batches.forget(session)
        row.error = row.last_error = write_failure(message, row.last_error, session.id, self._emit)

    # -- the backend hooks ---------------------------------------------------------------------

    def _begin(self, session: Session, stored: Stored | None) -> _Row:
        n = len(stored.records) if stored is not None else 0
        return _Row(new=stored is None, stored=stored is not None, log=WriteLog(n - 1))

    def _on_record(self, session: Session, record: Record) -> None:
        state = self._state(session)
        state.log.add(dump_record(record))
        if session.state is SessionState.LIVE and state.error is None and not state.abandoned:
            self._batches.mark(session, state)

    async def _enter(self, session: Session) -> None:
        state = self._state(session)
        if self._read_only:
            raise self._refuse_write(f"enter session {session.id!r}")
        await trio.lowlevel.checkpoint()
        # (The store checked that a new session's id is not stored.) Invariant: no checkpoint
        # from here until the session is live, so every record appended so far is queued.
        if state.log.pending or not state.stored:
            self._batches.mark(session, state)

    async def _sync(self, session: Session) -> int:
        state = self._state(session)
        log = state.log
        # A new attempt writes every line since the last commit again.
        self._batches.retry_failed(session, state)
        if log.clean and state.stored:
            await trio.lowlevel.checkpoint()
            return log.synced_seq
        self._batches.check_running(session.id)
        if log.pending or not state.stored:
            self._batches.mark(session, state)
        if log.written_seq > log.synced_seq and not log.in_flight:
            self._batches.mark_sync(session, state)
        return await self._batches.wait_synced(state)

    async def _discard(self, session: Session) -> None:
        state = self._state(session)
        new = await self._batches.abandon(session, state, new=state.new)
        if new and state.stored and self._writer_db is not None:
            # Invariant: `stored` on a new session means one of its batches wrote the row.
            db = self._writer_db
            with contextlib.suppress(SessionNotFoundError):
                await self._writing(partial(db.remove, session.id))
            state.stored = False
        else:
            await trio.lowlevel.checkpoint()

    async def _release(self, session: Session) -> None:
        self._batches.forget(session)
        await trio.lowlevel.checkpoint()

    async def is_stored(self, session_id: str) -> bool:
        db = self._reader_db
        if db is None:
            await trio.lowlevel.checkpoint()
            return False
        return await self._reading(partial(db.exists, session_id))

    async def _read(self, session_id: str) -> Stored:
        db = self._reader_db
        if db is None:
            await trio.lowlevel.checkpoint()
            raise SessionNotFoundError(
                f"no stored session has the id {session_id!r} (no database {self._path} yet); "
                f"see store.list()"
            )
        records = await self._reading(partial(db.read_session, session_id))
        return Stored(records=records)

    async def _remove(self, session_id: str) -> None:
        await self._remove_tree((session_id,))

    async def _remove_tree(self, session_ids: Sequence[str]) -> None:
        if self._read_only or self._writer_db is None:
            raise self._refuse_write(f"delete session {session_ids[-1]!r}")
        db = self._writer_db
        await self._writing(partial(db.remove, session_ids[-1], *session_ids[:-1]))

    async def _stored_parents(self) -> dict[str, str | None]:
        db = self._reader_db
        if db is None:
            await trio.lowlevel.checkpoint()
            return {}
        return await self._reading(db.parents)

    async def _list_stored(self) -> builtins.list[SessionInfo]:
        db = self._reader_db
        if db is None:
            await trio.lowlevel.checkpoint()
            return []
        return await self._reading(db.scan)
