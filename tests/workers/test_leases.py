"""A claim and the session store's leases: a prompt whose session another owner holds live
stays queued until that lease ends, and the worker claims it then, on a real throwaway
PostgreSQL server."""

from __future__ import annotations

import psycopg
import pytest

from trio_agents.session._postgres_sql import prepare_schema, take_lease
from trio_agents.workers._sql import claim_leased, prepare_queue, register_worker, submit


def test_a_prompt_whose_session_is_leased_elsewhere_is_claimed_once_the_lease_ends(
    pg_dsn: str,
) -> None:
    """A session leased live by another store: the claim leaves its prompt queued and says
    when the lease ends; once it ended (by the database's clock), the claim takes it."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        prepare_schema(conn)
        prepare_queue(conn)
        register_worker(conn, "w", 30)
        take_lease(conn, "s", "dead-store", 600, new=True, records=0)
        submit(conn, "p-s", "s", "leased", None, "retry", 1)
        submit(conn, "p-t", "t", "free", None, "retry", 1)
        first = claim_leased(conn, "w", 10, [], holder="my-store")
        assert [c.row.id for c in first.claimed] == ["p-t"]
        assert first.blocked_for == pytest.approx(600, abs=30)
        [(state,)] = conn.execute("SELECT state FROM trio_agents_prompts WHERE id = 'p-s'")
        assert state == "queued"
        conn.execute(
            "UPDATE trio_agents_sessions SET expires = clock_timestamp() WHERE id = 's'"
        )
        second = claim_leased(conn, "w", 10, ["t"], holder="my-store")
        assert [(c.row.id, c.row.claim) for c in second.claimed] == [("p-s", 1)]
        assert second.blocked_for is None


def test_a_prompt_whose_session_this_worker_s_store_holds_is_claimed(pg_dsn: str) -> None:
    """The worker's own store's live lease does not hold its prompt back."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        prepare_schema(conn)
        prepare_queue(conn)
        register_worker(conn, "w", 30)
        take_lease(conn, "s", "my-store", 600, new=True, records=0)
        submit(conn, "p-s", "s", "mine", None, "retry", 1)
        claims = claim_leased(conn, "w", 10, [], holder="my-store")
        assert ([c.row.id for c in claims.claimed], claims.blocked_for) == (["p-s"], None)
