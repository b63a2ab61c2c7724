"""Settling claimed prompts: the prompts that end together end in one statement, each only
under its own claim, on a real throwaway PostgreSQL server."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from tests.helpers.pg_trace import read_traces, trace_connections
from trio_agents.workers._sql import (
    PROMPTS_CHANNEL,
    Settle,
    claim,
    prepare_queue,
    register_worker,
    settle,
    submit,
)


def test_one_settle_ends_every_prompt_still_claimed_in_one_round_trip(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Three claimed prompts settled at once: one round trip ends the two whose claim is
    still the worker's, notifies each one's outcome, and leaves the stale claim running."""
    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        prepare_queue(setup)
        register_worker(setup, "w", 30)
        for s in "abc":
            submit(setup, f"p-{s}", s, f"to {s}", None, "retry", 1)
        claims = {c.row.id: c.row.claim for c in claim(setup, "w", 10, [])}
        setup.execute(f"LISTEN {PROMPTS_CHANNEL}")
        trace_connections(tmp_path)
        try:
            conn = psycopg.connect(pg_dsn, autocommit=True)
        finally:
            trace_connections(None)
        with conn:
            settled = settle(
                conn,
                "w",
                [
                    Settle("p-a", claims["p-a"], "completed", "A", None),
                    Settle("p-b", claims["p-b"], "failed", None, "no"),
                    Settle("p-c", claims["p-c"] + 1, "completed", "C", None),
                ],
            )
        assert settled == {"p-a", "p-b"}
        rows = setup.execute("SELECT id, state, answer, error FROM trio_agents_prompts ORDER BY id")
        assert rows.fetchall() == [
            ("p-a", "completed", "A", None),
            ("p-b", "failed", None, "no"),
            ("p-c", "running", None, None),
        ]
        notified = [json.loads(n.payload) for n in setup.notifies(timeout=0)]
        assert sorted((n["id"], n["state"]) for n in notified) == [
            ("p-a", "completed"),
            ("p-b", "failed"),
        ]
    trips = [t for t in read_traces(tmp_path) if not t.statement.startswith("SELECT set_config")]
    assert len(trips) == 1
