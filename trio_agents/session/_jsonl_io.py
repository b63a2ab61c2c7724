"""Blocking file I/O of the JSONL backend; every function here runs in a worker thread.

Rules (the file format):
- ``<root>/<id>.jsonl``: one header line
  ``{"format": "trio-agents-session", "version": 1, "session_id": ...}``, then one record per
  line (:func:`dump_record`, UTF-8), each line ending with ``\\n``.
- Lines are only ever appended; a written line is never rewritten.

Rules (reading never writes; issue 18):
- :func:`read_session` opens the file read-only and never follows a symbolic link: a link, or
  anything but a regular file, is refused with a :class:`SessionFormatError` saying so. So
  ``list`` and ``load`` work on a read-only store and cannot reach outside its directory.
- A *tail* is what a crash mid-write leaves at the end: a last line without its ``\\n``, a
  complete last line that cannot be parsed (a torn write, a flipped bit), or a torn header (a
  prefix of the header line, an empty file). Reading leaves it out and reports it as a
  :class:`Tail`; any other bad line is corruption and is refused, as is a header of a newer
  format version.
- Only :func:`repair_tail`, called by the writer once a loaded session is entered (resumed),
  removes a tail: it first keeps the removed bytes in a side file ``<id>.jsonl.damaged-<n>``,
  and refuses if the file changed since it was read.
- Writes never follow a symbolic link either (``O_NOFOLLOW``; side files ``O_EXCL``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import socket
import stat
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path

import attrs

from ._convert import parse_line, structure_record
from ._errors import SessionFormatError, SessionNotFoundError, SessionWriteError
from ._ids import check_session_id
from ._records import Record
from ._summary import SessionInfo, stored_info

FORMAT = "trio-agents-session"
VERSION = 1
SUFFIX = ".jsonl"
DAMAGED = ".damaged-"

# Where the platform has them; without O_NOFOLLOW a link is caught by the lstat check.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # so opening a FIFO cannot hang the reader
_PROBE_SIZE = 4096


def header_line(session_id: str) -> bytes:
    """The first line of a session file, with its newline."""
    header = {"format": FORMAT, "version": VERSION, "session_id": session_id}
    return (json.dumps(header, separators=(",", ":")) + "\n").encode()


def check_root(root: Path) -> bool:
    """Whether ``root`` exists (as a directory).

    Raises:
        NotADirectoryError: ``root`` is a file (or anything but a directory).
    """
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(mode):
        raise NotADirectoryError(
            errno.ENOTDIR,
            "is a file, not a directory; give the session store a directory "
            "(or move the file away)",
            str(root),
        )
    return True


def prepare_root(root: Path) -> None:
    """Create ``root`` if needed and check that files can be written in it.

    Raises:
        NotADirectoryError: ``root`` is a file.
        SessionWriteError: ``root`` cannot be created, or a file cannot be written in it
            (read-only, full, no permission), naming the cause.
    """
    if not check_root(root):
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionWriteError(
                f"cannot create the session directory {root} ({_reason(exc)}); create it, or "
                f"choose another store directory"
            ) from exc
    # Invariant: the probe's name starts with '.', so it is never taken for a session.
    probe = root / f".write-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
        try:
            _write_all(fd, bytes(_PROBE_SIZE))
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise SessionWriteError(
            f"the session directory {root} is not writable ({_reason(exc)}); sessions could "
            f"not be saved — free space or fix the permissions, or choose another store "
            f"directory"
        ) from exc


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _session_name(name: str) -> str | None:
    """The session id a directory entry's name stands for, or ``None``."""
    if not name.endswith(SUFFIX):
        return None
    try:
        return check_session_id(name[: -len(SUFFIX)])
    except ValueError:
        return None


def _check_header(line: bytes, path: Path, session_id: str) -> None:
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SessionFormatError(
            f"{path} is not a trio-agents session file (its first line is not a "
            f"{FORMAT!r} header); move it out of the sessions directory"
        )
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionFormatError(f"{path}: the header has no valid format version: {version!r}")
    if version > VERSION:
        raise SessionFormatError(
            f"session file {path} has format version {version}, newer than version "
            f"{VERSION} that this trio-agents reads; upgrade trio-agents to load it"
        )
    if header.get("session_id") != session_id:
        raise SessionFormatError(
            f"{path}: the header names session {header.get('session_id')!r}, not "
            f"{session_id!r}; rename the file to match its header"
        )


@attrs.frozen
class Tail:
    """The end of a session file that reading left out (see the module rules).

    Attributes:
        offset: where the kept part of the file ends and the tail begins.
        size: the file's size when it was read.
        reason: what the tail is, e.g. ``"a torn last line (no newline at its end)"``.
    """

    offset: int
    size: int
    reason: str


@attrs.frozen
class Loaded:
    """What reading a session file found."""

    records: list[Record]
    tail: Tail | None
    mtime: float
    #: The file's size when it was read: a resume checks, once it holds the session's lock,
    #: that no other process wrote to the file since.
    size: int = 0


def _refuse_link(path: Path) -> SessionFormatError:
    return SessionFormatError(
        f"{path} is a symbolic link; the session store does not follow links out of its "
        f"directory — replace the link with the session file itself"
    )


def _open(path: Path, flags: int) -> int:
    """``os.open`` that never follows a link, and refuses anything but a regular file."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno != errno.ENOENT and path.is_symlink()):
            raise _refuse_link(path) from None
        raise
    try:
        if not _NOFOLLOW and path.is_symlink():  # pragma: no cover - platforms without it
            raise _refuse_link(path)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SessionFormatError(
                f"{path} is not a regular file; move it out of the sessions directory"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_all(fd: int) -> tuple[bytes, float]:
    info = os.fstat(fd)
    chunks: list[bytes] = []
    while chunk := os.read(fd, max(info.st_size, 1 << 16)):
        chunks.append(chunk)
    return b"".join(chunks), info.st_mtime


def read_session(path: Path, session_id: str, *, prefix: bool = False) -> Loaded:
    """Read a session file without writing to it (see the module rules).

    Args:
        prefix: read the longest valid start of a corrupt file instead of refusing it: the
            first bad line (one that cannot be read, or out of ``seq`` order) and everything
            after it is the tail (see :func:`repair_session`).

    Raises:
        SessionNotFoundError: there is no such file.
        SessionFormatError: the file is a link or not a regular file, or its header or a
            record is invalid.
    """
    try:
        fd = _open(path, os.O_RDONLY | _NONBLOCK)
    except FileNotFoundError:
        raise SessionNotFoundError(
            f"no stored session has the id {session_id!r} (no {path}); see store.list()"
        ) from None
    try:
        data, mtime = _read_all(fd)
    finally:
        os.close(fd)
    end = data.find(b"\n")
    if end < 0:
        if not header_line(session_id).startswith(data):
            # Not a torn header of ours (say, a foreign one-line file): refuse it.
            _check_header(data, path, session_id)
        # The header itself is torn: nothing after it was ever complete.
        torn = Tail(0, len(data), "a torn header (no complete first line)")
        return Loaded([], torn, mtime, len(data))
    _check_header(data[:end], path, session_id)
    records: list[Record] = []
    start = end + 1
    lineno = 1
    tail: Tail | None = None
    while start < len(data):
        lineno += 1
        where = f"{path}:{lineno}"
        end = data.find(b"\n", start)
        if end < 0:
            tail = Tail(start, len(data), "a torn last line (no newline at its end)")
            break
        # A last line that cannot be parsed is a torn write; a bad record is corruption.
        may_be_torn = end + 1 == len(data)
        try:
            value = parse_line(data[start:end], where=where)
            may_be_torn = False
            record = structure_record(value, where=where)
            if record.seq != len(records):
                raise SessionFormatError(
                    f"{where}: expected the record with seq {len(records)}, found seq {record.seq}"
                )
        except SessionFormatError as exc:
            if prefix:
                tail = Tail(start, len(data), f"from line {lineno} on: {exc}")
                break
            if not may_be_torn:
                raise SessionFormatError(
                    f"{exc}; the file is corrupt: 'trio-agents sessions repair {session_id}' "
                    f"keeps its valid start and moves the rest to a side file"
                ) from None
            tail = Tail(start, len(data), f"a last line that cannot be read ({exc})")
            break
        records.append(record)
        start = end + 1
    return Loaded(records, tail, mtime, len(data))


@attrs.frozen
class Repaired:
    """What :func:`repair_session` did.

    Attributes:
        records: how many records the file keeps.
        removed: how many bytes were moved out of it.
        side: the side file that holds them.
        reason: what was wrong where the kept part ends.
    """

    records: int
    removed: int
    side: Path | None
    reason: str


def repair_session(path: Path, session_id: str) -> Repaired | None:
    """Keep the longest valid start of a session file and move the rest to a side file
    (``<id>.jsonl.damaged-<n>``), holding the session's lock; nothing is deleted.

    Returns:
        What was done, or ``None`` when the file was whole.

    Raises:
        SessionNotFoundError: there is no such file.
        SessionFormatError: the header is not a session header (nothing to keep).
        LockHeld: another process has the session live.
    """
    _require_stored(path, session_id)
    lock = take_lock(path)
    try:
        loaded = read_session(path, session_id, prefix=True)
        tail = loaded.tail
        if tail is None:
            return None
        side = repair_tail(path, tail, header_line(session_id))
        return Repaired(len(loaded.records), tail.size - tail.offset, side, tail.reason)
    finally:
        release_lock(path, lock)


def repair_tail(path: Path, tail: Tail, header: bytes) -> Path | None:
    """Remove ``tail`` from the session file, keeping its bytes in a side file first.

    A tail at offset 0 (a torn header) is replaced by ``header``. The side file and the
    truncated file are fsynced before this returns.

    Returns:
        The side file ``<id>.jsonl.damaged-<n>``, or ``None`` when the tail was empty.

    Raises:
        OSError: the repair failed, or the file is not the size it had when it was read (it
            changed meanwhile); then nothing was truncated.
    """
    fd = _open(path, os.O_RDWR)
    try:
        size = os.fstat(fd).st_size
        if size != tail.size:
            raise OSError(
                errno.ESTALE,
                f"{path} changed since it was read ({tail.size} bytes then, {size} now); "
                f"load the session again",
            )
        os.lseek(fd, tail.offset, os.SEEK_SET)
        removed, _ = _read_all(fd)
        side = _keep(path, removed) if removed else None
        os.ftruncate(fd, tail.offset)
        if tail.offset == 0:
            os.lseek(fd, 0, os.SEEK_SET)
            _write_all(fd, header)
        _sync_fd(fd)
    finally:
        os.close(fd)
    if side is not None:
        _sync_dir(path.parent)
    return side


def _keep(path: Path, data: bytes) -> Path:
    n = 1
    while True:
        side = path.with_name(f"{path.name}{DAMAGED}{n}")
        try:
            fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
        except FileExistsError:
            n += 1
            continue
        try:
            _write_all(fd, data)
            _sync_fd(fd)
        finally:
            os.close(fd)
        return side


def _sync_fd(fd: int) -> None:
    os.fsync(fd)


def _sync_dir(root: Path) -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@attrs.frozen
class WriteJob:
    """Bytes to append to one session file.

    Attributes:
        path: the file.
        create: a new session: write a fresh file and atomically rename it into place
            (replacing a stored session of the same id).
        data: whole lines to append.
        sync: fsync the file after writing.
        unsynced: how many bytes at the end of the file were written since its last fsync (an
            append only). When the job fails, the file is cut back by those and by whatever
            the job wrote, to the end of what is durable, so that the lines can be written
            again (after a failed fsync, the kernel may have dropped the pages it could not
            write: only a rewrite makes them durable).
    """

    path: Path
    create: bool
    data: bytes
    sync: bool
    unsynced: int = 0


class RewindError(OSError):
    """A failed job whose file could not be cut back to its durable end (the file may now hold
    part of a line): the session cannot be written again until it is loaded again."""


def _try_sync(fd: int) -> OSError | None:
    try:
        _sync_fd(fd)
    except OSError as exc:
        return exc
    return None


def _sync_all(fds: list[int], syncer: Executor | None) -> list[OSError | None]:
    """fsync every file in ``fds``: concurrently on ``syncer``'s threads when it is given and
    there is more than one, else one after the other; each file's error, or ``None``."""
    if syncer is None or len(fds) < 2:
        return [_try_sync(fd) for fd in fds]
    return list(syncer.map(_try_sync, fds))


def write_batch(
    jobs: Sequence[WriteJob], root: Path, sync_root: bool, syncer: Executor | None = None
) -> list[OSError | None]:
    """Run every job, fsync each synced file once, and ``root`` once if asked.

    Every file is written before any is synced, and the files are synced concurrently on the
    threads of ``syncer`` (when given): the file system commits its journal for the syncs
    that wait at the same time together, so a batch of many sessions costs about one sync,
    not one per file (``benchmarks/bench_stores.py``, ``--fsync-delay-us``).

    Returns:
        For each job, ``None`` or the error that stopped it (one failure does not stop others).
    """
    results: list[OSError | None] = [None] * len(jobs)
    opened: list[tuple[int, int]] = []  # (job index, fd) of files written, still open
    starts: dict[int, int] = {}  # job index -> the file's size before the job wrote
    try:
        for i, job in enumerate(jobs):
            target = _target(job)
            flags = os.O_WRONLY | (os.O_CREAT | os.O_TRUNC if job.create else os.O_APPEND)
            try:
                # Never through a link: the store does not write outside its directory.
                fd = os.open(target, flags | _NOFOLLOW | _CLOEXEC, 0o644)
            except OSError as exc:
                # Nothing was written; but bytes written since the last fsync stay unknown.
                results[i] = _rewind(-1, None, job.unsynced, exc) if job.unsynced else exc
                continue
            opened.append((i, fd))
            try:
                start = 0 if job.create else os.lseek(fd, 0, os.SEEK_END)
                starts[i] = start
                _write_all(fd, job.data)
            except OSError as exc:
                results[i] = exc
        synced = [(i, fd) for i, fd in opened if jobs[i].sync and results[i] is None]
        for (i, _), error in zip(synced, _sync_all([fd for _, fd in synced], syncer), strict=True):
            results[i] = error
        for i, fd in opened:
            error = results[i]
            if error is not None and not jobs[i].create:
                results[i] = _rewind(fd, starts.get(i), jobs[i].unsynced, error)
    finally:
        for _, fd in opened:
            os.close(fd)
    for i, job in enumerate(jobs):
        if job.create and results[i] is None:
            try:
                os.replace(_target(job), job.path)
            except OSError as exc:
                results[i] = exc
        if job.create and results[i] is not None:
            # A new file that did not make it leaves nothing behind (the next batch starts
            # it again from the header).
            with contextlib.suppress(OSError):
                os.unlink(_target(job))
    if sync_root:
        _sync_dir(root)
    return results


def _rewind(fd: int, start: int | None, unsynced: int, error: OSError) -> OSError:
    """Cut a failed append's file back to its durable end; the error to report.

    Invariant: unless it is a :class:`RewindError`, the file now ends where its last fsync
    left it, so the caller may write every line since then again.
    """
    if start is None:
        return RewindError(error.errno, f"{error.strerror or error}; the file was not cut back")
    try:
        os.ftruncate(fd, max(start - unsynced, 0))
    except OSError as cut:
        return RewindError(error.errno, f"{error.strerror or error}; cutting it back failed: {cut}")
    return error


def _require_stored(path: Path, session_id: str) -> None:
    if not os.path.lexists(path):
        raise SessionNotFoundError(
            f"no stored session has the id {session_id!r}; see store.list() for the ids"
        )


def _target(job: WriteJob) -> Path:
    return job.path.with_name(job.path.name + ".new") if job.create else job.path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def remove_sessions(root: Path, session_ids: Sequence[str]) -> None:
    """Delete the files of ``session_ids`` (the last is the session asked for, the others the
    sessions under it, each before its parent), holding all their locks.

    Every lock is taken before any file goes, so a session live in another process stops the
    delete before it begins. The directory is synced after each file but the last, so the
    files go in their order even across a power loss: a delete cut short leaves no child
    whose parent is gone.

    Raises:
        SessionNotFoundError: the last session has no file (nothing was deleted).
        LockHeld: another process has one of them live (nothing was deleted); its
            ``session_id`` says which.
    """
    asked = session_ids[-1]
    _require_stored(root / f"{asked}{SUFFIX}", asked)
    locks: list[tuple[Path, int]] = []
    try:
        for session_id in session_ids:
            path = root / f"{session_id}{SUFFIX}"
            try:
                locks.append((path, take_lock(path)))
            except LockHeld as held:
                held.session_id = session_id
                raise
        for path, _ in locks[:-1]:
            path.unlink(missing_ok=True)
            _sync_dir(root)
        locks[-1][0].unlink(missing_ok=True)
    finally:
        for path, lock in reversed(locks):
            release_lock(path, lock)


def scan_root(root: Path) -> list[SessionInfo]:
    """Read every session file in ``root`` as :func:`read_session` does, writing nothing.

    A file that cannot be loaded is listed with the reason (``damaged``); nothing in one file
    can stop the scan of the others. Names that are not ``<session id>.jsonl`` are skipped.

    Raises:
        NotADirectoryError: ``root`` is a file.
    """
    if not check_root(root):
        return []
    with os.scandir(root) as entries:
        named = sorted((sid, Path(e.path)) for e in entries if (sid := _session_name(e.name)))
    found: list[SessionInfo] = []
    for session_id, path in named:
        try:
            loaded = read_session(path, session_id)
        except SessionNotFoundError:
            continue  # deleted since the directory was read
        except (SessionFormatError, OSError, MemoryError) as exc:
            found.append(stored_info(session_id, (), _lmtime(path), _damage(exc)))
            continue
        found.append(stored_info(session_id, loaded.records, loaded.mtime))
    return found


#: How every line of an ``AgentConfigured`` record begins (``dump_record`` writes the tag first).
_CONFIGURED = b'{"type":"agent_configured",'


def scan_parents(root: Path) -> dict[str, str | None]:
    """The ``parent_id`` of the latest ``AgentConfigured`` record of every session file in
    ``root``, found without reading the other records: what a delete needs, at a fraction of
    :func:`scan_root`'s cost. A file that cannot be read, or has no such record, has no
    parent (``None``), as the listing says of it."""
    if not check_root(root):
        return {}
    with os.scandir(root) as entries:
        named = sorted((sid, Path(e.path)) for e in entries if (sid := _session_name(e.name)))
    parents: dict[str, str | None] = {}
    for session_id, path in named:
        try:
            fd = _open(path, os.O_RDONLY | _NONBLOCK)
        except FileNotFoundError:
            continue  # deleted since the directory was read
        except (SessionFormatError, OSError):
            parents[session_id] = None
            continue
        try:
            data, _ = _read_all(fd)
        except OSError:
            data = b""
        finally:
            os.close(fd)
        parents[session_id] = _latest_parent(data)
    return parents


def _latest_parent(data: bytes) -> str | None:
    end = len(data)
    while (start := data.rfind(b"\n" + _CONFIGURED, 0, end)) >= 0:
        line_end = data.find(b"\n", start + 1)
        end = start
        try:
            # A line without its newline is torn, and left out as on load.
            record = json.loads(data[start + 1 : line_end]) if line_end >= 0 else None
        except (ValueError, RecursionError):
            continue  # a torn or damaged line: the one before counts
        if record is None:
            continue
        parent = record.get("parent_id") if isinstance(record, dict) else None
        return parent if isinstance(parent, str) else None
    return None


def _damage(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot be read ({exc.strerror})"
    return str(exc) or type(exc).__name__


def _lmtime(path: Path) -> float | None:
    try:
        return path.lstat().st_mtime
    except OSError:
        return None


# -- the session lock (one writing process per session) ---------------------------------------

LOCK = ".lock"


def lock_path(path: Path) -> Path:
    """The lock file beside a session file: ``<id>.jsonl.lock``."""
    return path.with_name(path.name + LOCK)


class LockHeld(Exception):
    """Another open file description holds the lock of a session (see :func:`take_lock`).

    Attributes:
        holder: who holds it, said for a person: ``"process 12 on host h"``, ``"another store
            object of this process"``, or ``"another process"`` when the lock file names none.
    """

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder
        #: The session whose lock it is, when the caller tried several.
        self.session_id: str | None = None


def take_lock(path: Path) -> int:
    """Take the exclusive lock of the session file ``path`` and write our pid and host in it.

    The lock is a ``flock`` on the lock file beside the session file, so the kernel drops it
    when the process dies, however it dies (a SIGKILLed holder leaves nothing to clean up),
    and the descriptor is close-on-exec, so no child process keeps it.

    Returns:
        The lock's descriptor, for :func:`release_lock`.

    Raises:
        LockHeld: another process (or another store object of this one) holds it.
        OSError: the lock file cannot be created or locked.
    """
    lock = lock_path(path)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise LockHeld(holder) from None
        except BaseException:
            os.close(fd)
            raise
        # Invariant: the lock is ours only if `fd` is still the file at `lock`; the previous
        # holder removes the file as it releases, so a file opened just before that is stale.
        try:
            current = os.stat(lock, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    return fd


def release_lock(path: Path, fd: int) -> None:
    """Release a lock :func:`take_lock` took (its file is removed first, while still held)."""
    try:
        with contextlib.suppress(OSError):
            os.unlink(lock_path(path))
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    text = ""
    with contextlib.suppress(OSError):
        text = os.pread(fd, 300, 0).decode("utf-8", "replace")
    pid, _, host = text.strip().partition(" ")
    if not pid.isdigit():
        return "another process"
    if int(pid) == os.getpid() and host == socket.gethostname():
        return "another store object of this process"
    return f"process {pid} on {host}" if host else f"process {pid}"
