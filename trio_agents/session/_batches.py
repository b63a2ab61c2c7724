"""When a backend's writer runs a batch: group commit, one home for every store that writes
in batches (JSONL, SQLite, PostgreSQL).

Rules:
- One writer task per store (:meth:`BatchWriter.run`, started on the store's fiber). It sleeps
  until there is something to write: a dirty session (``mark()``) or a flush that asks for a
  sync batch.
- The writer keeps which sessions a batch writes: the *dirty* ones (new lines to write) in
  every batch, the *unsynced* ones (written, not durable; or to write again after a failure)
  only in a sync batch. A session is in neither once it failed, ended or was abandoned
  (``forget()``). Each session's own bookkeeping is its :class:`~._writelog.WriteLog`;
  ``wait_settled`` waits until a log has no batch in flight.
- A dirty record waits at most ``flush_interval`` (plus the batch in flight) before a plain
  batch writes it, unless a flush asks for a batch sooner.
- ``next_batch()`` is group commit: it asks for the *next* sync batch and waits for it;
  flushes that arrive while a batch is in flight share the next one. Only the wait is
  cancellable: the batch runs to its end without the caller.
- When the writer stops (the store's teardown), a sync batch still asked for ends with a
  ``SessionStoreClosedError``, and ``check_running`` refuses new flushes.
- A failed write is reported once (:func:`write_failure`): logged and published as
  ``SessionWriteFailed``; a retry that fails the same way is the same error again, so a
  command that prints it prints it once.
- A backend whose session's writes stop at a failure keeps a :class:`WriteState` per session
  (its log, whether it was abandoned, its error). A flush of a failed session raises the
  error again while its batch is in flight, or when the backend cannot write again;
  otherwise it clears the error and writes everything unsynced again
  (:meth:`BatchWriter.retry_failed`). A flush waits for the next sync batch and raises that
  batch's error, then the session's (:meth:`BatchWriter.wait_synced`). An abandoned session
  leaves every batch and drops what waits (:meth:`BatchWriter.abandon`); the backend removes
  what a *new* one wrote, once no batch of it is in flight.
- A read-only store refuses every write with one message (:func:`read_only_refusal`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar, final

import attrs
import trio

from ._errors import SessionStoreClosedError, SessionWriteError
from ._events import SessionWriteFailed
from ._session import Session
from ._writelog import WriteLog

log = logging.getLogger("trio_agents")

V = TypeVar("V")
L = TypeVar("L")


@attrs.define(eq=False)
class Batch:
    """One sync batch some flushes wait for; ``error`` is why it failed, if it did."""

    done: trio.Event = attrs.field(factory=trio.Event)
    error: BaseException | None = None


@attrs.define(eq=False, kw_only=True)
class WriteState(Generic[L]):
    """What a backend whose writes stop at a failure keeps of one session's writes; its
    own state per session extends it (see the module rules)."""

    # The lines of the session's records.
    log: WriteLog[L]
    abandoned: bool = False
    # Why the session's writes stopped; a flush raises it until a retry clears it.
    error: SessionWriteError | None = None
    # The error of the latest failure, also after a retry cleared `error`.
    last_error: SessionWriteError | None = None


W = TypeVar("W", bound=WriteState[Any])


def _check_interval(flush_interval: float) -> float:
    """``flush_interval`` if it is a delay in seconds, else raise ``ValueError``."""
    if not (math.isfinite(flush_interval) and flush_interval >= 0):
        raise ValueError(f"flush_interval is a delay in seconds, >= 0; got {flush_interval!r}")
    return flush_interval


@final
class BatchWriter(Generic[V]):
    """The writer task of one store, the sessions its batches write, and the group commit of
    its flushes.

    Args:
        interval: the longest time a dirty record waits (see the module rules).
        run: writes one batch: a sync batch (given) or a plain one (``None``), of the
            sessions given (each with the backend's state for it, ``V``).

    Raises:
        ValueError: ``interval`` is negative or not finite (:func:`_check_interval`).
    """

    def __init__(
        self,
        interval: float,
        run: Callable[[Batch | None, dict[Session, V]], Awaitable[None]],
    ) -> None:
        self._interval = _check_interval(interval)
        self._run = run
        self._next: Batch | None = None
        self._wake = trio.Event()
        self._alive = False
        # Invariant: both hold only entered sessions that are neither ended nor failed.
        self._dirty: dict[Session, V] = {}
        self._unsynced: dict[Session, V] = {}
        # Fired (and replaced) at the end of every batch.
        self._ended = trio.Event()

    def poke(self) -> None:
        """Wake the writer: a session became dirty, or a flush asked for a batch."""
        self._wake.set()

    def mark(self, session: Session, state: V) -> None:
        """``session`` has lines to write: the next batch writes them."""
        if not self._dirty:
            # The writer sleeps only while no session is dirty (then it waits for
            # `interval` or a flush): waking it for every record would cost a task switch each.
            self.poke()
        self._dirty[session] = state

    def mark_sync(self, session: Session, state: V) -> None:
        """The next sync batch takes ``session``: its lines are written but not durable, or
        are to be written again after a failure."""
        self._unsynced[session] = state

    def awaits_sync(self, session: Session) -> bool:
        """Whether the next sync batch takes ``session`` (see :meth:`mark_sync`)."""
        return session in self._unsynced

    def forget(self, session: Session) -> None:
        """No batch takes ``session`` any more (until it is marked again)."""
        self._dirty.pop(session, None)
        self._unsynced.pop(session, None)

    def _take(self, sync: bool) -> dict[Session, V]:
        sessions, self._dirty = self._dirty, {}
        if sync:
            for session, state in self._unsynced.items():
                sessions.setdefault(session, state)
            self._unsynced = {}
        return sessions

    async def wait_settled(self, log: WriteLog[L]) -> None:
        """Wait until no batch of ``log``'s session is in flight (at once if none is)."""
        while log.in_flight:
            await self._ended.wait()

    def reset(self) -> None:
        """Forget what was asked for before a restart of the store (nothing waits for it)."""
        self._next = None
        self._dirty.clear()
        self._unsynced.clear()

    async def _idle(self) -> None:
        self._wake = trio.Event()
        await self._wake.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task: run batches until cancelled (see the module rules)."""
        self._alive = True
        task_status.started()
        try:
            while True:
                while self._next is None and not self._dirty:
                    await self._idle()
                if self._next is None:
                    # Invariant: a dirty record waits at most `interval` (plus the batch in
                    # flight), unless a flush asks for a batch sooner.
                    with trio.move_on_after(self._interval):
                        while self._next is None:
                            await self._idle()
                batch, self._next = self._next, None
                try:
                    await self._run(batch, self._take(batch is not None))
                finally:
                    ended, self._ended = self._ended, trio.Event()
                    ended.set()
        finally:
            self._alive = False
            if self._next is not None:
                self._next.error = SessionStoreClosedError(
                    "the session store closed before this flush was written"
                )
                self._next.done.set()
                self._next = None

    def check_running(self, session_id: str) -> None:
        """Refuse a flush once the writer has stopped.

        Raises:
            SessionStoreClosedError: the writer task is not running.
        """
        if not self._alive:
            raise SessionStoreClosedError(
                f"the session store's writer has stopped; session {session_id!r} cannot be flushed"
            )

    async def next_batch(self) -> Batch:
        """Ask for the next sync batch and wait until it has run; the batch says how it went."""
        batch = self._next
        if batch is None:
            batch = self._next = Batch()
        self.poke()
        await batch.done.wait()
        return batch

    def retry_failed(
        self: BatchWriter[W], session: Session, state: W, *, possible: bool = True
    ) -> None:
        """Before a flush: raise the session's write error while its batch is in flight or
        no retry is ``possible``; otherwise clear it, and the next batch writes the session
        again.

        Raises:
            SessionWriteError: the session's writes failed and cannot be tried again yet.
        """
        if state.error is None:
            return
        if not possible or state.log.in_flight:
            raise state.error
        state.error = None
        self.mark(session, state)

    async def wait_synced(self: BatchWriter[W], state: W) -> int:
        """Wait for the next sync batch; return the seq of the session's last durable record.

        Raises:
            SessionWriteError: the batch failed, or the session's writes did.
            SessionStoreClosedError: the writer stopped first.
        """
        # Invariant: only this wait is cancellable; the batch runs to its end without us.
        batch = await self.next_batch()
        if batch.error is not None:
            raise batch.error
        if state.error is not None:
            raise state.error
        return state.log.synced_seq

    async def abandon(self: BatchWriter[W], session: Session, state: W, *, new: bool) -> bool:
        """Stop writing an abandoned session (see the module rules). For a ``new`` session,
        wait until no batch of it is in flight and return ``True``: the caller removes what
        its batches wrote (or checkpoints). For a stored one, checkpoint and return
        ``False``."""
        state.abandoned = True
        state.log.discard()
        self.forget(session)
        if not new:
            await trio.lowlevel.checkpoint()
            return False
        await self.wait_settled(state.log)
        return True


def write_failure(
    message: str,
    previous: SessionWriteError | None,
    session_id: str,
    emit: Callable[[object], None],
) -> SessionWriteError:
    """The error of a failed write of ``session_id`` that ``message`` describes: ``previous``
    itself when it says the same (not logged or published again), else a new one, logged and
    published."""
    if previous is not None and str(previous) == message:
        return previous
    error = SessionWriteError(message)
    # The error itself rides along, so a command that reports it drops this line.
    log.error("session %r could not be written", session_id, exc_info=error)
    emit(SessionWriteFailed(session_id=session_id, error=error))
    return error


def read_only_refusal(store: str, what: str) -> SessionWriteError:
    """The error of a read-only ``store`` (``"the session store DIR"``) asked to ``what``."""
    return SessionWriteError(
        f"{store} is open read-only, so it cannot {what}; open it without read_only=True"
    )
