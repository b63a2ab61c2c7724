"""Helpers of the work queue tests: a worker served in the test's own trio run, the prompt
table read raw, and the invariants checked from the durable records alone.

Imported as ``from tests.helpers.workers_support import ...``.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any

import attrs
import psycopg
import trio

from trio_agents.kernel import open_root
from trio_agents.session import (
    PostgresStore,
    Record,
    SessionNotFoundError,
    StopReason,
    TurnEnded,
    TurnStarted,
)
from trio_agents.workers import PromptClaimed, RemotePrompt, Worker, serve_worker
from trio_agents.workers._ledger import Ledger

#: How long a test waits for the queue to do something before it fails.
DEADLINE = 60.0


@asynccontextmanager
async def serving(dsn: str, **options: Any) -> AsyncIterator[Worker]:
    """A worker of the queue in ``dsn`` served in this trio run, cancelled after the block
    (unless it drained)."""
    async with trio.open_nursery() as nursery:
        worker: Worker = await nursery.start(functools.partial(serve_worker, dsn, **options))
        yield worker
        nursery.cancel_scope.cancel()


async def until(condition: Callable[[], bool]) -> None:
    """Poll ``condition()``, the state of a real database or process (nothing announces it);
    the caller's ``fail_after`` bounds the wait."""
    while True:
        if condition():
            return
        await trio.sleep(0.02)


async def turn_started(prompt: RemotePrompt) -> None:
    """Wait until the prompt's turn has started (its ``TurnStarted`` is durable)."""
    async with aclosing(prompt.records()) as records:
        async for record in records:
            if isinstance(record, TurnStarted):
                return
    raise AssertionError(f"prompt {prompt.id} settled before its turn started")


def prompt_rows(dsn: str) -> list[dict[str, Any]]:
    """Every prompt row, in submission order."""
    with psycopg.connect(dsn) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute("SELECT * FROM trio_agents_prompts ORDER BY seq").fetchall()


def query(dsn: str, statement: str, *args: object) -> list[tuple[Any, ...]]:
    """The rows of one statement (a test's look at the database)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, args)
        return cur.fetchall() if cur.description is not None else []


async def stored_records(dsn: str, session_ids: list[str]) -> dict[str, tuple[Record, ...]]:
    """The durable records of each session, read with a store of its own (no repair of an
    open turn is kept: the copy's appended ``TurnEnded(interrupted)`` is dropped)."""
    found: dict[str, tuple[Record, ...]] = {}
    async with open_root() as root:
        store = PostgresStore(dsn)
        await root.plugin(store)
        for session_id in session_ids:
            try:
                session = await store.load(session_id)
            except SessionNotFoundError:
                continue
            records = list(session.records)
            await store.abandon(session)
            # The repair of a load closes an open turn in the copy: not a durable record.
            while (
                records
                and isinstance(records[-1], TurnEnded)
                and (records[-1].stop_reason is StopReason.INTERRUPTED)
            ):
                records.pop()
            found[session_id] = tuple(records)
    return found


@attrs.frozen
class Verdict:
    """What the durable records say of a whole run."""

    completed: int
    failed: int
    cancelled: int
    problems: list[str]


def check_exactly_once(
    rows: list[dict[str, Any]], records: dict[str, tuple[Record, ...]]
) -> Verdict:
    """From the prompt rows and the sessions' records alone: every settled prompt has exactly
    one completed turn (``completed``) or its recorded failure (``failed``), none has two;
    no session has overlapping turns; each session's completed prompts ran in submission
    order; each answer is the echo of its prompt."""
    problems: list[str] = []
    counts = {"completed": 0, "failed": 0, "cancelled": 0}
    by_session: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_session.setdefault(row["session_id"], []).append(row)
    for session_id, prompts in by_session.items():
        ledger = Ledger()
        ledger.feed(records.get(session_id, ()))
        if ledger.overlapping:
            problems.append(f"session {session_id}: overlapping turns")
        order = []
        for row in prompts:
            attempts = ledger.attempts.get(row["id"], [])
            done = [
                a
                for a in attempts
                if a.ended is not None and a.ended.stop_reason is StopReason.COMPLETED
            ]
            state = row["state"]
            if state in counts:
                counts[state] += 1
            if len(done) > 1:
                problems.append(f"prompt {row['id']}: {len(done)} completed turns")
            if state == "completed":
                if len(done) != 1:
                    problems.append(f"prompt {row['id']}: completed with {len(done)} turns")
                elif done[0].answer != row["content"] or row["answer"] != row["content"]:
                    problems.append(f"prompt {row['id']}: answer {row['answer']!r}")
                else:
                    assert done[0].turn_id is not None
                    order.append(ledger.turns.index(done[0].turn_id))
            elif state == "failed":
                if done or row["id"] not in ledger.failed:
                    problems.append(
                        f"prompt {row['id']}: failed without a recorded failure ({row['error']})"
                    )
            elif state != "cancelled":
                problems.append(f"prompt {row['id']}: left {state}")
        if order != sorted(order):
            problems.append(f"session {session_id}: prompts ran out of order")
    return Verdict(counts["completed"], counts["failed"], counts["cancelled"], problems)


def claimed_attempts(records: tuple[Record, ...], prompt_id: str) -> list[PromptClaimed]:
    """The ``PromptClaimed`` records of one prompt."""
    return [r for r in records if isinstance(r, PromptClaimed) and r.prompt_id == prompt_id]
