"""The PostgreSQL backend: every session in one database, shared by many workers.

Rules:
- All SQL is in :mod:`._postgres_sql`, psycopg 3's synchronous API, run in worker threads
  (the trio loop never blocks); each call is one transaction on a connection of the store's
  small pool. psycopg is imported only when a store is made, so the rest of the package
  works without it (the ``postgres`` extra).
- Leases (one live owner per session id, across processes and machines): ``enter`` takes the
  session row's lease for this store (its owner id is new each time the store is applied),
  with an expiry on the database's clock; a background task of the store's fiber renews
  every live lease each ``renew_every`` seconds; the session's end releases it. A lease
  another worker holds makes ``enter`` raise ``SessionIdInUseError`` ("in use by another
  worker"); an expired one (its worker died or stalled) may be taken over, which increments
  the lease's epoch.
- Fencing: every write names the lease epoch, and the database refuses a write whose epoch
  is no longer the session's (see :mod:`._postgres_sql`). A session whose lease was taken
  over writes nothing more: its flushes raise :class:`SessionLeaseLostError`, once
  announced as ``SessionWriteFailed``; what the new owner writes is never interleaved.
- Appends are serialized at once (a record JSON cannot hold is refused by ``append``), as
  the same JSON lines as the JSONL store, and queued; a writer task commits queued records
  within ``flush_interval``. ``flush`` is group commit: it asks for the *next* batch and
  waits for it; flushes that arrive while a batch commits share the next one (one
  transaction for every session in it).
- A batch whose transaction fails wrote nothing: its records are queued again, the flushes
  waiting for it raise ``SessionWriteError``, and the next flush writes them again.
- Rides (:class:`Ride`, ``ride``, ``flush_riding``): a statement of the layer above (the work
  queue's settle) sent in the transaction of the write batch that takes the session, after its
  records, fenced as they are (``_postgres_sql.Fence``): durable with them or not at all, and
  no round trip of its own. A ride's ``item()`` is asked at each batch that takes the session
  (``None``: not yet), so it can ride in the batch that makes what it waits for durable. A
  batch that fails, a lost lease or the session's end ends a ride with an error. A
  ``flush_riding`` whose caller is cancelled takes its ride off, unless a batch took it.
"""

from __future__ import annotations

import builtins
import logging
import math
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, final

import attrs
import trio

from .._base import ThreadConnections
from ._backend import Stored
from ._batches import Batch, BatchWriter
from ._convert import dump_record
from ._errors import SessionClosedError, SessionWriteError
from ._events import SessionWriteFailed
from ._records import Record
from ._session import Session
from ._store import SessionStore
from ._summary import SessionInfo, Summary
from ._writelog import WriteLog

if TYPE_CHECKING:
    from ..kernel import Context
    from . import _postgres_sql as sql

log = logging.getLogger("trio_agents")

P = ParamSpec("P")
T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")

_EXTRA_HINT = "install the 'postgres' extra: pip install 'trio-agents[postgres]'"


class SessionLeaseLostError(SessionWriteError):
    """Another worker took over the lease of a session this worker had live (this one was
    stopped or cut off longer than the lease lasts); it writes nothing more of that session.

    Announced once as ``SessionWriteFailed``; the agent of the session then stops at once
    with the cause :class:`~trio_agents.cancel.LeaseLost` and is disposed.
    """

    #: The lease owner id under which this worker held the session (``PostgresStore.owner``).
    holder: str = ""


def _load_sql() -> None:
    """Import the SQL module (and so psycopg) on first use; say which extra is missing."""
    global sql
    try:
        from . import _postgres_sql
    except ImportError as exc:
        raise ImportError(f"PostgresStore needs psycopg 3; {_EXTRA_HINT}") from exc
    sql = _postgres_sql


def _where(dsn: str) -> str:
    """The DSN without its password, for messages (the DSN was checked when the store was made)."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(dsn)
    host, port, db = parts.get("host", "localhost"), parts.get("port", 5432), parts.get("dbname")
    return f"PostgreSQL at {host}:{port}" + (f" (database {db})" if db else "")


def _ended(session: Session) -> SessionClosedError:
    return SessionClosedError(
        f"session {session.id!r} is not live in this store (it ended, or is ending); a ride "
        f"on its write batches is over"
    )


def _one_line(exc: BaseException) -> str:
    """An error's text on one line (libpq's messages carry newlines and tabs)."""
    return " ".join(str(exc).split())


def _check_dsn(dsn: str) -> str:
    from psycopg import ProgrammingError
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        raise ValueError(
            f"{dsn!r} is not a PostgreSQL connection string ({str(exc).strip()}); give a URI "
            f"such as 'postgresql://user@host:5432/dbname' or 'host=... dbname=...'"
        ) from exc
    return dsn


def _pool(dsn: str, connections: int, lease: float) -> ThreadConnections[sql.Conn]:
    """The store's connections: at most ``connections``, each ended by the server when it
    idles ``lease`` seconds inside a transaction (see ``sql.connect``), so a take-over never
    waits longer than that."""

    def unreachable(exc: BaseException) -> Exception | None:
        if not isinstance(exc, sql.OperationalError):
            return None
        return ConnectionError(
            f"cannot reach the session database, {_where(dsn)}: {_one_line(exc)}; check that "
            f"the server runs and the DSN is right"
        )

    return ThreadConnections(
        lambda: sql.connect(dsn, lease), trio.CapacityLimiter(connections), unreachable
    )


@final
@attrs.define(eq=False)
class Ride(Generic[A, R]):
    """A statement that rides in the transaction of a session's write batch
    (:meth:`PostgresStore.ride`).

    Attributes:
        rider: sends the statement (``_postgres_sql.Rider``): called in a worker thread inside
            the batch's pipeline with the connection, the store's owner id and ``(fence,
            item)`` for each session whose ride it carries in that batch; rides with equal
            riders share one call. It returns what reads the results, one per item.
        item: asked (in the writer task, synchronously, appending nothing) each time a batch
            takes the session: the item to send in that batch, or ``None`` for a later one.
        then: called once the ride is over (``done``), in trio.
    """

    rider: Callable[[Any, str, Sequence[tuple[tuple[str, int, int], A]]], Callable[[], Sequence[R]]]
    item: Callable[[], A | None]
    then: Callable[[], object] = lambda: None
    #: The item the ride sent, once a batch took it.
    sent: A | None = attrs.field(default=None, init=False)
    #: Its result, once the batch committed; or why it is over without one.
    result: R | None = attrs.field(default=None, init=False)
    error: BaseException | None = attrs.field(default=None, init=False)
    done: trio.Event = attrs.field(factory=trio.Event, init=False)

    def _end(self, result: R | None = None, error: BaseException | None = None) -> None:
        if not self.done.is_set():
            self.result, self.error = result, error
            self.done.set()
            self.then()


@attrs.define(eq=False)
class _Row:
    """The PostgreSQL backend's state for one session."""

    resumed: bool
    # The JSON lines of the session's records. Every batch is a commit, so what is written
    # is durable: `log.written_seq + 1` records are in the database.
    log: WriteLog[str]
    # The lease's epoch while this store holds it (entered, not yet released).
    epoch: int | None = None
    lost: SessionLeaseLostError | None = None
    # What `list()` shows (stored beside the records): the title, the cwd.
    summary: Summary = attrs.field(factory=Summary)
    # The rides waiting for a batch of this session (see the module's rules).
    rides: builtins.list[Ride[Any, Any]] = attrs.field(factory=list)


@final
class PostgresStore(SessionStore[_Row]):
    """A :class:`SessionStore` that keeps every session in one PostgreSQL database, shared by
    any number of worker processes (on any machines), one live owner per session at a time.

    Args:
        dsn: a libpq connection string or URI (``postgresql://user@host:5432/db``).
        lease_seconds: how long a session's lease lasts unless renewed: how long a session
            of a worker that died stays unavailable to the others.
        renew_every: how often, in seconds, the store renews its leases (by default a third
            of ``lease_seconds``); less than ``lease_seconds``.
        flush_interval: the longest time, in seconds, an appended record waits before the
            writer commits it.
        connections: how many database connections the store uses at most.
        records_channel: a ``NOTIFY`` channel on which every write batch sends the id of each
            session it wrote, in the batch's own transaction (the work queue's clients listen
            on it to stream a turn's records); ``None``, the default, sends nothing.

    Raises:
        ValueError: ``dsn`` is not a connection string, a duration is not positive and
            finite, or ``renew_every`` is not less than ``lease_seconds``.
        ImportError: psycopg is not installed (the ``postgres`` extra).
    """

    def __init__(
        self,
        dsn: str,
        *,
        lease_seconds: float = 30.0,
        renew_every: float | None = None,
        flush_interval: float = 0.05,
        connections: int = 4,
        records_channel: str | None = None,
    ) -> None:
        super().__init__()
        _load_sql()
        renew = lease_seconds / 3 if renew_every is None else renew_every
        for name, value in (("lease_seconds", lease_seconds), ("renew_every", renew)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} is a duration in seconds, > 0; got {value!r}")
        if renew >= lease_seconds:
            raise ValueError(
                f"renew_every ({renew!r}) must be less than lease_seconds ({lease_seconds!r}), "
                f"or leases expire between renewals"
            )
        if connections < 1:
            raise ValueError(f"connections must be at least 1; got {connections!r}")
        self._dsn = _check_dsn(dsn)
        self._lease = float(lease_seconds)
        self._renew_every = float(renew)
        self._batches = BatchWriter(flush_interval, self._run_batch)
        self._connections = connections
        self._records_channel = records_channel
        self._pool = _pool(dsn, connections, self._lease)
        self._owner = ""
        self._leased: dict[str, tuple[Session, _Row]] = {}
        # The error of the latest failed batch, until a batch commits (see _batch_failure).
        self._failed: SessionWriteError | None = None

    def __repr__(self) -> str:
        return f"<PostgresStore {_where(self._dsn)}>"

    @property
    def owner(self) -> str:
        """This store's lease owner id (``host:pid:random``; new each time it is applied)."""
        return self._owner

    @property
    def records_channel(self) -> str | None:
        """The ``NOTIFY`` channel told of every session a batch wrote, or ``None``."""
        return self._records_channel

    @property
    def lease_seconds(self) -> float:
        """How long a lease lasts unless renewed."""
        return self._lease

    # -- rides -------------------------------------------------------------------------------

    def ride(self, session: Session, ride: Ride[A, R]) -> None:
        """Let ``ride`` ride in a write batch of ``session``: the first batch that takes the
        session (it has records to write, or a flush asks for it) once ``ride.item()`` is not
        ``None`` sends it, in the transaction of the records (see the module's rules). It
        asks for no batch itself; a lost lease or the session's end ends it with an error.
        """
        state = self._state(session)
        if state.lost is not None:
            ride._end(error=state.lost)
        elif state.epoch is None:
            ride._end(error=_ended(session))
        else:
            state.rides.append(ride)

    def unride(self, session: Session, ride: Ride[A, R]) -> bool:
        """Take ``ride`` off ``session`` unless a batch took it already; whether it did."""
        rides = self._state(session).rides
        if ride in rides:
            rides.remove(ride)
            return True
        return False

    async def flush_riding(self, session: Session, ride: Ride[A, R]) -> R | None:
        """:meth:`~SessionStore.flush` a live session with ``ride`` in the same transaction:
        the next batch takes the session (whether or not it has records to write) and sends
        the ride if its ``item()`` is ready then. Return the ride's result.

        A caller cancelled here takes the ride off the session unless a batch took it already:
        ``ride.sent`` is then set, and ``ride.done`` (its ``result`` or ``error``) says whether
        it was written. So a caller that tries again sends its item once, never twice.

        Raises:
            SessionClosedError: the session is not live here (or is ending).
            SessionLeaseLostError: another worker took the session over.
            SessionWriteError: the batch failed (nothing of it was written, the ride neither).
        """
        entry = self._entry_of(session)
        if entry.ending is not None or self._live.get(session.id) is not session:
            raise _ended(session)
        state = self._state(session)
        self.ride(session, ride)
        if not ride.done.is_set():
            self._batches.check_running(session.id)
            self._batches.mark_sync(session, state)
            try:
                batch = await self._batches.next_batch()
            except BaseException:
                # Invariant: a caller that gives up (cancelled) leaves no ride behind that a
                # later batch could still send; one a batch took already is in flight, and
                # ``ride.sent`` and ``ride.done`` say so (tests/session/test_postgres_rides.py).
                self.unride(session, ride)
                raise
            if state.lost is not None:
                raise state.lost
            if batch.error is not None:
                raise batch.error
        if not ride.done.is_set():
            self.unride(session, ride)
            ride._end(error=_ended(session))  # its item was not ready: nothing to send
        if ride.error is not None:
            raise ride.error
        self._flushed(session, session.flushed(state.log.synced_seq))
        return ride.result

    # -- background tasks ------------------------------------------------------------------

    async def _open(self, ctx: Context) -> None:
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._pool = _pool(self._dsn, self._connections, self._lease)
        # Invariant: pushed first, so the connections close after every task and session.
        ctx.defer(self._pool.aclose)
        await self._pool.run(sql.prepare_schema)
        await ctx.start(self._batches.run)
        await ctx.start(self._renewer)

    async def _run_batch(self, batch: Batch | None, sessions: dict[Session, _Row]) -> None:
        # Invariant: the writer takes only sessions this store holds the lease of, not lost.
        plan: builtins.list[tuple[Session, _Row]] = []
        jobs: builtins.list[sql.WriteJob] = []
        riders: dict[Any, sql.Riding] = {}
        taken: builtins.list[tuple[Ride[Any, Any], sql.Riding, int]] = []
        for session in sessions:
            state = self._leased_state(session)
            if state is None or state.epoch is None or state.lost is not None:
                continue
            first = state.log.written_seq + 1
            plan.append((session, state))
            lines = tuple(state.log.take())
            jobs.append(
                sql.WriteJob(
                    session.id,
                    state.epoch,
                    first,
                    lines,
                    state.summary.title,
                    state.summary.cwd,
                    state.summary.parent_id,
                )
            )
            if state.rides:
                fence = (session.id, state.epoch, first + len(lines))
                self._board(state, fence, riders, taken)
        outcomes: builtins.list[sql.Outcome] | None = None
        try:
            if jobs:
                self._write_batches += 1
                self._sync_batches += 1  # every batch is a commit: what it wrote is durable
                write = partial(
                    sql.write_batch, notify=self._records_channel, riders=list(riders.values())
                )
                outcomes = await self._pool.run(write, self._owner, self._lease, jobs)
            else:
                # A flush that found its records in the batch before: nothing to commit.
                await trio.lowlevel.checkpoint()
                outcomes = []
        except Exception as exc:
            error = self._batch_failure(exc, len(jobs))
            if batch is not None:
                batch.error = error
            for ride, _, _ in taken:
                ride._end(error=error)
        finally:
            for ride, riding, n in taken:
                ride._end(riding.results[n] if len(riding.results) > n else None)
            for i, (session, state) in enumerate(plan):
                result = outcomes[i] if outcomes is not None else None
                if result == "written":
                    state.log.settle(synced=True)
                    continue
                state.log.fail()
                if result is None:
                    self._batches.mark_sync(session, state)
                else:
                    self._lose(session, state, written_elsewhere=result == "moved")
            if outcomes is not None:
                self._failed = None
            if batch is not None:
                batch.done.set()

    @staticmethod
    def _board(
        state: _Row,
        fence: tuple[str, int, int],
        riders: dict[Any, sql.Riding],
        taken: builtins.list[tuple[Ride[Any, Any], sql.Riding, int]],
    ) -> None:
        """Put the rides of a session whose ``item()`` is ready in this batch's riders."""
        waiting: builtins.list[Ride[Any, Any]] = []
        for ride in state.rides:
            try:
                item = ride.item()
            except Exception as exc:  # the ride's own bug: it ends, the batch goes on
                ride._end(error=exc)
                continue
            if item is None:
                waiting.append(ride)
                continue
            ride.sent = item
            riding = riders.get(ride.rider)
            if riding is None:
                riding = riders[ride.rider] = sql.Riding(ride.rider)
            taken.append((ride, riding, len(riding.items)))
            riding.items.append((fence, item))
        state.rides = waiting

    def _batch_failure(self, exc: Exception, count: int) -> SessionWriteError:
        """The error of a failed batch. While the same failure repeats (an outage: every
        retry meets the same refused connection), it is the same error object, logged once, so
        a caller that reports errors reports it once."""
        cause = exc.__cause__ if isinstance(exc, ConnectionError) and exc.__cause__ else exc
        message = (
            f"writing session(s) to {_where(self._dsn)} failed ({_one_line(cause)}); nothing "
            f"of that batch was written, and the next flush writes it again"
        )
        if self._failed is not None and str(self._failed) == message:
            return self._failed
        error = self._failed = SessionWriteError(message)
        error.__cause__ = exc
        log.error("a session write batch failed (%d session(s))", count, exc_info=error)
        return error

    async def _renewer(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        while True:
            await trio.sleep(self._renew_every)
            leases = [
                (session_id, state.epoch)
                for session_id, (_, state) in self._leased.items()
                if state.epoch is not None and state.lost is None
            ]
            if not leases:
                continue
            try:
                lost = await self._pool.run(sql.renew_leases, self._owner, self._lease, leases)
            except Exception as exc:
                log.warning(
                    "renewing %d session lease(s) on %s failed (%s); retrying in %gs",
                    len(leases),
                    _where(self._dsn),
                    _one_line(exc),
                    self._renew_every,
                )
                continue
            for session_id in lost:
                entry = self._leased.get(session_id)
                if entry is not None:
                    self._lose(*entry, written_elsewhere=False)

    def _lose(self, session: Session, state: _Row, *, written_elsewhere: bool) -> None:
        if state.lost is not None:
            return  # the renewal and a batch in flight both found it: reported once
        how = (
            "another worker wrote it"
            if written_elsewhere
            else "another worker took its lease over (this one was stopped or cut off from "
            f"the database longer than the {self._lease:g}s lease)"
        )
        first = state.log.written_seq + 1
        state.lost = SessionLeaseLostError(
            f"session {session.id!r} is no longer this worker's: {how}; nothing more of it is "
            f"written here (records from seq {first} on are not stored), and the "
            f"stored session is intact — resume it where it is live now"
        )
        state.lost.holder = self._owner
        self._end_rides(state, state.lost)
        self._batches.forget(session)
        log.error("session %r lost its lease", session.id, exc_info=state.lost)
        self._emit(SessionWriteFailed(session_id=session.id, error=state.lost))

    @staticmethod
    def _end_rides(state: _Row, error: BaseException) -> None:
        rides, state.rides = state.rides, []
        for ride in rides:
            ride._end(error=error)

    def _leased_state(self, session: Session) -> _Row | None:
        entry = self._leased.get(session.id)
        return entry[1] if entry is not None and entry[0] is session else None

    # -- the backend hooks -------------------------------------------------------------------

    def _begin(self, session: Session, stored: Stored | None) -> _Row:
        if stored is None:
            return _Row(resumed=False, log=WriteLog())
        return _Row(
            resumed=True, log=WriteLog(len(stored.records) - 1), summary=Summary.of(stored.records)
        )

    def _on_record(self, session: Session, record: Record) -> None:
        state = self._state(session)
        # Invariant: what one backend refuses, every backend refuses.
        line = dump_record(record)
        state.log.add(line)
        state.summary.note(record)
        if state.epoch is not None and state.lost is None:
            self._batches.mark(session, state)

    async def _enter(self, session: Session) -> None:
        state = self._state(session)
        take = partial(
            sql.take_lease,
            session_id=session.id,
            owner=self._owner,
            lease_seconds=self._lease,
            new=not state.resumed,
            records=state.log.written_seq + 1,
        )
        state.epoch = await self._pool.run(take)
        self._leased[session.id] = (session, state)
        if state.log.pending:
            self._batches.mark(session, state)

    async def _sync(self, session: Session) -> int:
        state = self._state(session)
        if state.lost is not None:
            raise state.lost
        if state.log.clean and not self._batches.awaits_sync(session):
            await trio.lowlevel.checkpoint()
            return state.log.synced_seq
        self._batches.check_running(session.id)
        batch = await self._batches.next_batch()
        if state.lost is not None:
            raise state.lost
        if batch.error is not None:
            raise batch.error
        return state.log.synced_seq

    async def _discard(self, session: Session) -> None:
        state = self._state(session)
        self._end_rides(state, _ended(session))
        state.log.discard()
        self._batches.forget(session)
        await self._batches.wait_settled(state.log)
        if state.resumed or state.epoch is None or state.lost is not None:
            await trio.lowlevel.checkpoint()
            return
        # A new session: the row this store created goes, with whatever was written to it.
        epoch, state.epoch = state.epoch, None
        await self._pool.run(sql.discard_session, session.id, self._owner, epoch)

    async def _release(self, session: Session) -> None:
        state = self._state(session)
        self._end_rides(state, _ended(session))
        self._batches.forget(session)
        if self._leased_state(session) is state:
            del self._leased[session.id]
        epoch, state.epoch = state.epoch, None
        if epoch is None or state.lost is not None:
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._pool.run(sql.release_lease, session.id, self._owner, epoch)
        except Exception as exc:
            # Never raised: the lease expires by itself.
            log.warning(
                "releasing the lease of session %r failed (%s); it expires within %gs",
                session.id,
                _one_line(exc),
                self._lease,
            )

    async def is_stored(self, session_id: str) -> bool:
        return await self._pool.run(sql.is_stored, session_id)

    async def _read(self, session_id: str) -> Stored:
        return Stored(await self._pool.run(sql.read_session, session_id))

    async def _remove(self, session_id: str) -> None:
        await self._remove_tree((session_id,))

    async def _remove_tree(self, session_ids: Sequence[str]) -> None:
        # The database finds the tree itself, in the delete's own transaction: it also takes
        # a child another worker stored since this one listed the sessions.
        await self._pool.run(sql.delete_tree, session_ids[-1])

    async def _stored_parents(self) -> dict[str, str | None]:
        return await self._pool.run(sql.parents)

    async def _list_stored(self) -> builtins.list[SessionInfo]:
        rows = await self._pool.run(sql.list_sessions)
        return [
            SessionInfo(
                id=row.id,
                records=row.records,
                updated=row.updated.astimezone(UTC),
                live=False,
                title=row.title,
                cwd=row.cwd,
                parent_id=row.parent_id,
            )
            for row in rows
        ]
