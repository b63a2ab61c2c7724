"""Blocking file I/O of the JSONL backend; every function here runs in a worker thread.

Rules (the file format):
- ``<root>/<id>.jsonl``: one header line
  ``{"format": "trio-agents-session", "version": 1, "session_id": ...}``, then one record per
  line (:func:`dump_record`), each line ending with ``\\n``.
- Lines are only ever appended; a written line is never rewritten.
- On read, a torn last line (no ``\\n``, or not JSON) is what a crash mid-write leaves: it is
  truncated off the file. Any other bad line is corruption and is refused, as is a header of
  a newer format version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from ._convert import structure_record
from ._errors import SessionFormatError, SessionNotFoundError
from ._ids import check_session_id
from ._records import Record

__all__ = [
    "FORMAT",
    "VERSION",
    "StoredFile",
    "WriteJob",
    "header_line",
    "prepare_root",
    "read_session",
    "remove_session",
    "scan_root",
    "write_batch",
]

FORMAT = "trio-agents-session"
VERSION = 1
SUFFIX = ".jsonl"


def header_line(session_id: str) -> bytes:
    """The first line of a session file, with its newline."""
    header = {"format": FORMAT, "version": VERSION, "session_id": session_id}
    return (json.dumps(header, separators=(",", ":")) + "\n").encode()


def prepare_root(root: Path) -> None:
    """Create ``root`` if needed."""
    root.mkdir(parents=True, exist_ok=True)


def _session_file(path: Path) -> bool:
    if not path.name.endswith(SUFFIX):
        return False
    try:
        check_session_id(path.name[: -len(SUFFIX)])
    except ValueError:
        return False
    return path.is_file()


def _check_header(line: bytes, path: Path, session_id: str) -> None:
    try:
        header = json.loads(line)
    except ValueError:
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


def read_session(path: Path, session_id: str) -> list[Record]:
    """Read and repair a session file; return its records.

    A torn last line is truncated off the file (and the truncation fsynced); a file whose
    header itself is torn (a prefix of the header line) is reset to a bare header.

    Raises:
        SessionNotFoundError: there is no such file.
        SessionFormatError: the header or a complete record line is invalid.
    """
    try:
        f = open(path, "r+b")  # noqa: SIM115 - closed below; truncation needs the handle
    except FileNotFoundError:
        raise SessionNotFoundError(
            f"no stored session has the id {session_id!r} (no {path}); see store.list()"
        ) from None
    with f:
        data = f.read()
        end = data.find(b"\n")
        if end < 0:
            header = header_line(session_id)
            if not header.startswith(data):
                # Not a torn header of ours (say, a foreign one-line file): never reset it.
                _check_header(data, path, session_id)
            # The header itself is torn: nothing after it was ever complete.
            f.seek(0)
            f.truncate()
            f.write(header)
            _sync(f)
            return []
        _check_header(data[:end], path, session_id)
        records: list[Record] = []
        good = end + 1
        # Invariant: each line is parsed once, and the file is split in one pass (a resume
        # folds 100,000 records in seconds); only a line that parsed becomes a record.
        lines = data[good:].split(b"\n")
        # The text after the last newline: empty, or a torn last line (cut off by a crash).
        del lines[-1]
        last = len(lines) - 1
        where = f"{path}:"
        for index, raw in enumerate(lines):
            parsed = _parsed(raw)
            if parsed is _TORN:
                if index == last and good + len(raw) + 1 == len(data):
                    break  # a complete but torn last line
                raise SessionFormatError(
                    f"{path}:{index + 2} is not valid JSON; the file is corrupt"
                )
            record = structure_record(parsed, where=f"{where}{index + 2}")
            if record.seq != index:
                raise SessionFormatError(
                    f"{path}:{index + 2}: expected the record with seq {index}, found "
                    f"seq {record.seq}; the file is corrupt"
                )
            records.append(record)
            good += len(raw) + 1
        if good < len(data):
            f.truncate(good)
            _sync(f)
        return records


_TORN = object()


_decode = json.JSONDecoder().decode


def _parsed(line: bytes) -> object:
    """The JSON value of ``line``, or ``_TORN`` if it is not JSON (or not UTF-8)."""
    try:
        return _decode(line.decode())
    except ValueError:  # UnicodeDecodeError is one
        return _TORN


def _sync(f: object) -> None:
    f.flush()  # type: ignore[attr-defined]
    _sync_fd(f.fileno())  # type: ignore[attr-defined]


def _sync_fd(fd: int) -> None:
    os.fsync(fd)


@attrs.frozen
class WriteJob:
    """Bytes to append to one session file.

    Attributes:
        path: the file.
        create: a new session: write a fresh file and atomically rename it into place
            (replacing a stored session of the same id).
        data: whole lines to append.
        sync: fsync the file after writing.
    """

    path: Path
    create: bool
    data: bytes
    sync: bool


def write_batch(jobs: Sequence[WriteJob], root: Path, sync_root: bool) -> list[OSError | None]:
    """Run every job, fsync each synced file once, and ``root`` once if asked.

    Every file is written before any is synced, so the first sync's journal commit can carry
    the others' pending metadata and the syncs that follow find little left to do.

    Returns:
        For each job, ``None`` or the error that stopped it (one failure does not stop others).
    """
    results: list[OSError | None] = [None] * len(jobs)
    opened: list[tuple[int, int]] = []  # (job index, fd) of files written, still open
    try:
        for i, job in enumerate(jobs):
            target = _target(job)
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if job.create else os.O_APPEND)
            try:
                fd = os.open(target, flags, 0o644)
            except OSError as exc:
                results[i] = exc
                continue
            opened.append((i, fd))
            try:
                _write_all(fd, job.data)
            except OSError as exc:
                results[i] = exc
        for i, fd in opened:
            if jobs[i].sync and results[i] is None:
                try:
                    _sync_fd(fd)
                except OSError as exc:
                    results[i] = exc
    finally:
        for _, fd in opened:
            os.close(fd)
    for i, job in enumerate(jobs):
        if job.create and results[i] is None:
            try:
                os.replace(_target(job), job.path)
            except OSError as exc:
                results[i] = exc
    if sync_root:
        fd = os.open(root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return results


def _target(job: WriteJob) -> Path:
    return job.path.with_name(job.path.name + ".new") if job.create else job.path


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def remove_session(path: Path, session_id: str) -> None:
    """Delete a session file.

    Raises:
        SessionNotFoundError: there is no such file.
    """
    try:
        path.unlink()
    except FileNotFoundError:
        raise SessionNotFoundError(
            f"no stored session has the id {session_id!r}; see store.list() for the ids"
        ) from None


@attrs.frozen
class StoredFile:
    """What a scan learns about one session file."""

    id: str
    records: int
    mtime: float
    contents: tuple[str, ...]
    queued: tuple[str, ...]
    cwd: str | None = None


def _latest_cwd(lines: list[bytes]) -> str | None:
    """The ``cwd`` of the last ``agent_configured`` line (only those lines are parsed)."""
    for line in reversed(lines):
        if b'"agent_configured"' not in line:
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("type") == "agent_configured":
            cwd = item.get("cwd")
            return cwd if isinstance(cwd, str) else None
    return None


def scan_root(root: Path) -> list[StoredFile]:
    """Summarize every session file in ``root`` without validating it."""
    found: list[StoredFile] = []
    try:
        paths = sorted(p for p in root.iterdir() if _session_file(p))
    except FileNotFoundError:
        return found
    for path in paths:
        try:
            mtime = path.stat().st_mtime
            data = path.read_bytes()
        except OSError:
            continue
        lines = data.split(b"\n")[1:-1]  # after the header; the last piece is torn or empty
        contents: list[str] = []
        queued: list[str] = []
        for line in lines:
            if contents:
                break
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            content = item.get("content")
            # Blank contents give no title (as in title_of), so look further.
            if not isinstance(content, str) or not content.strip():
                continue
            if item.get("type") == "user_message":
                contents.append(content)
            elif item.get("type") == "inbox_spliced" and item.get("op") == "add" and not queued:
                queued.append(content)
        found.append(
            StoredFile(
                id=path.name[: -len(SUFFIX)],
                records=len(lines),
                mtime=mtime,
                contents=tuple(contents),
                queued=tuple(queued),
                cwd=_latest_cwd(lines),
            )
        )
    return found
