"""Rides on the PostgreSQL backend's write batches (``PostgresStore.flush_riding``) and the
caller's cancellation, on a real server: whichever checkpoint the cancel hits, the ride's
statement is sent once, never left behind for a later batch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import psycopg
import trio
import trio.testing

from tests.helpers.checkpoints import cancelled_at_step
from trio_agents.kernel import open_root
from trio_agents.session import PostgresStore, Ride, Session, UserMessage


def _insert(
    conn: psycopg.Connection[Any], owner: str, items: Sequence[tuple[object, str]]
) -> Callable[[], list[bool]]:
    """A rider: one row in ``rode`` per item (so a test counts what was sent)."""
    conn.execute("INSERT INTO rode (item) SELECT unnest(%s::text[])", ([i for _, i in items],))
    return lambda: [True] * len(items)


def _rows(dsn: str, statement: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description is not None else []


def _message(text: str) -> UserMessage:
    return UserMessage(message_id=f"m-{text}", content=text, turn_id="t0")


async def _batch_in_flight(
    dsn: str, store: PostgresStore, other: Session, nursery: trio.Nursery
) -> Callable[[], Awaitable[None]]:
    """Start a write batch of ``other`` that waits on its session row, locked here, so a
    flush asks for the batch after it; return what unlocks the row."""

    def lock() -> psycopg.Connection[Any]:
        conn = psycopg.connect(dsn)
        conn.execute("SELECT 1 FROM trio_agents_sessions WHERE id = %s FOR UPDATE", (other.id,))
        return conn

    locker = await trio.to_thread.run_sync(lock)
    other.append(_message("other"))
    nursery.start_soon(store.flush, other)
    await trio.testing.wait_all_tasks_blocked()

    def unlock() -> None:
        with locker:
            locker.commit()

    async def unlocked() -> None:
        await trio.to_thread.run_sync(unlock)

    return unlocked


async def test_a_cancelled_flush_riding_never_leaves_its_ride_for_a_later_batch(
    pg_dsn: str,
) -> None:
    """Behind a batch in flight, cancel the caller of flush_riding at step k, for every k;
    as it gives up it learns from the ride whether a batch took it and, if not, later
    flushes again with a new ride: each item is written exactly once."""
    _rows(pg_dsn, "CREATE TABLE rode (item text NOT NULL)")
    async with open_root() as root:
        store = PostgresStore(pg_dsn, flush_interval=0.01)
        await root.plugin(store)
        session, other = store.prepare("s"), store.prepare("t")
        for each in (session, other):
            await store.enter(each)
            await store.flush(each)
        for k in range(1, 300):
            item = f"k{k}"
            ride: Ride[str, bool] = Ride(_insert, partial(str, item))
            async with trio.open_nursery() as nursery:
                unlock = await _batch_in_flight(pg_dsn, store, other, nursery)
                nursery.start_soon(unlock)
                _, cancelled, fired = await cancelled_at_step(
                    k, partial(store.flush_riding, session, ride)
                )
                taken = ride.sent is not None  # what the caller knows as it gives up
            if cancelled and taken:
                with trio.fail_after(10):  # fails, not hangs, if the ride is never ended
                    await ride.done.wait()  # in flight when the caller gave up: its outcome
            elif cancelled:
                await store.flush_riding(session, Ride(_insert, partial(str, item)))
            session.append(_message(item))
            await store.flush(session)  # a ride left behind would go in this batch
            if not fired:
                break
        else:
            raise AssertionError("flush_riding never returned before step k")
        assert k > 3  # the cancel hit real checkpoints
    rows = _rows(pg_dsn, "SELECT item, count(*) FROM rode GROUP BY item")
    assert dict(rows) == {f"k{i}": 1 for i in range(1, k + 1)}
