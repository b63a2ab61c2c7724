"""The work queue's SQL: plain synchronous functions on one psycopg connection, each one
transaction, run in worker threads (psycopg 3 has no trio support).

Rules (the queue's schema, version 1; its tables sit beside the session store's):
- ``trio_agents_queue_format`` holds one row, the queue's schema version. A newer version is
  refused at start, never written; an older one is never upgraded implicitly (an upgrade is a
  step of its own, named in the error).
- ``trio_agents_workers`` holds one row per live worker, ``expires`` renewed by its heartbeat
  (the database's clock). A worker whose row is gone or expired is dead.
- ``trio_agents_routes`` maps a session to the one worker that runs it now. A route whose
  worker is dead is free, as is a missing route; taking one never waits on another worker.
- ``trio_agents_prompts`` is the queue: one row per prompt, ``seq`` its submission order.
  A session's prompts run one at a time in ``seq`` order: only the first of a session's
  unfinished prompts (``queued`` or ``running``) can be claimed, by the session's route owner
  or by anyone when the route is free. ``claim`` counts the claims of a prompt; every write a
  worker makes to a claimed prompt names it (``worker = me AND claim = mine``), so a worker
  whose claim was taken over writes nothing more to it.
- Claims take ``FOR UPDATE SKIP LOCKED`` on the prompt rows, so concurrent claimers pass each
  other; the route row is then taken with an upsert that only succeeds for a free route.
- Every change a client or a worker must hear of is a ``NOTIFY`` in the same transaction
  (delivered at commit): ``trio_agents_queue`` (payload ``submit:<session>`` with a space and
  nothing after it for a free route, ``free:<session>``) for every worker; a worker's own
  channel (:func:`worker_channel`: ``trio_agents_queue_`` and the md5 of its id, which fits a
  channel name whatever the id) for a submit to a session it routes (``submit:<session>
  <worker>``) and a cancel of a prompt it runs (``cancel:<prompt>``): only the worker that can
  act on it wakes. ``trio_agents_prompts`` when a prompt settles (payload the prompt's
  :data:`SETTLED` JSON object, or only its ``id`` when the object would not fit in a
  notification), ``trio_agents_records`` (payload the session id) when records of a session
  were written (the worker's store sends it with each write batch).
- A prompt's path is one round trip per step: the submit, the claim, the settle (or the hand
  back) are each one statement, and a function of several statements sends them in one
  pipeline with no BEGIN of its own (an implicit transaction up to its one Sync).
"""

from __future__ import annotations

import builtins
import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import attrs
import psycopg

from .._base import connect_postgres
from ._errors import PromptIdInUseError, QueueFormatError

#: The queue's schema version this code writes (and the newest it reads).
FORMAT_VERSION = 1

QUEUE_CHANNEL = "trio_agents_queue"
PROMPTS_CHANNEL = "trio_agents_prompts"
RECORDS_CHANNEL = "trio_agents_records"


def worker_channel(worker: str) -> str:
    """The ``NOTIFY`` channel of one worker (see the module's rules); the SQL of a submit
    names it the same way (``md5`` of the id, in hex)."""
    return f"{QUEUE_CHANNEL}_{hashlib.md5(worker.encode()).hexdigest()}"


# The advisory lock that serializes schema creation across processes ("tqueue").
_SCHEMA_LOCK = 0x747175657565

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trio_agents_queue_format (
    version integer NOT NULL
);
CREATE TABLE IF NOT EXISTS trio_agents_workers (
    id text PRIMARY KEY,
    started timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires timestamptz NOT NULL,
    draining boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS trio_agents_routes (
    session_id text PRIMARY KEY,
    worker text NOT NULL,
    since timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS trio_agents_routes_worker ON trio_agents_routes (worker);
CREATE TABLE IF NOT EXISTS trio_agents_prompts (
    id text PRIMARY KEY,
    seq bigserial UNIQUE,
    session_id text NOT NULL,
    content text NOT NULL,
    agent text,
    policy text NOT NULL,
    retries integer NOT NULL,
    state text NOT NULL DEFAULT 'queued',
    worker text,
    claim integer NOT NULL DEFAULT 0,
    cancel text,
    answer text,
    error text,
    submitted timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished timestamptz
);
CREATE INDEX IF NOT EXISTS trio_agents_prompts_open
    ON trio_agents_prompts (session_id, seq) WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS trio_agents_prompts_queued
    ON trio_agents_prompts (seq) WHERE state IN ('queued', 'running');
"""

Conn = psycopg.Connection[Any]


def connect(dsn: str, stalled_after: float = 30.0) -> Conn:
    """A new autocommit connection, ended by the server when it idles ``stalled_after``
    seconds inside a transaction (a stopped worker's route locks)."""
    conn: Conn = connect_postgres(dsn, stalled_after)
    return conn


def prepare_queue(conn: Conn) -> int:
    """Create the queue's tables if missing (idempotent); return the schema version.

    Raises:
        QueueFormatError: the database's queue was made by a newer trio_agents.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(_SCHEMA)
        row = conn.execute("SELECT max(version) FROM trio_agents_queue_format").fetchone()
        version = row[0] if row is not None else None
        if version is None:
            conn.execute(
                "INSERT INTO trio_agents_queue_format (version) VALUES (%s)", (FORMAT_VERSION,)
            )
            version = FORMAT_VERSION
    if version > FORMAT_VERSION:
        raise QueueFormatError(
            f"the work queue in this database is schema version {version}, and this "
            f"trio_agents reads versions up to {FORMAT_VERSION}; upgrade trio_agents on this "
            f"machine to serve or use it"
        )
    return int(version)


# -- workers ---------------------------------------------------------------------------------


def register_worker(conn: Conn, worker: str, lease_seconds: float) -> None:
    """Add ``worker`` as live for ``lease_seconds`` (its heartbeat renews it)."""
    conn.execute(
        "INSERT INTO trio_agents_workers (id, expires) "
        "VALUES (%s, clock_timestamp() + make_interval(secs => %s))",
        (worker, lease_seconds),
    )


def heartbeat(
    conn: Conn, worker: str, lease_seconds: float, draining: bool
) -> tuple[builtins.set[str], bool]:
    """Renew ``worker``'s row; return the sessions it still routes (the others were taken
    over while it was stopped), and whether a dead worker left running prompts (no
    notification says that a worker died: the heartbeats find out)."""
    with conn.pipeline():  # one implicit transaction, one round trip
        conn.execute(
            "INSERT INTO trio_agents_workers (id, expires, draining) "
            "VALUES (%s, clock_timestamp() + make_interval(secs => %s), %s) "
            "ON CONFLICT (id) DO UPDATE SET expires = excluded.expires, "
            "draining = excluded.draining",
            (worker, lease_seconds, draining),
        )
        routed = conn.execute(
            "SELECT session_id FROM trio_agents_routes WHERE worker = %s", (worker,)
        )
        orphaned = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM trio_agents_prompts WHERE state = 'running' "
            "AND worker NOT IN (SELECT id FROM trio_agents_workers "
            "WHERE expires > clock_timestamp()))"
        )
    # Read once the pipeline has synced: a fetch inside it would cost a round trip of its own.
    orphans = orphaned.fetchone()
    return {row[0] for row in routed.fetchall()}, bool(orphans and orphans[0])


def unregister_worker(conn: Conn, worker: str) -> None:
    """Remove ``worker`` and every route it holds; wake the other workers."""
    with conn.pipeline():  # one implicit transaction, one round trip
        conn.execute("DELETE FROM trio_agents_routes WHERE worker = %s", (worker,))
        conn.execute("DELETE FROM trio_agents_workers WHERE id = %s", (worker,))
        conn.execute("SELECT pg_notify(%s, 'free:')", (QUEUE_CHANNEL,))


def release_routes(conn: Conn, worker: str, sessions: Sequence[str]) -> None:
    """Give up ``worker``'s routes of ``sessions``; wake the other workers."""
    with conn.pipeline():  # one implicit transaction, one round trip
        conn.execute(
            "DELETE FROM trio_agents_routes WHERE worker = %s AND session_id = ANY(%s)",
            (worker, list(sessions)),
        )
        conn.execute(
            "SELECT pg_notify(%s, 'free:' || s) FROM unnest(%s::text[]) AS s",
            (QUEUE_CHANNEL, list(sessions)),
        )


# -- prompts ---------------------------------------------------------------------------------


@attrs.frozen
class PromptRow:
    """What the queue knows of one prompt."""

    id: str
    seq: int
    session_id: str
    content: str
    agent: str | None
    policy: str
    retries: int
    state: str
    worker: str | None
    claim: int
    cancel: str | None
    answer: str | None
    error: str | None
    submitted: datetime
    finished: datetime | None


_COLUMNS = (
    "id, seq, session_id, content, agent, policy, retries, state, worker, claim, cancel, "
    "answer, error, submitted, finished"
)
#: The same columns, of the prompts table named ``p`` (in a statement that joins another).
_PREFIXED = ", ".join(f"p.{name}" for name in _COLUMNS.split(", "))


def submit(
    conn: Conn,
    prompt_id: str,
    session_id: str,
    content: str,
    agent: str | None,
    policy: str,
    retries: int,
) -> PromptRow:
    """Queue a prompt, or return the one already queued under ``prompt_id`` (the same
    submission, retried).

    Raises:
        PromptIdInUseError: ``prompt_id`` names a different prompt.
    """
    # One statement: the insert and, only when it inserted, the notification: on the
    # channel of the session's live route owner, if any (only it can claim the prompt, so the
    # other workers need not wake), else on every worker's (``submit:<session> <owner>``).
    row = conn.execute(
        f"""
        WITH added AS (
            INSERT INTO trio_agents_prompts (id, session_id, content, agent, policy, retries)
            VALUES (%(id)s, %(s)s, %(content)s, %(agent)s, %(policy)s, %(retries)s)
            ON CONFLICT (id) DO NOTHING RETURNING {_COLUMNS}
        ), owner AS (
            SELECT (SELECT r.worker FROM trio_agents_routes AS r
                JOIN trio_agents_workers AS w ON w.id = r.worker
                WHERE r.session_id = %(s)s AND w.expires > clock_timestamp()) AS worker
        )
        SELECT added.*, pg_notify(
            CASE WHEN owner.worker IS NULL THEN %(channel)s
            ELSE %(channel)s || '_' || md5(owner.worker) END,
            'submit:' || %(s)s || ' ' || coalesce(owner.worker, ''))::text
        FROM added, owner
        """,
        {
            "id": prompt_id,
            "s": session_id,
            "content": content,
            "agent": agent,
            "policy": policy,
            "retries": retries,
            "channel": QUEUE_CHANNEL,
        },
    ).fetchone()
    if row is not None:
        return PromptRow(*row[:-1])
    found = read_prompt(conn, prompt_id)
    assert found is not None  # rows are never deleted
    if (found.session_id, found.content) != (session_id, content):
        raise PromptIdInUseError(
            f"prompt id {prompt_id!r} was already submitted to session {found.session_id!r} "
            f"with other content; give each prompt its own id (or none, for a fresh one)"
        )
    return found


def read_prompt(conn: Conn, prompt_id: str) -> PromptRow | None:
    """The prompt ``prompt_id``, or ``None``."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM trio_agents_prompts WHERE id = %s", (prompt_id,)
    ).fetchone()
    return PromptRow(*row) if row is not None else None


def request_cancel(conn: Conn, prompt_id: str, cause: str) -> PromptRow | None:
    """Ask for ``prompt_id`` to be cancelled with ``cause`` (a record line). A prompt no
    worker has claimed is cancelled at once; a running one is cancelled by its worker, woken
    by the notification. The first cause asked for wins."""
    with conn.transaction():
        row = conn.execute(
            f"UPDATE trio_agents_prompts SET cancel = coalesce(cancel, %s), "
            f"state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END, "
            f"finished = CASE WHEN state = 'queued' THEN clock_timestamp() "
            f"ELSE finished END "
            f"WHERE id = %s RETURNING {_COLUMNS}",
            (cause, prompt_id),
        ).fetchone()
        if row is None:
            return None
        found = PromptRow(*row)
        if found.state == "cancelled":
            conn.execute("SELECT pg_notify(%s, %s)", (PROMPTS_CHANNEL, prompt_id))
        elif found.state in ("queued", "running"):
            # Only the worker that runs it can apply it (a claim reads the cause from the row).
            channel = QUEUE_CHANNEL if found.worker is None else worker_channel(found.worker)
            conn.execute("SELECT pg_notify(%s, 'cancel:' || %s)", (channel, prompt_id))
    return found


@attrs.frozen
class Claimed:
    """A prompt a worker claimed: ``claim`` is its fence for every later write; ``more``:
    whether another prompt of its session was queued behind it when it was claimed."""

    row: PromptRow
    more: bool = False


def claim(
    conn: Conn, worker: str, limit: int, busy: Sequence[str], *, holder: str
) -> builtins.list[Claimed]:
    """Claim up to ``limit`` prompts for ``worker``: the first unfinished prompt of each
    session whose route is ``worker``'s or free, skipping ``busy`` sessions (running here
    already) and prompts another worker runs now; take their routes.

    ``holder`` is the lease owner id of the worker's session store (whose sessions sit in
    the same database): a prompt whose session's lease another owner holds live is left
    queued: resuming it would only fail until that lease ends (its worker died, or it is held
    outside the queue). :func:`lease_wait` says when the first such lease ends.

    One statement, one round trip, whatever ``limit`` is: the candidates are locked (``SKIP
    LOCKED``), their routes taken where free (a route another worker took meanwhile leaves its
    prompt unclaimed), and those prompts marked running, in submission order.
    """
    rows = conn.execute(
        _CLAIM,
        {"busy": list(busy), "me": worker, "limit": limit, "holder": holder},
    ).fetchall()
    claimed = (Claimed(PromptRow(*raw[:-1]), more=raw[-1]) for raw in rows)
    return sorted(claimed, key=lambda c: c.row.seq)


def lease_wait(conn: Conn, worker: str, holder: str) -> float | None:
    """Seconds until the first session lease of another owner ends (by the database's clock)
    that keeps :func:`claim` (with ``holder``) from a prompt ``worker`` could otherwise claim:
    ``0`` or less when such a lease has ended and the prompt waits for a claim (no
    notification says that a lease ended), ``None`` when no prompt waits for one. Not part of
    the claim: it reads every open prompt, a cost the claim of every prompt would pay; the
    heartbeat asks it."""
    row = conn.execute(
        f"""
        WITH live AS (
            SELECT id FROM trio_agents_workers WHERE expires > clock_timestamp()
        )
        SELECT extract(epoch FROM min(s.expires) - clock_timestamp())::float8
        FROM trio_agents_prompts AS p
        JOIN trio_agents_sessions AS s ON s.id = p.session_id
        WHERE {_OPEN} AND s.owner <> %(holder)s
        """,
        {"busy": [], "me": worker, "holder": holder},
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


#: Whether the prompt ``p`` can be claimed by ``%(me)s``, but for its place in its session
#: and its session's lease.
_OPEN = """p.state IN ('queued', 'running')
              AND NOT (p.session_id = ANY(%(busy)s))
              AND NOT (p.state = 'running' AND p.worker IN (SELECT id FROM live))
              AND NOT EXISTS (
                  SELECT 1 FROM trio_agents_routes AS r
                  WHERE r.session_id = p.session_id AND r.worker <> %(me)s
                    AND r.worker IN (SELECT id FROM live))"""

#: A session lease another owner holds live (``s`` a row of the session store's table).
_LEASED_ELSEWHERE = "s.owner <> %(holder)s AND s.expires > clock_timestamp()"

_CLAIM = f"""
        WITH live AS (
            SELECT id FROM trio_agents_workers WHERE expires > clock_timestamp()
        ), candidates AS (
            SELECT p.id, p.session_id, p.seq FROM trio_agents_prompts AS p
            WHERE {_OPEN}
              AND p.seq = (
                  SELECT min(q.seq) FROM trio_agents_prompts AS q
                  WHERE q.session_id = p.session_id AND q.state IN ('queued', 'running'))
              AND NOT EXISTS (
                  SELECT 1 FROM trio_agents_sessions AS s
                  WHERE s.id = p.session_id AND {_LEASED_ELSEWHERE})
            ORDER BY p.seq
            LIMIT %(limit)s
            FOR UPDATE OF p SKIP LOCKED
        ), routed AS (
            INSERT INTO trio_agents_routes AS r (session_id, worker)
            SELECT session_id, %(me)s FROM candidates
            ON CONFLICT (session_id) DO UPDATE SET worker = %(me)s, since = clock_timestamp()
            WHERE r.worker = %(me)s OR r.worker NOT IN (SELECT id FROM live)
            RETURNING session_id
        )
        UPDATE trio_agents_prompts AS p
        SET state = 'running', worker = %(me)s, claim = p.claim + 1
        FROM candidates AS c
        WHERE p.id = c.id AND c.session_id IN (SELECT session_id FROM routed)
        RETURNING {_PREFIXED}, EXISTS (
            SELECT 1 FROM trio_agents_prompts AS q
            WHERE q.session_id = p.session_id AND q.state = 'queued' AND q.seq > p.seq)
        """


#: What a client needs of a settled prompt, as the JSON object of its notification: the
#: prompt's ``id``, ``session_id``, ``state``, ``worker``, ``answer``, ``error`` and
#: ``cancel``. One that would not fit in a notification (8000 bytes) is sent as ``{"id": ...}``
#: alone, and its clients read the row.
SETTLED = ("id", "session_id", "state", "worker", "answer", "error", "cancel")

#: ``pg_notify`` of a settled prompt's payload, on a row ``p`` with :data:`SETTLED` columns.
_NOTIFY_SETTLED = (
    "pg_notify(%(settled)s, CASE WHEN octet_length(j.payload) < 7900 THEN j.payload "
    "ELSE json_build_object('id', p.id)::text END)::text"
)
_SETTLED_JSON = (
    "(SELECT json_build_object("
    + ", ".join(f"'{name}', p.{name}" for name in SETTLED)
    + ")::text AS payload) AS j"
)


@attrs.frozen
class Settle:
    """A claimed prompt to end: ``state`` ``completed``, ``failed`` or ``cancelled``."""

    prompt_id: str
    claim: int
    state: str
    answer: str | None
    error: str | None


def settle(conn: Conn, worker: str, settles: Sequence[Settle]) -> builtins.set[str]:
    """End claimed prompts if ``worker`` still holds their claims; return the ids it ended.
    Wakes each prompt's clients, with the outcome in the notification. One statement, one
    round trip, however many prompts (a worker settles the prompts that end together at
    once)."""
    rows = conn.execute(_PLAIN, _settle_parameters(worker, settles)).fetchall()
    return {row[0] for row in rows}


_SETTLE = f"""
    WITH p AS (
        UPDATE trio_agents_prompts AS t SET state = s.state, answer = s.answer,
            error = s.error, finished = clock_timestamp()
        FROM unnest(%(ids)s::text[], %(claims)s::integer[], %(states)s::text[],
            %(answers)s::text[], %(errors)s::text[]{{columns}})
            AS s(id, claim, state, answer, error{{names}}){{fence}}
        WHERE t.id = s.id AND t.worker = %(me)s AND t.claim = s.claim
          AND t.state = 'running'{{where}}
        RETURNING {", ".join(f"t.{name}" for name in SETTLED)}
    )
    SELECT p.id, {_NOTIFY_SETTLED} FROM p, LATERAL {_SETTLED_JSON}
    """

#: The settle of :class:`SettleRider`: each prompt's session must still match the session
#: store's fence (``_postgres_sql.Fence``): the batch's owner, epoch and record count.
_FENCED = _SETTLE.format(
    columns=", %(sessions)s::text[], %(epochs)s::bigint[], %(records)s::integer[]",
    names=", session_id, epoch, records",
    fence=" JOIN trio_agents_sessions AS f ON f.id = s.session_id AND f.owner = %(owner)s "
    "AND f.epoch = s.epoch AND f.records = s.records",
    where=" AND t.session_id = s.session_id",
)
_PLAIN = _SETTLE.format(columns="", names="", fence="", where="")


def _settle_parameters(worker: str, settles: Sequence[Settle]) -> dict[str, Any]:
    return {
        "ids": [s.prompt_id for s in settles],
        "claims": [s.claim for s in settles],
        "states": [s.state for s in settles],
        "answers": [s.answer for s in settles],
        "errors": [s.error for s in settles],
        "me": worker,
        "settled": PROMPTS_CHANNEL,
    }


#: ``(session_id, epoch, records)``: the session store's fence (``_postgres_sql.Fence``).
Fence = tuple[str, int, int]


@attrs.frozen
class SettleRider:
    """Settles claimed prompts in the session store's write batch (``PostgresStore.ride``): in
    the transaction that makes their sessions' records durable, one statement for every prompt
    of the batch, each only if ``worker`` still holds its claim (as :func:`settle`) and the
    batch still holds its session at the fence's epoch and record count (as the records)."""

    worker: str

    def __call__(
        self, conn: Conn, owner: str, items: Sequence[tuple[Fence, Settle]]
    ) -> Callable[[], builtins.list[bool]]:
        settles = [settle for _, settle in items]
        parameters = _settle_parameters(self.worker, settles)
        parameters["sessions"] = [fence[0] for fence, _ in items]
        parameters["epochs"] = [fence[1] for fence, _ in items]
        parameters["records"] = [fence[2] for fence, _ in items]
        parameters["owner"] = owner
        # Inside the batch's pipeline: the rows are read once it has synced.
        cursor = conn.execute(_FENCED, parameters)

        def settled() -> builtins.list[bool]:
            ended = {row[0] for row in cursor.fetchall()}
            return [settle.prompt_id in ended for settle in settles]

        return settled


def hand_back(conn: Conn, prompt_id: str, worker: str, claim: int) -> bool:
    """Put a claimed prompt back in the queue (its worker drains); whether it was still
    ``worker``'s. Its route goes with it, so any worker may take it. One statement."""
    row = conn.execute(
        """
        WITH back AS (
            UPDATE trio_agents_prompts SET state = 'queued', worker = NULL
            WHERE id = %(id)s AND worker = %(me)s AND claim = %(claim)s AND state = 'running'
            RETURNING session_id
        ), unrouted AS (
            DELETE FROM trio_agents_routes AS r USING back
            WHERE r.session_id = back.session_id AND r.worker = %(me)s
        )
        SELECT pg_notify(%(channel)s, 'free:' || back.session_id)::text FROM back
        """,
        {"id": prompt_id, "me": worker, "claim": claim, "channel": QUEUE_CHANNEL},
    ).fetchone()
    return row is not None
