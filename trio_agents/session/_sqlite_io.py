"""Blocking SQLite work of the SQLite backend; every function here runs in a worker thread.

Rules (the database file):
- ``PRAGMA application_id`` marks a trio-agents session database (:data:`APPLICATION_ID`) and
  ``PRAGMA user_version`` is its format version (:data:`VERSION`); a database of another
  application, or of a newer version, is refused with a :class:`SessionFormatError` that names
  the file and what to do.
- ``sessions(id, updated)`` has one row per stored session (a session with no records is
  stored too); ``records(session_id, seq, line)`` one row per record, ``line`` being the
  record's :func:`dump_record` JSON line, exactly a JSONL line without its newline, so one
  converter reads and validates both backends.
- Rows are only inserted; a committed record is never rewritten. A *new* session that takes the
  id of a stored one replaces it: its first batch deletes the old rows in the same transaction.
- The journal is WAL. A *sync* batch commits with ``synchronous=FULL`` (the commit fsyncs the
  WAL, and with it every frame written before: one sync for the whole batch); a *write* batch
  commits with ``synchronous=NORMAL`` (it survives a process kill, not a power loss).
- One transaction per batch, one savepoint per session in it: a session whose rows are refused
  does not fail the others; a failed commit fails them all and leaves the database as it was.

Rules (one writing process):
- A writable database is owned by one process at a time: :func:`open_database` takes an
  exclusive ``flock`` on ``<path>-lock`` and keeps it until :meth:`Database.close` (or the
  process's death: the kernel drops it, so a SIGKILLed owner leaves no stale lock). A second
  writer, in another process or another store object, is refused with a
  :class:`SessionWriteError` naming the holder's pid. Read-only openers take no lock, so
  ``sessions list`` works beside a running agent (WAL readers never block the writer).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import quote

import attrs

from ._convert import load_record
from ._errors import SessionFormatError, SessionNotFoundError, SessionWriteError
from ._records import Record
from ._summary import SessionInfo, stored_info

#: ``PRAGMA application_id`` of a session database ("TAgS").
APPLICATION_ID = 0x54416753
#: The format version this code reads and writes (``PRAGMA user_version``).
VERSION = 1

_SCHEMA = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL,
    updated REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE records (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    line TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
"""

_BUSY_TIMEOUT = 5.0

#: How the line of every ``AgentConfigured`` record begins (``dump_record`` writes the tag first).
_CONFIGURED = '{"type":"agent_configured",'


@attrs.frozen
class WriteJob:
    """Rows to insert for one session in a batch.

    Attributes:
        session_id: the session.
        replace: a new session's first write: delete any stored session of this id first.
        first_seq: the ``seq`` of ``lines[0]``.
        lines: record lines (:func:`dump_record`), in ``seq`` order.
        updated: the session's ``updated`` time (seconds since the epoch).
    """

    session_id: str
    replace: bool
    first_seq: int
    lines: Sequence[str]
    updated: float


def _uri(path: Path, mode: str) -> str:
    return f"file:{quote(os.fspath(path.absolute()))}?mode={mode}"


def lock_path(path: Path) -> Path:
    """The lock file beside the database."""
    return path.with_name(path.name + "-lock")


def open_database(path: Path, *, read_only: bool) -> Database | None:
    """Open (writable: create if needed) the session database at ``path``.

    Returns:
        The database, or ``None`` when ``read_only`` and there is no file yet.

    Raises:
        SessionWriteError: another process (or store object) has the database open for
            writing, or the file or its directory cannot be created.
        SessionFormatError: the file is not a trio-agents session database, or its format
            version is not this one.
    """
    if path.is_dir():
        raise SessionWriteError(
            f"the session database {path} is a directory; give the SQLite store a file "
            f"(sqlite:{path / 'sessions.db'}), or use the directory as a JSONL store"
        )
    if read_only:
        if not path.exists():
            return None
        return Database(path, _connect(path, "ro"), None)
    lock = _take_lock(path)
    try:
        conn = _connect(path, "rwc")
        try:
            database = Database(path, conn, lock)
            database.prepare()
        except BaseException:
            conn.close()
            raise
    except BaseException:
        os.close(lock)
        raise
    return database


def open_reader(path: Path) -> Database:
    """A second connection to a database :func:`open_database` opened writable, for reads
    (WAL: they never wait for the writer's commits)."""
    return Database(path, _connect(path, "rw"), None)


def _connect(path: Path, mode: str) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(
            _uri(path, mode),
            uri=True,
            isolation_level=None,  # explicit BEGIN / COMMIT
            check_same_thread=False,  # one thread at a time, serialized by the store
            timeout=_BUSY_TIMEOUT,
        )
    except sqlite3.Error as exc:
        raise SessionWriteError(
            f"cannot open the session database {path} ({exc}); check that its directory "
            f"exists and is writable, or choose another store"
        ) from exc
    return conn


def _take_lock(path: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise SessionWriteError(
            f"cannot create the session database {path} ({exc.strerror or exc}); create its "
            f"directory, or choose another store"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _read_pid(fd)
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise SessionWriteError(f"cannot lock {lock_path(path)}: {exc}") from exc
        if holder == str(os.getpid()):
            who = "another store object of this process"
        else:
            who = f"process {holder}" if holder else "another process"
        raise SessionWriteError(
            f"the session database {path} is in use by {who} (one process writes a "
            f"database at a time); stop that process, or use another store"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError):
        return os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return ""


class Database:
    """One connection to a session database; one thread uses it at a time (the store
    serializes its calls)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, lock: int | None) -> None:
        self.path = path
        self._conn = conn
        self._lock = lock
        # Invariant: the store never calls two methods at once; this turns a breach into an
        # error instead of a corrupt transaction.
        self._busy = threading.Lock()

    @contextlib.contextmanager
    def _using(self) -> Iterator[sqlite3.Connection]:
        """The connection, one thread at a time; an SQLite error that escapes is one line
        naming the file and the cause (:func:`_failure`)."""
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(f"the connection to {self.path} is used by two threads at once")
        try:
            yield self._conn
        except sqlite3.IntegrityError:
            raise  # a refused row: the batch reports it for its session
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from exc
        finally:
            self._busy.release()

    def prepare(self) -> None:
        """Create the schema of a new database, or check the format of an existing one;
        switch to WAL."""
        with self._using() as conn:
            self._check(conn, creating=True)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise SessionWriteError(
                    f"the session database {self.path} cannot use a write-ahead log (journal "
                    f"mode {mode!r}); put it on a local file system"
                )
            conn.execute("PRAGMA foreign_keys = ON")

    def check(self) -> None:
        """Check the format (a read-only database).

        Raises:
            SessionFormatError: as :func:`open_database` says.
        """
        with self._using() as conn:
            self._check(conn, creating=False)

    def _check(self, conn: sqlite3.Connection, *, creating: bool) -> None:
        try:
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            if _code(exc) != sqlite3.SQLITE_NOTADB:
                raise _failure(self.path, exc) from None
            raise SessionFormatError(
                f"{self.path} is not an SQLite database ({exc}); if it held sessions it is "
                f"damaged (check it with: sqlite3 {self.path} 'PRAGMA integrity_check'), "
                f"otherwise give the store another path"
            ) from None
        if app == 0 and version == 0 and tables == 0:
            if not creating:
                raise SessionFormatError(
                    f"{self.path} is an empty database, not a trio-agents session database; "
                    f"open it once writable to create the tables, or give another path"
                )
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return
        if app != APPLICATION_ID:
            raise SessionFormatError(
                f"{self.path} is an SQLite database of another application (application_id "
                f"{app:#x}), not a trio-agents session database; give the store another path"
            )
        if version != VERSION:
            then = "newer than" if version > VERSION else "not"
            raise SessionFormatError(
                f"session database {self.path} has format version {version}, {then} "
                f"version {VERSION} that this trio-agents reads; open it with the trio-agents "
                f"that wrote it (upgrade), or give the store another path"
            )

    def close(self) -> None:
        """Close the connection and release the lock."""
        try:
            with self._using() as conn:
                conn.close()
        finally:
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None

    # -- writing ---------------------------------------------------------------------------

    def write_batch(self, jobs: Sequence[WriteJob], *, sync: bool) -> list[Exception | None]:
        """Insert every job's rows in one transaction and commit it (``sync``: durably).

        Returns:
            For each job, ``None`` or the error that refused its rows (its savepoint was
            rolled back; the others were committed).

        Raises:
            sqlite3.Error, OSError: the transaction failed as a whole (nothing was committed).
        """
        results: list[Exception | None] = [None] * len(jobs)
        with self._using() as conn:
            conn.execute(f"PRAGMA synchronous = {'FULL' if sync else 'NORMAL'}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                for i, job in enumerate(jobs):
                    conn.execute("SAVEPOINT job")
                    try:
                        _write_job(conn, job)
                    except sqlite3.Error as exc:
                        if not conn.in_transaction:
                            # SQLite rolled the whole transaction back (a full disk does):
                            # it failed as a whole, for that reason.
                            raise
                        conn.execute("ROLLBACK TO job")
                        results[i] = exc
                    conn.execute("RELEASE job")
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        return results

    def remove(self, session_id: str, *under: str) -> None:
        """Delete a stored session, and the sessions ``under`` it, in one transaction.

        Raises:
            SessionNotFoundError: ``session_id`` is not stored (nothing was deleted).
        """
        with self._using() as conn:
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                gone = 0
                for doomed in (*under, session_id):
                    conn.execute("DELETE FROM records WHERE session_id = ?", (doomed,))
                    gone = conn.execute("DELETE FROM sessions WHERE id = ?", (doomed,)).rowcount
                conn.execute("COMMIT" if gone else "ROLLBACK")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        if not gone:
            raise SessionNotFoundError(_not_found(session_id))

    # -- reading ---------------------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        """Whether ``session_id`` is stored."""
        with self._using() as conn:
            row = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return row is not None

    def read_session(self, session_id: str) -> list[Record]:
        """The records of a stored session, in order.

        Raises:
            SessionNotFoundError: there is none.
            SessionFormatError: a row is not a valid record, or a ``seq`` is missing.
        """
        with self._using() as conn, _snapshot(conn):  # one snapshot for both queries
            found = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
            if found.fetchone() is None:
                # The key lookup walks the table's b-tree; a whole scan of the (small)
                # sessions table that finds the id says that b-tree is damaged.
                scanned = conn.execute("SELECT 1 FROM sessions WHERE id || '' = ?", (session_id,))
                if scanned.fetchone() is not None:
                    raise _failure(
                        self.path, sqlite3.DatabaseError("a lookup of a stored id misses it")
                    )
                raise SessionNotFoundError(_not_found(session_id))
            rows = conn.execute(
                "SELECT seq, line FROM records WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
        return self._records(session_id, rows)

    def _records(self, session_id: str, rows: Sequence[tuple[object, object]]) -> list[Record]:
        records: list[Record] = []
        for seq, line in rows:
            where = f"{self.path}: session {session_id!r}, seq {seq}"
            if seq != len(records):
                raise SessionFormatError(
                    f"{where}: expected the record with seq {len(records)}; the session is "
                    f"corrupt (check the database with: sqlite3 {self.path} 'PRAGMA "
                    f"integrity_check'; restore it from a backup, or delete the session)"
                )
            if not isinstance(line, str):
                raise SessionFormatError(f"{where}: the record is not text; the session is corrupt")
            record = load_record(line, where=where)
            if record.seq != seq:
                raise SessionFormatError(
                    f"{where}: the record says seq {record.seq}; the session is corrupt"
                )
            records.append(record)
        return records

    def parents(self) -> dict[str, str | None]:
        """The ``parent_id`` of the latest ``AgentConfigured`` record of every stored session
        (``None`` without one), reading no other record: what a delete needs."""
        with self._using() as conn, _snapshot(conn):
            ids = conn.execute("SELECT id FROM sessions ORDER BY id").fetchall()
            rows = conn.execute(
                "SELECT session_id, line FROM records WHERE substr(line, 1, ?) = ? "
                "ORDER BY session_id, seq",
                (len(_CONFIGURED), _CONFIGURED),
            ).fetchall()
        parents: dict[str, str | None] = {session_id: None for (session_id,) in ids}
        for session_id, line in rows:
            try:
                record = json.loads(line)
            except (TypeError, ValueError, RecursionError):
                continue  # a damaged record: the listing says so; its parent is unknown
            parent = record.get("parent_id") if isinstance(record, dict) else None
            parents[session_id] = parent if isinstance(parent, str) else None
        return parents

    def scan(self) -> list[SessionInfo]:
        """Every stored session, read as :meth:`read_session` does; a session that cannot be
        read is listed with the reason (``damaged``)."""
        with self._using() as conn, _snapshot(conn):
            sessions = conn.execute("SELECT id, updated FROM sessions ORDER BY id").fetchall()
            rows = conn.execute(
                "SELECT session_id, seq, line FROM records ORDER BY session_id, seq"
            ).fetchall()
        by_session: dict[str, list[tuple[object, object]]] = {}
        for session_id, seq, line in rows:
            by_session.setdefault(session_id, []).append((seq, line))
        found: list[SessionInfo] = []
        for session_id, updated in sessions:
            try:
                records = self._records(session_id, by_session.get(session_id, []))
            except SessionFormatError as exc:
                found.append(stored_info(session_id, (), updated, str(exc)))
                continue
            found.append(stored_info(session_id, records, updated))
        return found


def _write_job(conn: sqlite3.Connection, job: WriteJob) -> None:
    if job.replace:
        conn.execute("DELETE FROM records WHERE session_id = ?", (job.session_id,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (job.session_id,))
        conn.execute(
            "INSERT INTO sessions (id, updated) VALUES (?, ?)", (job.session_id, job.updated)
        )
    else:
        conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (job.updated, job.session_id))
    conn.executemany(
        "INSERT INTO records (session_id, seq, line) VALUES (?, ?, ?)",
        [(job.session_id, job.first_seq + i, line) for i, line in enumerate(job.lines)],
    )


def _not_found(session_id: str) -> str:
    return f"no stored session has the id {session_id!r}; see store.list() for the ids"


def _code(exc: sqlite3.Error) -> int | None:
    """The primary result code of an SQLite error (``SQLITE_FULL``, ...), if it has one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _failure(path: Path, exc: sqlite3.Error) -> SessionFormatError | SessionWriteError:
    """An SQLite error as one line that names the database and the cause, and what to do.

    A full disk is a :class:`SessionWriteError` that says the stored data is intact; a damaged
    database (a malformed page, a b-tree whose lookups miss) is a :class:`SessionFormatError`
    that says how to check it; anything else a :class:`SessionWriteError` with the cause.
    """
    code = _code(exc)
    if code == sqlite3.SQLITE_FULL or "database or disk is full" in str(exc):
        return SessionWriteError(
            f"the session database {path} cannot grow: the disk is full ({exc}); free some "
            f"space and try again (what it stores is intact)"
        )
    # A bare DatabaseError with no code: a damage found by this module's own checks.
    if (
        code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
        or type(exc) is sqlite3.DatabaseError
    ):
        return SessionFormatError(
            f"the session database {path} is damaged ({exc}); check it with: sqlite3 {path} "
            f"'PRAGMA integrity_check', then restore it from a backup (sqlite3's .recover "
            f"saves what it can)"
        )
    return SessionWriteError(f"the session database {path} failed ({exc})")


@contextlib.contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """One read transaction; ended without hiding an error that escapes it."""
    conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
