"""Who a queue notification wakes: a submit to a routed session and a cancel of a running
prompt reach only the worker that can act on them, on a real throwaway PostgreSQL server."""

from __future__ import annotations

import psycopg
import trio

from tests.helpers.workers_support import DEADLINE, serving, turn_started
from trio_agents.session._postgres_sql import prepare_schema
from trio_agents.workers import AgentTemplate, open_remote
from trio_agents.workers._sql import (
    QUEUE_CHANNEL,
    claim,
    prepare_queue,
    register_worker,
    request_cancel,
    submit,
    worker_channel,
)


def heard(conn: psycopg.Connection[tuple[object, ...]]) -> list[tuple[str, str]]:
    """The notifications ``conn`` received so far, as (channel, payload)."""
    return [(n.channel, n.payload) for n in conn.notifies(timeout=0.5, stop_after=10)]


def test_a_submit_to_a_routed_session_notifies_only_its_owner(pg_dsn: str) -> None:
    """A submit to a session a live worker routes is heard on that worker's channel only; a
    submit to a session no one routes is heard by every worker."""
    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        prepare_schema(setup)
        prepare_queue(setup)
        for worker in ("w1", "w2"):
            register_worker(setup, worker, 30)
        submit(setup, "p1", "s", "first", None, "retry", 1)
        [claimed] = claim(setup, "w1", 1, [], holder="me")  # w1 routes s now
        with psycopg.connect(pg_dsn, autocommit=True) as listener:
            for channel in (QUEUE_CHANNEL, worker_channel("w1"), worker_channel("w2")):
                listener.execute(f'LISTEN "{channel}"')
            submit(setup, "p2", "s", "second", None, "retry", 1)
            submit(setup, "p3", "t", "elsewhere", None, "retry", 1)
            assert heard(listener) == [
                (worker_channel("w1"), "submit:s w1"),
                (QUEUE_CHANNEL, "submit:t "),
            ]
            request_cancel(setup, claimed.row.id, '{"type": "user_cancel"}')
            assert heard(listener) == [(worker_channel("w1"), f"cancel:{claimed.row.id}")]


async def test_a_worker_hears_a_submit_to_its_session_on_its_own_channel(pg_dsn: str) -> None:
    """With the fallback poll an hour long, a prompt queued behind a running one on the same
    session is claimed when the run ends: its worker heard the submit on its own channel."""
    with trio.fail_after(DEADLINE):
        async with (
            serving(pg_dsn, model="echo?delay=0.5", poll_interval=3600) as worker,
            open_remote(pg_dsn, poll_interval=3600) as remote,
        ):
            assert worker.listener is not None
            assert worker_channel(worker.id) in worker.listener.channels
            first = await remote.submit("s", "one", agent=AgentTemplate())
            await turn_started(first)
            second = await remote.submit("s", "two")
            assert await second.answer() == "two"
            assert await first.answer() == "one"
