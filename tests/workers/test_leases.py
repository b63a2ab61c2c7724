"""A claim and the session store's leases: a prompt whose session another owner holds live
stays queued until that lease ends, and the worker claims it then, on a real throwaway
PostgreSQL server."""

from __future__ import annotations

import logging

import psycopg
import pytest
import trio

from tests.helpers.workers_support import DEADLINE, query, serving
from trio_agents.session._postgres_sql import prepare_schema, take_lease
from trio_agents.workers import AgentTemplate, open_remote
from trio_agents.workers._sql import claim, lease_wait, prepare_queue, register_worker, submit


def test_a_prompt_whose_session_is_leased_elsewhere_is_claimed_once_the_lease_ends(
    pg_dsn: str,
) -> None:
    """A session leased live by another store: the claim leaves its prompt queued (not one
    leased by the worker's own store), lease_wait says when that lease ends; once it ended
    (by the database's clock), lease_wait says so and the claim takes it."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        prepare_schema(conn)
        prepare_queue(conn)
        register_worker(conn, "w", 30)
        take_lease(conn, "s", "dead-store", 600, new=True, records=0)
        take_lease(conn, "u", "my-store", 600, new=True, records=0)
        submit(conn, "p-s", "s", "leased", None, "retry", 1)
        submit(conn, "p-t", "t", "free", None, "retry", 1)
        submit(conn, "p-u", "u", "mine", None, "retry", 1)
        first = claim(conn, "w", 10, [], holder="my-store")
        assert [c.row.id for c in first] == ["p-t", "p-u"]
        assert lease_wait(conn, "w", "my-store") == pytest.approx(600, abs=30)
        [(state,)] = conn.execute("SELECT state FROM trio_agents_prompts WHERE id = 'p-s'")
        assert state == "queued"
        conn.execute("UPDATE trio_agents_sessions SET expires = clock_timestamp() WHERE id = 's'")
        assert lease_wait(conn, "w", "my-store") <= 0  # type: ignore[operator]
        second = claim(conn, "w", 10, ["t", "u"], holder="my-store")
        assert [(c.row.id, c.row.claim) for c in second] == [("p-s", 1)]
        assert lease_wait(conn, "w", "my-store") is None


async def test_a_worker_claims_a_prompt_when_the_session_lease_it_waits_for_ends(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """With the fallback poll an hour long, a prompt to a session another owner leases for
    one more second is answered once that lease ends (the claim said when), and nothing is
    logged as an error meanwhile."""
    with trio.fail_after(DEADLINE):
        async with open_remote(pg_dsn, poll_interval=3600) as remote:
            async with serving(pg_dsn, model="echo"):
                first = await remote.submit("s", "one", agent=AgentTemplate())
                assert await first.answer() == "one"
            query(
                pg_dsn,
                "UPDATE trio_agents_sessions SET owner = 'dead-store', epoch = epoch + 1, "
                "expires = clock_timestamp() + interval '1 second' WHERE id = 's'",
            )
            with caplog.at_level(logging.INFO, logger="trio_agents"):
                async with serving(pg_dsn, model="echo", poll_interval=3600):
                    second = await remote.submit("s", "two")
                    assert await second.answer() == "two"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
