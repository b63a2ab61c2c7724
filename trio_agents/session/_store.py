"""The ``sessions`` service: the Service Definition every backend implements.

Rules (one session's life in a store):
- ``prepare`` (new) or ``load`` (stored) builds a *private* session: unpublished, no events.
  Records appended to it are kept, and are written only once it is entered.
- ``enter`` publishes it; it is the authoritative duplicate check (one live session per id).
  An id is reusable as soon as its session detaches: a *new* session entered under the id of
  a stored one replaces it when its file is first written. ``announce`` emits
  ``SessionCreated``.
- ``flush`` is the durability checkpoint. ``detach`` is the final flush and the end of the
  session (memoized). ``abandon`` rolls back a failed creation: it undoes ``enter`` and removes
  what a *new* session persisted; ``SessionDisposed`` only follows an ``announce``.
- ``delete`` removes a session with every session under it (its child agents' sessions, theirs,
  ...; :mod:`._tree`), children first, and refuses it all when any of them is live. While it
  runs, those ids can be neither loaded nor entered.
- The store is a plugin. Its teardown unwinds LIFO: the service is withdrawn first (so the
  fibers that inject it flush and detach their sessions while it still works), then the close
  detaches every session still live and refuses further work, then backend tasks stop.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar, cast

import attrs
import trio

from ._backend import S, StoreBackend, Stored
from ._entry import Entry
from ._errors import (
    SessionClosedError,
    SessionExistsError,
    SessionIdInUseError,
    SessionInUseError,
    SessionStoreClosedError,
)
from ._events import SessionAppended, SessionCreated, SessionDisposed, SessionFlushed
from ._ids import check_session_id, new_session_id
from ._records import Record, StopReason, TurnEnded, open_turns
from ._session import Session
from ._state import SessionState
from ._summary import SessionInfo, Summary
from ._tree import subtree

if TYPE_CHECKING:
    from ..kernel import Context

log = logging.getLogger("trio_agents")


@attrs.frozen(kw_only=True)
class StoreStatistics:
    """A snapshot of a store.

    Attributes:
        running: whether the store is applied and not closed.
        live: how many sessions are live.
        write_batches: worker round trips that wrote session data (JSONL; 0 in memory).
        sync_batches: the subset of those that were flush (fsync) batches.
    """

    running: bool
    live: int
    write_batches: int
    sync_batches: int


class SessionStore(StoreBackend[S]):
    """The Service Definition of the ``sessions`` service; backends subclass it.

    A store object is a plugin: ``await ctx.plugin(store)`` starts it and provides it as
    ``sessions``. Its public methods are the contract. The session's lifecycle is the
    session's own (``Session.state``); the store moves it. A backend subclasses
    ``SessionStore[S]`` and implements the ``_``-prefixed hooks (:mod:`._backend`), keeping
    its own state per session, of type ``S`` (returned by ``_begin``, held by the session,
    read back with ``_state``); it reads only the public side of a session.
    """

    name: ClassVar[str] = "sessions"

    def __init__(self) -> None:
        self._emit: Callable[[object], None] = _drop
        self._listens: Callable[[type], bool] = _nobody
        self._running = False
        self._closing = False
        self._live: dict[str, Session] = {}
        # Ids whose session is being entered: taken, though not live yet.
        self._entering: set[str] = set()
        # Ids a delete is removing: neither loaded nor entered until it ends.
        self._deleting: set[str] = set()
        # Bound once, shared by every session of this store (not a bound method per session).
        self._on_append = self._appended
        self._write_batches = 0
        self._sync_batches = 0

    # -- the plugin ------------------------------------------------------------------------

    async def apply(self, ctx: Context, config: None) -> None:
        """Start the store in ``ctx``'s fiber and provide it as the ``sessions`` service."""
        if self._running:
            raise RuntimeError(
                f"this {type(self).__name__} is already applied; a store object serves one "
                f"fiber at a time (make another store, or dispose the first fiber)"
            )
        self._closing = False
        await self._open(ctx)
        self._emit = ctx.emit
        self._listens = ctx.listens
        self._running = True
        # Invariant: pushed after the backend's tasks and before the service entry, so the
        # service leaves first, then the close runs while the backend still works.
        ctx.defer(self._close)
        ctx.provide(self.name, self)

    async def _close(self) -> None:
        self._closing = True
        try:
            async with trio.open_nursery() as nursery:
                for session in builtins.list(self._live.values()):
                    nursery.start_soon(self.detach, session)
        finally:
            self._running = False

    # -- the session lifecycle -------------------------------------------------------------

    def prepare(self, session_id: str | None = None) -> Session:
        """Build a new private session (unpublished, no events).

        Args:
            session_id: the id to use; a fresh one (``s-<12 hex>``) if ``None``.

        Raises:
            InvalidSessionIdError: the id is not filename-safe.
            SessionStoreClosedError: the store is not running.
        """
        self._check_open("prepare a session")
        session_id = new_session_id() if session_id is None else check_session_id(session_id)
        session = Session(session_id, on_append=self._on_append)
        self._track(session, None)
        return session

    async def load(self, session_id: str) -> Session:
        """Build a private session holding the stored records of ``session_id``, repaired.

        A turn that started and never ended (the process died) is closed with an appended
        ``TurnEnded(stop_reason=interrupted)``.

        A session whose detach is in progress (its agent is gone, its final flush is not) is
        waited for, then loaded.

        Raises:
            SessionNotFoundError: no stored session has this id.
            SessionIdInUseError: the session is live; use ``get()``, or detach it first.
            SessionFormatError: the stored data cannot be read.
            SessionStoreClosedError: the store is not running.
        """
        self._check_open("load a session")
        check_session_id(session_id)
        draining = self._live.get(session_id)
        if draining is not None:
            entry = self._entry_of(draining)
            if entry.ending is not None:
                # Its owner is gone and only the final flush remains: the id is free once it
                # lands, so wait for it rather than refuse.
                with contextlib.suppress(Exception):  # that flush's failure was its owner's
                    await entry.join_end()
        self._check_not_live(session_id)
        stored = await self._read(session_id)
        session = Session(session_id, stored.records, resumed=True, on_append=self._on_append)
        self._track(session, stored)
        for turn_id in open_turns(stored.records):
            session.append(TurnEnded(turn_id=turn_id, stop_reason=StopReason.INTERRUPTED))
        return session

    async def enter(self, session: Session, *, owner: object = None) -> None:
        """Publish ``session``: it becomes live, its records are written from now on.

        This is the authoritative duplicate check: of two sessions with one id, exactly one
        enters (in this store, and for a shared backend across its workers). A new session
        never replaces a stored one: continue that with :meth:`load`. The backend's part
        runs shielded, so a cancelled caller never leaves the session half entered; when it
        fails, the session is private again (abandon it, or enter it later).

        Args:
            session: a session this store prepared or loaded.
            owner: when given, only :meth:`detach` or :meth:`abandon` with this same object
                can end the session (the agents service passes the agent's host, so an
                observer holding the bare session cannot tear a live agent's session down).

        Raises:
            SessionIdInUseError: a live session has this id (here, or in another worker of
                a shared store).
            SessionExistsError: the session is new and a stored session has its id.
            SessionClosedError: the session was already abandoned or detached.
            SessionStoreClosedError: the store is not running.
        """
        entry = self._entry_of(session)
        self._check_open("enter a session")
        if not session.state.takes_records:
            raise SessionClosedError(
                f"session {session.id!r} was abandoned or detached; prepare a new one"
            )
        if session.state is not SessionState.PRIVATE:
            raise SessionIdInUseError(f"session {session.id!r} is already entered")
        self._check_not_live(session.id)
        self._entering.add(session.id)
        session.advance(SessionState.ENTERING)
        try:
            with trio.CancelScope(shield=True):
                if not session.resumed and await self.is_stored(session.id):
                    raise SessionExistsError(
                        f"session {session.id!r} is already stored; resume it "
                        f"(ctx.agents.resume({session.id!r})), or delete it first"
                    )
                await self._enter(session)
            # The store may have begun closing meanwhile: its close detaches only what is
            # live, so publishing now would leave this session behind.
            self._check_open("enter a session")
        except BaseException:
            session.advance(SessionState.PRIVATE)
            raise
        finally:
            self._entering.discard(session.id)
        session.advance(SessionState.LIVE)
        entry.owner = owner
        self._live[session.id] = session

    def announce(self, session: Session) -> None:
        """Emit ``SessionCreated`` for an entered session (once; repeats are ignored).

        Raises:
            RuntimeError: the session is not live in this store.
        """
        entry = self._entry_of(session)
        if self._live.get(session.id) is not session:
            raise RuntimeError(f"session {session.id!r} is not live; enter() it before announce()")
        if not entry.announced:
            entry.announced = True
            self._emit(SessionCreated(session_id=session.id))

    async def flush(self, session: Session) -> None:
        """Make every record appended so far durable, then emit ``SessionFlushed``.

        Concurrent flushes share the backend's write batches (group commit). Flushing a private
        session does nothing; flushing a detached one waits for its final flush.

        Raises:
            SessionWriteError: the backend could not write the session.
            SessionStoreClosedError: the backend stopped before it could write it (JSONL:
                its writer task ended).
        """
        entry = self._entry_of(session)
        if entry.ending is not None:
            await entry.join_end()
            return
        if session.state is not SessionState.LIVE:
            await trio.lowlevel.checkpoint()
            return
        # Invariant: a live session that is not ending keeps the store running (the store's
        # close detaches every live session before it stops running).
        await self._flush_live(session)

    def flush_nowait(self, session: Session) -> None:
        """What :meth:`flush` does, without waiting: for a backend whose records are durable
        as they are appended (``MemoryStore``), mark them flushed and emit ``SessionFlushed``.
        Flushing a private session does nothing.

        Raises:
            trio.WouldBlock: the flush has to write or wait (a backend that writes, or a
                session whose final flush is running); call :meth:`flush`.
        """
        entry = self._entry_of(session)
        if entry.ending is not None:
            raise trio.WouldBlock
        if session.state is not SessionState.LIVE:
            return
        seq = self._synced(session)
        if seq is None:
            raise trio.WouldBlock
        self._flushed(session, session.flushed(seq))

    async def _flush_live(self, session: Session) -> None:
        self._flushed(session, session.flushed(await self._sync(session)))

    def _flushed(self, session: Session, seq: int) -> None:
        if self._listens(SessionFlushed):
            self._emit(SessionFlushed(session_id=session.id, seq=seq))

    async def detach(self, session: Session, *, owner: object = None) -> None:
        """Flush ``session`` a final time (``SessionFlushed``), take it out of the store, emit
        ``SessionDisposed``.

        Memoized: concurrent and repeated callers join the one detach. The final flush is
        shielded from cancellation. A session that was never entered is simply closed.

        Raises:
            SessionInUseError: the session was entered with another ``owner`` (a live
                agent's session: dispose the agent's handle instead), or is being entered.
            SessionWriteError: the final flush failed (the session is detached anyway).
        """
        await self._run_end(session, owner, self._final_flush, by_announce=False)

    async def _final_flush(self, session: Session, was_live: bool) -> None:
        if was_live:
            await self._flush_live(session)
        else:
            await trio.lowlevel.checkpoint()  # a detach is a checkpoint, also with no flush

    async def abandon(self, session: Session, *, owner: object = None) -> None:
        """Roll back a failed creation of ``session``.

        Undoes ``enter`` if it happened and, for a new (not loaded) session, removes whatever
        was persisted for it; no ``SessionCreated`` is emitted, and ``SessionDisposed`` only
        if the session had been announced. Memoized like :meth:`detach`.

        Raises:
            SessionInUseError: the session was entered with another ``owner``, or is being
                entered.
        """
        await self._run_end(session, owner, self._roll_back, by_announce=True)

    async def _roll_back(self, session: Session, was_live: bool) -> None:
        if self._live.get(session.id) is session:
            del self._live[session.id]
        await self._discard(session)

    async def _run_end(
        self,
        session: Session,
        owner: object,
        step: Callable[[Session, bool], Awaitable[None]],
        *,
        by_announce: bool,
    ) -> None:
        """Run one memoized end of ``session`` (a detach or an abandon): ``step`` shielded,
        then out of the store, released, ended; ``SessionDisposed`` if the session was live
        (``by_announce``: if it was announced)."""
        entry = self._entry_of(session)
        entry.check_owner(session, owner, closing=self._closing)
        if entry.ending is not None:
            await entry.join_end()
            return
        was_live = session.state is SessionState.LIVE
        ending = entry.ending = trio.Event()
        session.advance(SessionState.ENDING)
        # One shield for the step and the end after it (a scope costs a few microseconds,
        # once per agent disposed).
        with trio.CancelScope(shield=True):
            try:
                await step(session, was_live)
            except BaseException as exc:
                entry.end_error = exc
                raise
            finally:
                await self._end(session)
                if entry.announced if by_announce else was_live:
                    self._emit(SessionDisposed(session_id=session.id))
                ending.set()

    async def _end(self, session: Session) -> None:
        """The last step of a detach or an abandon (run shielded): out of the store,
        released, ended."""
        if self._live.get(session.id) is session:
            del self._live[session.id]
        await self._release(session)
        session.advance(SessionState.ENDED)
        # The owner only guarded the end: once over, the session does not keep it (nor, in a
        # cycle through it, itself) alive; they go when the last reference does.
        self._entry_of(session).owner = None

    # -- lookups ----------------------------------------------------------------------------

    def get(self, session_id: str) -> Session | None:
        """The live session ``session_id``, or ``None``."""
        return self._live.get(session_id)

    def live(self) -> tuple[Session, ...]:
        """Every live session, in the order they were entered."""
        return tuple(self._live.values())

    async def list(self) -> builtins.list[SessionInfo]:
        """Every stored or live session, most recently updated first.

        Raises:
            SessionStoreClosedError: the store is not running.
        """
        self._check_open("list sessions")
        infos = {info.id: info for info in await self._list_stored()}
        for session in self._live.values():
            stored = infos.get(session.id)
            records = session.records
            summary = Summary.of(records)
            infos[session.id] = SessionInfo(
                id=session.id,
                records=len(records),
                updated=datetime.fromtimestamp(session.updated, UTC),
                live=True,
                title=summary.title or (stored.title if stored is not None else None),
                cwd=summary.cwd,
                parent_id=summary.parent_id,
            )
        epoch = datetime.fromtimestamp(0, UTC)
        return sorted(infos.values(), key=lambda i: (i.updated or epoch, i.id), reverse=True)

    async def delete(self, session_id: str) -> tuple[str, ...]:
        """Delete the stored session ``session_id`` and every session under it: the sessions
        of its child agents (``create(parent=...)``), theirs, and so on.

        The children go before their parent, in one transaction where the backend has them
        (SQLite, PostgreSQL); elsewhere a delete cut short (a crash) leaves no child whose
        parent is gone. When any of them is live, nothing is deleted.

        Returns:
            The ids deleted, each after the sessions under it: ``session_id`` last.

        Raises:
            SessionInUseError: the session, or one under it, is live (here, or in another
                process or worker); dispose its agent first.
            SessionNotFoundError: no stored session has this id.
            SessionStoreClosedError: the store is not running.
        """
        self._check_open("delete a session")
        check_session_id(session_id)
        self._check_deletable(session_id, session_id)
        parents = await self._stored_parents()
        for live in self._live.values():
            if live.id not in parents:  # entered, not written yet
                parents[live.id] = Summary.of(live.records).parent_id
        doomed = subtree(parents, session_id)
        for under in doomed:
            self._check_deletable(under, session_id)
        self._deleting.update(doomed)
        try:
            if len(doomed) == 1:
                await self._remove(session_id)
            else:
                await self._remove_tree(doomed)
        finally:
            self._deleting.difference_update(doomed)
        return doomed

    def _check_deletable(self, session_id: str, asked: str) -> None:
        which = repr(session_id) if session_id == asked else f"{session_id!r}, under {asked!r},"
        if session_id in self._deleting:
            raise SessionInUseError(f"session {which} is being deleted already")
        if session_id in self._live or session_id in self._entering:
            then = "it" if session_id == asked else repr(asked)
            raise SessionInUseError(
                f"session {which} is live; dispose the agent that uses it, then delete {then}"
            )

    def statistics(self) -> StoreStatistics:
        """A frozen snapshot of this store."""
        return StoreStatistics(
            running=self._running and not self._closing,
            live=len(self._live),
            write_batches=self._write_batches,
            sync_batches=self._sync_batches,
        )

    # -- shared internals ----------------------------------------------------------------------

    def _appended(self, session: Session, record: Record) -> None:
        """The ``on_append`` of this store's sessions; raising refuses the record."""
        self._on_record(session, record)
        # An event per record is built only for someone who receives it.
        if session.state is SessionState.LIVE and self._listens(SessionAppended):
            self._emit(SessionAppended(session_id=session.id, record=record))

    def _check_open(self, what: str) -> None:
        if not self._running or self._closing:
            state = "closing" if self._running else "not running"
            raise SessionStoreClosedError(
                f"the session store is {state}, so it cannot {what}; apply it first with "
                f"'await ctx.plugin(store)' (or use the runtime's 'sessions' service)"
            )

    def _entry_of(self, session: Session) -> Entry[S]:
        # Invariant: this store made the entry (`_track`), with the state its `_begin` made.
        return cast("Entry[S]", Entry.of(session, self))

    def _check_not_live(self, session_id: str) -> None:
        if session_id in self._deleting:
            raise SessionIdInUseError(
                f"session {session_id!r} is being deleted; wait for the delete to end"
            )
        if session_id in self._live or session_id in self._entering:
            raise SessionIdInUseError(
                f"session id {session_id!r} is already live; choose another id, or detach "
                f"the live session first"
            )

    def _track(self, session: Session, stored: Stored | None) -> None:
        session._store_entry = Entry(self, self._begin(session, stored))


def _drop(event: object) -> None:
    """The emitter of a store that was never applied: nobody listens."""


def _nobody(event_type: type) -> bool:
    """The listener check of a store that was never applied."""
    return False
