"""The JSONL backend: one append-only file per session, written by one background task.

Rules:
- Appends are serialized at once (a record JSON cannot hold is refused by ``append``) and
  queued; the writer task writes queued lines within ``flush_interval`` (write without fsync:
  the OS keeps them across a process kill).
- ``flush`` is group commit: it asks for the *next* sync batch and waits for it. A sync batch
  writes every dirty session and fsyncs each file it touched (and, for new files, the
  directory) once, all in one worker-thread round trip; flushes that arrive while a batch is
  in flight share the next one. The files of one batch are synced concurrently, on a pool of
  threads the store owns (made when it is applied, joined when its fiber ends): the file
  system commits the syncs that wait together in one journal commit, so many sessions
  flushing at once cost about one sync, as a database's group commit does.
- Only the writer task touches the files of live sessions, so a file is never written by two
  batches at once.
- A write or fsync that fails (a full disk, an I/O error) costs nothing already durable: the
  file is cut back to where its last fsync left it, every line since then is queued again,
  the flush that asked raises ``SessionWriteError``, and the session's writes stop there; the
  *next* flush writes them all again (a rewrite, not a second fsync: after a failed fsync the
  kernel may have dropped the pages). Only when the cut back itself fails does the session
  write nothing more (its flushes raise until it is loaded again).
- Reading never writes. A loaded session whose file has a tail (a torn last line, see
  :mod:`._jsonl_io`) is repaired by the writer, before anything is appended, only once the
  session is entered (resumed); the removed bytes are kept in a side file, and a warning says
  so. A read-only store (``read_only=True``) never writes at all: no directory is created,
  no session can be entered, none deleted.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from . import _jsonl_io as io
from ._backend import Stored
from ._batches import Batch, BatchWriter, WriteState, read_only_refusal, write_failure
from ._convert import dump_record
from ._errors import SessionIdInUseError, SessionInUseError, SessionWriteError
from ._ids import check_session_id, default_root
from ._records import Record
from ._session import Session
from ._state import SessionState
from ._store import SessionStore
from ._summary import SessionInfo
from ._writelog import WriteLog

if TYPE_CHECKING:
    from ..kernel import Context

log = logging.getLogger("trio_agents")

RunSync = Callable[[Callable[[], Any]], Awaitable[Any]]

#: The most files of one batch fsynced at once (threads are started only as needed): the
#: sessions whose flushes meet in a batch (one per agent flushing) share about one journal
#: commit. It buys 32 agents flushing 0.88x -> 8.9x the serial fsync floor with every sync
#: 3 ms slower (`python -m benchmarks --only stores --fsync-delay-us 3000`, docs/benchmarks.rst);
#: tests/session/test_jsonl_sync.py pins the concurrency.
SYNC_THREADS = 32


@attrs.define(eq=False, kw_only=True)
class _File(WriteState[bytes]):
    """The JSONL backend's state for one session; its log keeps the unsynced lines, which a
    failure cuts back and writes again."""

    path: Path
    # Invariant: `exists` means this session's file is on disk with its header; for a new
    # session it becomes true only once the writer created the file (replacing any stored
    # file of the same id, atomically).
    exists: bool
    dir_synced: bool = True
    # What reading left out at the end of the file; the writer removes it before appending.
    tail: io.Tail | None = None
    # The bytes written since the file's last fsync (a new file's header too).
    unsynced_bytes: int = 0
    # Whether the next flush may write again after `error` (False: the file could not be cut
    # back to its durable end).
    retry: bool = False
    # The size of the file when a resumed session was read (see `_enter`).
    read_size: int = 0
    # The descriptor of the session's lock (io.take_lock) from `_enter` to `_release`.
    lock: int | None = None


@attrs.frozen
class SessionRepair:
    """What :meth:`JsonlStore.repair` did to a corrupt session file.

    Attributes:
        session_id: the session.
        records: how many records the file keeps (its longest valid start).
        removed: how many bytes were moved out of it, to ``side``.
        side: the side file beside it that holds those bytes (``<id>.jsonl.damaged-<n>``),
            or ``None`` when there were none (a torn header was replaced).
        reason: what was wrong where the kept part ends.
    """

    session_id: str
    records: int
    removed: int
    side: Path | None
    reason: str

    def __str__(self) -> str:
        moved = f"; the {self.removed} bytes after it are in {self.side}" if self.side else ""
        plural = "" if self.records == 1 else "s"
        return (
            f"session {self.session_id!r} keeps its first {self.records} record{plural}{moved} "
            f"(what was wrong: {self.reason})"
        )


@final
class JsonlStore(SessionStore[_File]):
    """A :class:`SessionStore` that keeps each session in ``<root>/<id>.jsonl``.

    Args:
        root: the directory; by default ``$TRIO_AGENTS_HOME/sessions``, else
            ``$XDG_STATE_HOME/trio-agents/sessions``, else ``~/.local/state/trio-agents/sessions``.
        flush_interval: the longest time, in seconds, an appended record waits before it is
            written (without fsync) by the background writer.
        read_only: only read (``list``, ``load``): the store creates nothing, works on a
            read-only directory, and refuses ``enter`` and ``delete`` with a
            :class:`SessionWriteError`. Otherwise applying the store creates the directory
            and checks that it is writable.

    Raises:
        ValueError: ``flush_interval`` is negative or not finite.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        flush_interval: float = 0.05,
        read_only: bool = False,
    ) -> None:
        super().__init__()
        self._root = Path(root) if root is not None else default_root()
        self._batches = BatchWriter(flush_interval, self._run_batch)
        self._read_only = read_only
        # How batch I/O reaches a worker thread; tests may swap it to count or hold batches.
        self._run_sync: RunSync = trio.to_thread.run_sync
        # The threads that sync the files of a batch concurrently (while applied, writable).
        self._syncer: ThreadPoolExecutor | None = None

    @property
    def root(self) -> Path:
        """The directory holding the session files."""
        return self._root

    def path_of(self, session_id: str) -> Path:
        """The file of session ``session_id`` (whether or not it exists)."""
        return self._root / f"{session_id}{io.SUFFIX}"

    def __repr__(self) -> str:
        return f"<JsonlStore {str(self._root)!r}>"

    # -- the writer task ---------------------------------------------------------------------

    @property
    def read_only(self) -> bool:
        """Whether this store only reads (see the class arguments)."""
        return self._read_only

    async def _open(self, ctx: Context) -> None:
        if self._read_only:
            await trio.to_thread.run_sync(io.check_root, self._root)
            return
        await trio.to_thread.run_sync(io.prepare_root, self._root)
        self._syncer = ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="trio-agents-fsync")
        # Invariant: pushed before the writer task, so the threads are joined after it stopped.
        ctx.defer(self._stop_syncer)
        await ctx.start(self._batches.run)

    async def _stop_syncer(self) -> None:
        syncer, self._syncer = self._syncer, None
        if syncer is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(syncer.shutdown)

    def _refuse_write(self, what: str) -> SessionWriteError:
        return read_only_refusal(f"the session store {self._root}", what)

    async def _run_batch(self, batch: Batch | None, sessions: dict[Session, _File]) -> None:
        sync = batch is not None
        taken = {session: state.log.take() for session, state in sessions.items()}
        for session, state in [(s, f) for s, f in sessions.items() if f.tail is not None]:
            if not await self._repair(session, state):
                state.log.fail()
                del taken[session]
        jobs: builtins.list[io.WriteJob] = []
        sync_root = False
        plan: builtins.list[tuple[Session, _File, int]] = []
        for session, lines in taken.items():
            state = sessions[session]
            data = b"".join(lines)
            if not state.exists:
                data = io.header_line(session.id) + data
            jobs.append(io.WriteJob(state.path, not state.exists, data, sync, state.unsynced_bytes))
            sync_root |= sync and (not state.exists or not state.dir_synced)
            plan.append((session, state, len(data)))
        self._write_batches += 1
        self._sync_batches += sync
        results: builtins.list[OSError | None] | None = None
        try:
            # The thread cannot be cancelled anyway; shielding keeps the bookkeeping whole.
            with trio.CancelScope(shield=True):
                results = await self._run_sync(
                    partial(io.write_batch, jobs, self._root, sync_root, self._syncer)
                )
        except BaseException as exc:
            if batch is not None:
                batch.error = exc
            raise
        finally:
            for i, (session, state, size) in enumerate(plan):
                error = (
                    io.RewindError("the write batch did not complete")
                    if results is None
                    else results[i]
                )
                self._settle(session, state, size, error, sync)
            if batch is not None:
                batch.done.set()

    async def _repair(self, session: Session, state: _File) -> bool:
        """Remove the tail of a resumed session's file; ``False`` if that failed."""
        tail = state.tail
        assert tail is not None
        try:
            # Like a batch: the thread cannot be cancelled, the bookkeeping stays whole.
            with trio.CancelScope(shield=True):
                side = await self._run_sync(
                    partial(io.repair_tail, state.path, tail, io.header_line(session.id))
                )
        except OSError as exc:
            self._fail(session, state, exc)
            return False
        state.tail = None
        kept = f"; the {tail.size - tail.offset} bytes removed are kept in {side}" if side else ""
        log.warning(
            "session %r: removed %s from the end of %s%s", session.id, tail.reason, state.path, kept
        )
        return True

    def _fail(self, session: Session, state: _File, error: OSError) -> None:
        state.retry = not isinstance(error, io.RewindError)
        then = (
            "the next flush writes them again"
            if state.retry
            else "fix the cause, then load the session again"
        )
        message = (
            f"writing session {session.id!r} to {state.path} failed ({error}); its "
            f"records from seq {state.log.synced_seq + 1} on are not durable — {then}"
        )
        self._batches.forget(session)
        state.error = state.last_error = write_failure(
            message, state.last_error, session.id, self._emit
        )

    def _settle(
        self, session: Session, state: _File, size: int, error: OSError | None, sync: bool
    ) -> None:
        if error is not None:
            # Unless the cut back failed, the file ends at its durable end again
            # (io.write_batch): every line since then waits for the next flush, in order.
            rewound = not isinstance(error, io.RewindError)
            state.log.fail(rewound=rewound)
            if rewound:
                state.unsynced_bytes = 0
                if state.log.synced_seq < 0 and not session.resumed:
                    state.exists = False  # nothing of it is durable: it is created again
            self._fail(session, state, error)
            return
        if not state.exists:
            state.exists = True
            state.dir_synced = sync
        elif sync:
            state.dir_synced = True
        state.log.settle(synced=sync)
        if sync:
            state.unsynced_bytes = 0
        else:
            state.unsynced_bytes += size
            if not state.abandoned:
                self._batches.mark_sync(session, state)

    # -- the backend hooks ---------------------------------------------------------------------

    def _begin(self, session: Session, stored: Stored | None) -> _File:
        n = len(session.records)
        note = stored.note if stored is not None else None
        return _File(
            path=self.path_of(session.id),
            exists=session.resumed,
            log=WriteLog(n - 1, keep_unsynced=True),
            tail=note.tail if isinstance(note, io.Loaded) else None,
            read_size=note.size if isinstance(note, io.Loaded) else 0,
        )

    def _on_record(self, session: Session, record: Record) -> None:
        state = self._state(session)
        state.log.add((dump_record(record) + "\n").encode())
        if session.state is SessionState.LIVE and state.error is None:
            self._batches.mark(session, state)

    async def _enter(self, session: Session) -> None:
        if self._read_only:
            raise self._refuse_write(f"enter session {session.id!r}")
        state = self._state(session)
        await trio.lowlevel.checkpoint()
        self._lock(session, state)
        # No checkpoint from here until the session is live: every record appended before
        # is pending, every later one marks the session dirty itself.
        if state.log.pending or not state.exists or state.tail is not None:
            self._batches.mark(session, state)

    def _lock(self, session: Session, state: _File) -> None:
        """Take the session's lock, and check that the file is still what was read.

        A few syscalls on a local file, none of which waits (the lock is tried, not awaited):
        like ``is_stored``, they run on the loop's thread, which keeps entering a session free
        of thread round trips.
        """
        try:
            state.lock = io.take_lock(state.path)
        except io.LockHeld as held:
            raise SessionIdInUseError(
                f"session {session.id!r} is in use by {held.holder}, which writes it (one "
                f"process writes a session at a time; its lock is {io.lock_path(state.path)}); "
                f"end it there, or resume it once that process has stopped"
            ) from None
        except OSError as exc:
            raise SessionWriteError(
                f"cannot lock session {session.id!r} ({exc.strerror or exc}); check that "
                f"{self._root} is writable, or choose another store directory"
            ) from exc
        changed = (
            _size(state.path) != state.read_size if session.resumed else os.path.lexists(state.path)
        )
        if changed:
            self._unlock(state)
            then = "load it again" if session.resumed else "resume it instead"
            raise SessionIdInUseError(
                f"session {session.id!r} was written by another process since this one "
                f"{'read it' if session.resumed else 'checked its id'}; {then}"
            )

    @staticmethod
    def _unlock(state: _File) -> None:
        if state.lock is not None:
            lock, state.lock = state.lock, None
            io.release_lock(state.path, lock)

    async def _sync(self, session: Session) -> int:
        state = self._state(session)
        # A new attempt writes everything since the last durable point again.
        self._batches.retry_failed(session, state, possible=state.retry)
        if state.log.clean and state.exists and state.tail is None:
            await trio.lowlevel.checkpoint()
            return state.log.synced_seq
        self._batches.check_running(session.id)
        return await self._batches.wait_synced(state)

    async def _discard(self, session: Session) -> None:
        state = self._state(session)
        if await self._batches.abandon(session, state, new=not session.resumed) and state.exists:
            # Invariant: `exists` on a new session means this session created the file.
            await trio.to_thread.run_sync(partial(state.path.unlink, missing_ok=True))
            state.exists = False
        else:
            await trio.lowlevel.checkpoint()

    async def _release(self, session: Session) -> None:
        state = self._state(session)
        self._batches.forget(session)
        # Invariant: the lock goes only once no batch writes the file any more.
        await self._batches.wait_settled(state.log)
        self._unlock(state)
        await trio.lowlevel.checkpoint()

    async def is_stored(self, session_id: str) -> bool:
        # One stat of a local file: cheap enough for the loop's own thread, which keeps
        # creating an agent free of thread round trips (a deterministic number of steps).
        # A link counts as stored (it is refused on load), so a new session never replaces it.
        await trio.lowlevel.checkpoint()
        return os.path.lexists(self.path_of(session_id))  # noqa: ASYNC240 - one stat, see above

    async def _read(self, session_id: str) -> Stored:
        path = self.path_of(session_id)
        loaded = await trio.to_thread.run_sync(io.read_session, path, session_id)
        tail = loaded.tail
        if tail is not None and tail.size > 0:
            log.warning(
                "session %r: %s at the end of %s (%d bytes) is left out; resuming the session "
                "removes it and keeps a copy beside the file",
                session_id,
                tail.reason,
                path,
                tail.size - tail.offset,
            )
        return Stored(loaded.records, loaded)

    async def _remove(self, session_id: str) -> None:
        await self._remove_tree((session_id,))

    async def _remove_tree(self, session_ids: Sequence[str]) -> None:
        if self._read_only:
            raise self._refuse_write(f"delete session {session_ids[-1]!r}")
        try:
            await trio.to_thread.run_sync(io.remove_sessions, self._root, session_ids)
        except io.LockHeld as held:
            asked = session_ids[-1]
            which = held.session_id or asked
            under, then = ("", "it") if which == asked else (f", under {asked!r},", repr(asked))
            raise SessionInUseError(
                f"session {which!r}{under} is live in {held.holder}; end it there, then "
                f"delete {then}"
            ) from None

    async def repair(self, session_id: str) -> SessionRepair | None:
        """Repair a corrupt session file: keep its longest valid start (the records up to the
        first line that cannot be read or is out of order) and move the rest, byte for byte,
        to a side file beside it. Nothing is deleted. A torn last line is repaired the same
        way (a resume would do it too).

        Returns:
            What was done, or ``None`` when the file needed no repair.

        Raises:
            SessionNotFoundError: no stored session has this id.
            SessionInUseError: the session is live (here, or in another process).
            SessionFormatError: the file is not a session file of this store (its header).
            SessionWriteError: the store is read-only, or the file could not be rewritten.
        """
        self._check_open("repair a session")
        check_session_id(session_id)
        if self._read_only:
            raise self._refuse_write(f"repair session {session_id!r}")
        if session_id in self._live or session_id in self._entering:
            raise SessionInUseError(
                f"session {session_id!r} is live; dispose the agent that uses it, then repair it"
            )
        path = self.path_of(session_id)
        try:
            done = await trio.to_thread.run_sync(io.repair_session, path, session_id)
        except io.LockHeld as held:
            raise SessionInUseError(
                f"session {session_id!r} is live in {held.holder}; end it there, then repair it"
            ) from None
        except OSError as exc:
            raise SessionWriteError(
                f"repairing session {session_id!r} in {path} failed ({exc.strerror or exc}); "
                f"nothing was deleted"
            ) from exc
        if done is None:
            return None
        return SessionRepair(session_id, done.records, done.removed, done.side, done.reason)

    async def _stored_parents(self) -> dict[str, str | None]:
        return await trio.to_thread.run_sync(io.scan_parents, self._root)

    async def _list_stored(self) -> builtins.list[SessionInfo]:
        return await trio.to_thread.run_sync(io.scan_root, self._root)


def _size(path: Path) -> int | None:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return None
