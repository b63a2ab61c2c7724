"""Settling claimed prompts: the prompts that end together end in one statement, each only
under its own claim (and, riding in a write batch, only under the session's lease), on a real
throwaway PostgreSQL server."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from tests.helpers.pg_trace import read_traces, trace_connections
from trio_agents.session._postgres_sql import (
    Riding,
    WriteJob,
    prepare_schema,
    take_lease,
    write_batch,
)
from trio_agents.workers._sql import (
    PROMPTS_CHANNEL,
    Settle,
    SettleRider,
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
        prepare_schema(setup)
        prepare_queue(setup)
        register_worker(setup, "w", 30)
        for s in "abc":
            submit(setup, f"p-{s}", s, f"to {s}", None, "retry", 1)
        claims = {c.row.id: c.row.claim for c in claim(setup, "w", 10, [], holder="me")}
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


def test_a_settle_riding_in_a_write_batch_ends_only_prompts_whose_session_it_still_holds(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A settle riding in a write batch of two sessions is one round trip with the records:
    it ends the prompt of the session the batch wrote and leaves running the prompt of the
    session whose lease was taken over (its records refused, its settle fenced the same way)."""
    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        prepare_schema(setup)
        prepare_queue(setup)
        register_worker(setup, "w", 30)
        epochs = {s: take_lease(setup, s, "me", 10, new=True, records=0) for s in "ab"}
        for s in "ab":
            submit(setup, f"p-{s}", s, f"to {s}", None, "retry", 1)
        claims = {c.row.id: c.row.claim for c in claim(setup, "w", 10, [], holder="me")}
        # Another store takes session b over: its epoch moves on.
        setup.execute(
            "UPDATE trio_agents_sessions SET owner = 'other', epoch = epoch + 1 WHERE id = 'b'"
        )
        trace_connections(tmp_path)
        try:
            conn = psycopg.connect(pg_dsn, autocommit=True)
        finally:
            trace_connections(None)
        riding = Riding(SettleRider("w"))
        for s in "ab":
            fence = (s, epochs[s], 1)
            riding.items.append((fence, Settle(f"p-{s}", claims[f"p-{s}"], "completed", s, None)))
        jobs = [WriteJob(s, epochs[s], 0, ('{"n": 0}',), None, None) for s in "ab"]
        with conn:
            assert write_batch(conn, "me", 10, jobs, riders=[riding]) == ["written", "lost"]
        assert riding.results == [True, False]
        rows = setup.execute("SELECT id, state, answer FROM trio_agents_prompts ORDER BY id")
        assert rows.fetchall() == [("p-a", "completed", "a"), ("p-b", "running", None)]
    trips = [t for t in read_traces(tmp_path) if not t.statement.startswith("SELECT set_config")]
    assert len(trips) == 1
