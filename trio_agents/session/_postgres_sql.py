"""The PostgreSQL backend's SQL: plain synchronous functions on one psycopg connection.

Each function runs in a worker thread (the store calls them through ``trio.to_thread``) and
is one transaction, so a caller never sees half of one. The connection is in autocommit mode;
``conn.transaction()`` draws each transaction's bounds.

Rules (the schema, format version 1):
- ``trio_agents_format`` holds one row: the format version of the database. A database of a
  newer version is refused, never written.
- ``trio_agents_sessions`` holds one row per session: how many records it has, what
  ``list()`` shows of it (``title``, ``cwd``, ``parent_id``: the summary of its records, kept
  by each write), and its lease (``owner``, ``epoch``, ``expires``). ``owner IS NULL`` is a
  free session; a lease whose ``expires`` is past (by the database's clock, the one clock
  every worker shares) may be taken over. Every take-over increments ``epoch``.
- ``trio_agents_records`` holds the records, one JSON line each (``dump_record``), keyed by
  ``(session_id, seq)``, with the epoch of the lease that wrote it.
- Fencing: a write updates the session row ``WHERE owner = me AND epoch = mine AND records =
  the count I wrote so far`` and inserts the records only when that matched, in the same
  transaction. The row lock serializes it with any take-over, so a write from a worker whose
  lease was taken over is rejected, never interleaved.
- Row locks are taken in id order within a transaction, so two workers' batches cannot
  deadlock.
- ``parent_id`` came after format version 1 was first released: preparing the schema adds the
  column to a database that lacks it and fills it from the records (the latest
  ``agent_configured`` record of each session), once; an older trio_agents ignores it.
- A delete removes a session and every session under it (``parent_id``, recursively) in one
  transaction, or nothing when a worker holds any of them.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

import attrs
import psycopg

from .._base import connect_postgres
from ._convert import load_record
from ._errors import (
    SessionExistsError,
    SessionFormatError,
    SessionIdInUseError,
    SessionInUseError,
    SessionNotFoundError,
)
from ._records import Record


class _PipelineNoise(logging.Filter):
    """Drops psycopg's "error ignored terminating <psycopg.Pipeline [BAD]>": a pipeline whose
    block failed on a lost connection fails again as it closes, and psycopg logs that second
    failure. The block's own error is what the store reports (once); this line only repeats
    it, in psycopg's words, on every retry of an outage."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_PipelineNoise())

#: The format version this code writes (and the newest it reads).
FORMAT_VERSION = 1

# One constant key for the advisory lock that serializes schema creation across workers.
_SCHEMA_LOCK = 0x7472696F  # "trio"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trio_agents_format (
    version integer NOT NULL
);
CREATE TABLE IF NOT EXISTS trio_agents_sessions (
    id text PRIMARY KEY,
    records integer NOT NULL DEFAULT 0,
    owner text,
    epoch bigint NOT NULL DEFAULT 0,
    expires timestamptz,
    updated timestamptz NOT NULL DEFAULT now(),
    title text,
    cwd text,
    parent_id text
);
CREATE TABLE IF NOT EXISTS trio_agents_records (
    session_id text NOT NULL REFERENCES trio_agents_sessions (id) ON DELETE CASCADE,
    seq integer NOT NULL,
    epoch bigint NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""

Conn = psycopg.Connection[Any]

#: A failure of the connection (the server is down, restarted, or refused the login).
OperationalError = psycopg.OperationalError


def connect(dsn: str, stalled_after: float) -> Conn:
    """A new autocommit connection to ``dsn``, ended by the server when it idles
    ``stalled_after`` seconds inside a transaction (a stopped client's row locks would keep
    every other worker from taking its sessions over)."""
    conn: Conn = connect_postgres(dsn, stalled_after)
    return conn


def prepare_schema(conn: Conn) -> int:
    """Create the tables if missing, and return the database's format version.

    Raises:
        SessionFormatError: the database was written by a newer version of trio_agents.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(_SCHEMA)
        _add_parents(conn)
        row = conn.execute("SELECT max(version) FROM trio_agents_format").fetchone()
        version = row[0] if row is not None else None
        if version is None:
            conn.execute("INSERT INTO trio_agents_format (version) VALUES (%s)", (FORMAT_VERSION,))
            version = FORMAT_VERSION
    if version > FORMAT_VERSION:
        raise SessionFormatError(
            f"the session database is format version {version}, and this trio_agents reads "
            f"versions up to {FORMAT_VERSION}; upgrade trio_agents to use it"
        )
    return int(version)


def _add_parents(conn: Conn) -> None:
    """Add ``parent_id`` to a database made before it, filled from the records (see the
    module's rules)."""
    found = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'trio_agents_sessions' AND column_name = 'parent_id'"
    ).fetchone()
    if found is not None:
        return
    conn.execute("ALTER TABLE trio_agents_sessions ADD COLUMN parent_id text")
    # Invariant: dump_record writes the tag first, so the prefix finds every such record
    # without parsing the others.
    conn.execute(
        "UPDATE trio_agents_sessions AS s SET parent_id = c.parent_id FROM ("
        "SELECT DISTINCT ON (session_id) session_id, line::jsonb ->> 'parent_id' AS parent_id "
        'FROM trio_agents_records WHERE starts_with(line, \'{"type":"agent_configured"\') '
        "ORDER BY session_id, seq DESC) AS c WHERE s.id = c.session_id"
    )


def _in_use(session_id: str, owner: str, expires: datetime | None) -> SessionIdInUseError:
    until = f", its lease runs until {expires:%H:%M:%S} UTC unless renewed" if expires else ""
    return SessionIdInUseError(
        f"session {session_id!r} is in use by another worker ({owner}{until}); end it "
        f"there, or resume it once that worker has stopped and its lease expired"
    )


def take_lease(
    conn: Conn,
    session_id: str,
    owner: str,
    lease_seconds: float,
    *,
    new: bool,
    records: int,
) -> int:
    """Take the lease on ``session_id`` for ``owner``; return its epoch.

    A new session's row is created (with no records); a loaded one must still hold the
    ``records`` it was loaded with (no other worker wrote it since).

    Raises:
        SessionIdInUseError: another owner's lease has not expired, or another worker wrote
            the session since it was loaded.
        SessionExistsError: the session is new and a stored one has its id.
        SessionNotFoundError: the session was loaded, and deleted since.
    """
    while True:
        with conn.transaction():
            row = conn.execute(
                "SELECT owner, expires, records, expires > clock_timestamp() "
                "FROM trio_agents_sessions WHERE id = %s FOR UPDATE",
                (session_id,),
            ).fetchone()
            if row is None:
                if not new:
                    raise SessionNotFoundError(
                        f"session {session_id!r} was deleted (by another worker) after it was "
                        f"loaded; it cannot be resumed"
                    )
                created = conn.execute(
                    "INSERT INTO trio_agents_sessions (id, owner, epoch, expires) "
                    "VALUES (%s, %s, 1, clock_timestamp() + make_interval(secs => %s)) "
                    "ON CONFLICT (id) DO NOTHING RETURNING epoch",
                    (session_id, owner, lease_seconds),
                ).fetchone()
                if created is None:
                    continue  # another worker created it meanwhile: look at its row again
                return int(created[0])
            holder, expires, stored, held = row
            if holder is not None and holder != owner and held:
                raise _in_use(session_id, holder, expires)
            if new:
                raise SessionExistsError(
                    f"session {session_id!r} is already stored; resume it "
                    f"(ctx.agents.resume({session_id!r})), or delete it first"
                )
            if stored != records:
                raise SessionIdInUseError(
                    f"session {session_id!r} was written by another worker after it was "
                    f"loaded here ({stored} records stored, {records} loaded); load it again"
                )
            taken = conn.execute(
                "UPDATE trio_agents_sessions SET owner = %s, epoch = epoch + 1, "
                "expires = clock_timestamp() + make_interval(secs => %s) "
                "WHERE id = %s RETURNING epoch",
                (owner, lease_seconds, session_id),
            ).fetchone()
            assert taken is not None  # the row is locked
            return int(taken[0])


def _lock_in_id_order(conn: Conn, ids: builtins.list[str]) -> None:
    """Lock the session rows ``ids`` in id order, so that two workers' batches cannot
    deadlock (see the module's rules)."""
    conn.execute(
        "SELECT id FROM trio_agents_sessions WHERE id = ANY(%b) ORDER BY id FOR UPDATE", (ids,)
    )


def renew_leases(
    conn: Conn, owner: str, lease_seconds: float, leases: Sequence[tuple[str, int]]
) -> builtins.list[str]:
    """Extend every lease in ``leases`` (``(session_id, epoch)`` pairs) that ``owner`` still
    holds; return the ids of those it lost (taken over, or deleted). One transaction of two
    statements, in one pipeline (one round trip), however many leases."""
    ids = [session_id for session_id, _ in leases]
    # Invariant: a pipeline with no transaction block of its own is one implicit transaction
    # up to its one Sync (see write_batch).
    with conn.pipeline():
        _lock_in_id_order(conn, ids)
        renewed = conn.execute(
            "UPDATE trio_agents_sessions AS s "
            "SET expires = clock_timestamp() + make_interval(secs => %s) "
            "FROM unnest(%b::text[], %b::bigint[]) AS lease(id, epoch) "
            "WHERE s.id = lease.id AND s.owner = %s AND s.epoch = lease.epoch RETURNING s.id",
            (lease_seconds, ids, [epoch for _, epoch in leases], owner),
        )
    # Read once the pipeline has synced: fetching inside it would cost a round trip of its own.
    kept = {row[0] for row in renewed.fetchall()}
    return [session_id for session_id in ids if session_id not in kept]


def release_lease(conn: Conn, session_id: str, owner: str, epoch: int) -> bool:
    """Give up the lease if ``owner`` still holds it at ``epoch``; whether it did."""
    row = conn.execute(
        "UPDATE trio_agents_sessions SET owner = NULL, expires = NULL "
        "WHERE id = %s AND owner = %s AND epoch = %s RETURNING id",
        (session_id, owner, epoch),
    ).fetchone()
    return row is not None


@attrs.frozen
class WriteJob:
    """The records of one session to append: ``lines[i]`` is record ``first + i``."""

    session_id: str
    epoch: int
    first: int
    lines: tuple[str, ...]
    title: str | None
    cwd: str | None
    parent_id: str | None = None


#: What a write did for one session: written, or refused and why.
Outcome = Literal["written", "lost", "moved"]

#: What a statement riding in a write batch must match of a session's row to write anything
#: for it: ``(session_id, epoch, records)``, the records being the count the session holds
#: once the batch wrote its lines. With the store's ``owner``, it is the fence of the records
#: (see the module's rules): a session whose lease was taken over, or whose records this batch
#: did not write, matches nothing.
Fence = tuple[str, int, int]

#: A statement that rides in a write batch: called inside the batch's pipeline, after the
#: records, with the connection, the store's owner id and the ``(fence, item)`` of each
#: session it rides with; it sends its statement (one, for every item) and returns what reads
#: its results, one per item, once the batch has committed.
Rider = Callable[[Conn, str, Sequence[tuple[Fence, Any]]], Callable[[], Sequence[Any]]]


@attrs.define(eq=False)
class Riding:
    """One rider's statement in one write batch; ``results`` are set once the batch committed
    (one per item, in order)."""

    rider: Rider
    items: builtins.list[tuple[Fence, Any]] = attrs.field(factory=list)
    results: Sequence[Any] = ()


def write_batch(
    conn: Conn,
    owner: str,
    lease_seconds: float,
    jobs: Sequence[WriteJob],
    *,
    notify: str | None = None,
    riders: Sequence[Riding] = (),
) -> builtins.list[Outcome]:
    """Append every job's records in one transaction (one commit for the whole batch).

    A job whose lease ``owner`` lost (``"lost"``), or whose session no longer holds the
    records the job follows (``"moved"``), writes nothing; the others are written, and their
    leases extended. The outcomes are in the order of ``jobs``. With ``notify``, the id of
    every session written is sent on that channel, in the same transaction (delivered at its
    commit). Each of ``riders`` sends its statement in the same transaction, after the records
    (its ``results`` are set once it committed). The batch is the same few statements however
    many sessions it holds, sent in one
    pipeline: one round trip (and one wait for the GIL) for the whole batch. Array parameters
    go in binary (``%b``): the text form escapes every quote of every JSON line, which cost
    more than the rest of the batch.

    Raises:
        psycopg.Error: the transaction failed; nothing of the batch was written.
    """
    ids = [job.session_id for job in jobs]
    epochs = [job.epoch for job in jobs]
    rows = [
        (job.session_id, job.first + n, job.epoch, job.first + len(job.lines), line)
        for job in jobs
        for n, line in enumerate(job.lines)
    ]
    columns = [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * 5
    # Invariant: the pipeline has no BEGIN of its own: its statements up to its one Sync are
    # one implicit transaction, committed at the Sync, or rolled back whole when one fails
    # (test_postgres_batch_is_one_round_trip pins it). ``conn.transaction()`` inside a
    # pipeline would sync after its BEGIN and around its COMMIT: four round trips, not one.
    with conn.pipeline():
        _lock_in_id_order(conn, ids)
        updated = conn.execute(
            "UPDATE trio_agents_sessions AS s SET records = job.first + job.count, "
            "updated = now(), expires = clock_timestamp() + make_interval(secs => %s), "
            "title = coalesce(job.title, s.title), cwd = job.cwd, parent_id = job.parent_id "
            "FROM unnest(%b::text[], %b::bigint[], %b::int[], %b::int[], %b::text[], %b::text[], "
            "%b::text[]) AS job(id, epoch, first, count, title, cwd, parent_id) "
            "WHERE s.id = job.id AND s.owner = %s AND s.epoch = job.epoch "
            "AND s.records = job.first RETURNING s.id",
            (
                lease_seconds,
                ids,
                epochs,
                [job.first for job in jobs],
                [len(job.lines) for job in jobs],
                [job.title for job in jobs],
                [job.cwd for job in jobs],
                [job.parent_id for job in jobs],
                owner,
            ),
        )
        # The fence again, as the UPDATE left it: only a session it moved to the records'
        # end (still this owner's, at this epoch) takes them.
        conn.execute(
            "INSERT INTO trio_agents_records (session_id, seq, epoch, line) "
            "SELECT r.id, r.seq, r.epoch, r.line FROM "
            "unnest(%b::text[], %b::int[], %b::bigint[], %b::int[], %b::text[]) "
            "AS r(id, seq, epoch, upto, line) "
            "JOIN trio_agents_sessions AS s ON s.id = r.id AND s.owner = %s "
            "AND s.epoch = r.epoch AND s.records = r.upto",
            (*columns, owner),
        )
        holding = conn.execute(
            "SELECT s.id FROM trio_agents_sessions AS s "
            "JOIN unnest(%b::text[], %b::bigint[]) AS job(id, epoch) "
            "ON s.id = job.id AND s.owner = %s AND s.epoch = job.epoch",
            (ids, epochs, owner),
        )
        if notify is not None:
            conn.execute(
                "SELECT pg_notify(%s, s.id) FROM trio_agents_sessions AS s "
                "JOIN unnest(%b::text[], %b::bigint[], %b::int[]) AS job(id, epoch, upto) "
                "ON s.id = job.id AND s.owner = %s AND s.epoch = job.epoch "
                "AND s.records = job.upto",
                (notify, ids, epochs, [job.first + len(job.lines) for job in jobs], owner),
            )
        readers = [(riding, riding.rider(conn, owner, riding.items)) for riding in riders]
    # Read once the pipeline has synced (after the COMMIT, when every result is in): a fetch
    # inside it would sync before the COMMIT, a second round trip.
    written = {row[0] for row in updated.fetchall()}
    held = {row[0] for row in holding.fetchall()}
    for riding, read in readers:
        riding.results = read()
    return [
        "written" if job.session_id in written else "moved" if job.session_id in held else "lost"
        for job in jobs
    ]


def discard_session(conn: Conn, session_id: str, owner: str, epoch: int) -> None:
    """Remove a new session's row (and records) if ``owner`` still holds it at ``epoch``."""
    conn.execute(
        "DELETE FROM trio_agents_sessions WHERE id = %s AND owner = %s AND epoch = %s",
        (session_id, owner, epoch),
    )


def is_stored(conn: Conn, session_id: str) -> bool:
    """Whether a session row has this id."""
    row = conn.execute("SELECT 1 FROM trio_agents_sessions WHERE id = %s", (session_id,))
    return row.fetchone() is not None


def _not_found(session_id: str) -> SessionNotFoundError:
    return SessionNotFoundError(
        f"no stored session has the id {session_id!r}; see store.list() for the ids"
    )


def read_session(conn: Conn, session_id: str) -> builtins.list[Record]:
    """The stored records of ``session_id``, in order (one snapshot: one transaction).

    Raises:
        SessionNotFoundError: no session has this id.
        SessionFormatError: a record cannot be read, or records are missing.
    """
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        row = conn.execute(
            "SELECT records FROM trio_agents_sessions WHERE id = %s", (session_id,)
        ).fetchone()
        if row is None:
            raise _not_found(session_id)
        lines = conn.execute(
            "SELECT seq, line FROM trio_agents_records WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
    records: builtins.list[Record] = []
    for expected, (seq, line) in enumerate(lines):
        if seq != expected:
            break
        records.append(load_record(line, where=f"session {session_id!r} record {seq}"))
    if len(records) != row[0] or len(lines) != row[0]:
        raise SessionFormatError(
            f"session {session_id!r} in the database is damaged: it should hold {row[0]} "
            f"records with seq 0 to {row[0] - 1}, and {len(lines)} are stored "
            f"({len(records)} contiguous); restore the database from a backup"
        )
    return records


@attrs.frozen
class Listed:
    """One row of :func:`list_sessions`."""

    id: str
    records: int
    updated: datetime
    title: str | None
    cwd: str | None
    parent_id: str | None


def list_sessions(conn: Conn) -> builtins.list[Listed]:
    """Every stored session."""
    rows = conn.execute(
        "SELECT id, records, updated, title, cwd, parent_id FROM trio_agents_sessions"
    ).fetchall()
    return [Listed(*row) for row in rows]


def parents(conn: Conn) -> dict[str, str | None]:
    """The parent of every stored session (``parent_id``)."""
    rows = conn.execute("SELECT id, parent_id FROM trio_agents_sessions").fetchall()
    return dict(rows)


#: The session asked for and every session under it (one row each, ids in order).
_SUBTREE = (
    "WITH RECURSIVE tree(id) AS (SELECT %s::text UNION "
    "SELECT s.id FROM trio_agents_sessions AS s JOIN tree ON s.parent_id = tree.id) "
    "SELECT s.id, s.owner, s.expires > clock_timestamp() FROM trio_agents_sessions AS s "
    "JOIN tree ON s.id = tree.id ORDER BY s.id FOR UPDATE OF s"
)


def delete_tree(conn: Conn, session_id: str) -> builtins.list[str]:
    """Delete a session and every session under it, in one transaction, when no worker holds
    any of them; the ids deleted.

    Raises:
        SessionInUseError: a worker holds the lease of one of them (nothing was deleted).
        SessionNotFoundError: no session has this id.
    """
    with conn.transaction():
        rows: builtins.list[tuple[str, str | None, bool | None]] = []
        while True:
            # Each statement sees what was committed when it began: a child committed since
            # the previous one (before its parent's row was locked) is found, and locked, here.
            found = conn.execute(_SUBTREE, (session_id,)).fetchall()
            if len(found) == len(rows):
                break
            rows = found
        if not rows:
            raise _not_found(session_id)
        for doomed, holder, held in rows:
            if holder is not None and held:
                under = doomed != session_id
                which = f"{doomed!r}, under {session_id!r}," if under else repr(doomed)
                raise SessionInUseError(
                    f"session {which} is in use by another worker ({holder}); end it "
                    f"there, then delete {repr(session_id) if under else 'it'}"
                )
        ids = [row[0] for row in rows]
        conn.execute("DELETE FROM trio_agents_sessions WHERE id = ANY(%s)", (ids,))
    return ids
