"""Round trips of the work queue, counted exactly from libpq's protocol trace: each step of a
prompt is one, on a real throwaway PostgreSQL server with a real ``trio-agents worker``."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trio

from tests.helpers.paths import ROOT
from tests.helpers.pg_trace import Trip, read_traces, trace_connections
from tests.helpers.pg_workers import Worker, workers
from tests.helpers.workers_support import DEADLINE, serving, turn_started
from trio_agents.session._postgres_sql import WriteJob, prepare_schema, take_lease, write_batch
from trio_agents.workers import AgentTemplate, open_remote
from trio_agents.workers._sql import RECORDS_CHANNEL

#: Runs ``trio-agents ARGV`` with every PostgreSQL connection traced into a directory.
TRACED = (
    "import sys; sys.path.insert(0, sys.argv[1]); from tests.helpers import pg_trace; "
    "import pathlib; pg_trace.trace_connections(pathlib.Path(sys.argv[2])); "
    "from trio_agents.cli import main; sys.exit(main(sys.argv[3:]))"
)


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Path]:
    """A directory for this process's traces; tracing stops after the test."""
    trace_connections(tmp_path / "here")
    yield tmp_path
    trace_connections(None)


def trips(directory: Path, start: float, end: float) -> list[Trip]:
    return [trip for trip in read_traces(directory) if start <= trip.at <= end]


def test_a_write_batch_is_one_round_trip_and_writes_all_or_nothing(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A batch of two sessions' records is one round trip (one implicit transaction) that
    notifies both sessions; a batch whose second job fails writes nothing of the first."""
    with psycopg.connect(pg_dsn, autocommit=True) as setup:
        prepare_schema(setup)
        epochs = {s: take_lease(setup, s, "me", 10, new=True, records=0) for s in "ab"}
        setup.execute("LISTEN written")
        trace_connections(tmp_path)  # the batches' connection only
        try:
            conn = psycopg.connect(pg_dsn, autocommit=True)
        finally:
            trace_connections(None)
        with conn:
            jobs = [WriteJob(s, epochs[s], 0, ('{"n": 0}',), None, None) for s in "ab"]
            assert write_batch(conn, "me", 10, jobs, notify="written") == ["written"] * 2
            failing = [
                WriteJob("a", epochs["a"], 1, ('{"n": 1}',), None, None),
                WriteJob("b", epochs["b"], 1, (None,), None, None),  # type: ignore[arg-type]
            ]
            with pytest.raises(psycopg.errors.NotNullViolation):
                write_batch(conn, "me", 10, failing, notify="written")
        stored = setup.execute("SELECT id, records FROM trio_agents_sessions ORDER BY id")
        assert stored.fetchall() == [("a", 1), ("b", 1)]
        assert sorted(n.payload for n in setup.notifies(timeout=0)) == ["a", "b"]
    every = [t for t in read_traces(tmp_path) if not t.statement.startswith("SELECT set_config")]
    assert len(every) == 2  # the batch that wrote, the batch that failed: one trip each
    assert all("INSERT INTO trio_agents_records" in t.statement for t in every)


def step(statement: str) -> str:
    """What a round trip of the worker does, by its SQL."""
    writes = "INSERT INTO trio_agents_records" in statement
    settles = "WITH p AS" in statement
    if writes:
        return "write and settle" if settles else "write"
    return "claim" if "WITH live AS" in statement else "settle" if settles else statement


async def traced_worker(dsn: str, directory: Path, *options: str) -> Worker:
    """A ``trio-agents worker`` whose connections are traced into ``directory``, serving."""
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            "-c",
            TRACED,
            str(ROOT),
            str(directory),
            "worker",
            "--store",
            dsn,
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    worker = Worker(process)
    await worker.until("trio-agents: worker")
    return worker


async def test_a_prompt_costs_one_round_trip_per_step_and_one_for_its_client(
    pg_dsn: str, traced: Path
) -> None:
    """Three prompts in turn to a held session: the worker claims each once, and settles each
    in the write batch that makes its turn's end durable (one round trip for both, nothing
    else); the client's only round trip is the submit, the answer comes in the settle's
    notification."""
    with trio.fail_after(DEADLINE):
        async with workers() as started:
            worker = await traced_worker(pg_dsn, traced / "worker", "--lease", "30")
            started.append(worker)
            async with open_remote(pg_dsn, poll_interval=3600) as remote:
                assert await remote.ask("s", "first", agent=AgentTemplate()) == "first"
                start = time.time()
                for k in range(3):
                    assert await remote.ask("s", f"prompt {k}") == f"prompt {k}"
                end = time.time()
            worker.process.send_signal(signal.SIGTERM)  # drained, it exits: traces complete
            assert await worker.process.wait() == 0
    # What the client waits on: its own round trips and the prompts' notifications.
    client = [t for t in trips(traced / "here", start, end) if t.statement != RECORDS_CHANNEL]
    assert [("WITH added AS" in t.statement, t.notification) for t in client] == [
        (True, False),
        (False, True),
    ] * 3
    steps = [step(t.statement) for t in trips(traced / "worker", start, end) if not t.notification]
    assert steps == ["claim", "write and settle"] * 3, steps


async def test_a_prompt_queued_behind_a_running_one_runs_when_it_ends_not_at_the_poll(
    pg_dsn: str,
) -> None:
    """With the fallback poll an hour long, a prompt submitted to a session while its previous
    prompt runs is claimed as soon as that run ends (the claim its notice woke skipped it)."""
    with trio.fail_after(DEADLINE):
        async with (
            serving(pg_dsn, model="echo?delay=0.5", poll_interval=3600),
            open_remote(pg_dsn, poll_interval=3600) as remote,
        ):
            first = await remote.submit("s", "one", agent=AgentTemplate())
            await turn_started(first)
            second = await remote.submit("s", "two")
            assert await second.answer() == "two"
            assert await first.answer() == "one"
