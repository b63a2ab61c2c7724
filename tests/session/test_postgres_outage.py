"""A PostgreSQL outage (the server stopped mid-run): the command says it in one line per
distinct failure, once, without psycopg's own noise; an embedded program with default logging
gets one traceback per distinct failure, not one per retry (issue 34, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.helpers.paths import HELPERS
from tests.helpers.pg_server import PgServer, find_bindir, start_server
from tests.helpers.support import TRIO_AGENTS

WORKER = HELPERS / "pg_outage_worker.py"
# Safety net only: every wait below ends on an event (a line on a pipe, a process exit).
LIMIT = 120


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of the test's own, which the test stops (not the run's shared one)."""
    if find_bindir() is None:
        pytest.skip("the PostgreSQL outage tests need a PostgreSQL server")
    server = start_server(fsync=False)
    try:
        yield server
    finally:
        server.stop()


def test_an_outage_mid_run_is_one_line_per_failure_once(own_server: PgServer) -> None:
    """``trio-agents run`` on PostgreSQL, the server stopped while the answer streams: status
    1, every stderr line a whole ``trio-agents:`` line, none repeated, no psycopg
    ``error ignored terminating <psycopg.Pipeline [BAD]>``."""
    words = " ".join(f"w{i}" for i in range(12))
    process = subprocess.Popen(
        [
            str(TRIO_AGENTS),
            "run",
            "--store",
            own_server.dsn,
            "--session",
            "o1",
            "--model",
            "echo?delay=0.5",
            words,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert process.stdout is not None
    assert process.stdout.read(2) == "w0"  # the session is live on the server
    own_server.stop()
    _, err = process.communicate(timeout=LIMIT)
    assert process.returncode == 1, err
    lines = err.splitlines()
    assert "Pipeline" not in err
    assert lines, err
    assert all(line.startswith("trio-agents: ") for line in lines), err
    assert len(set(lines)) == len(lines), err
    reasons = [line.partition("SessionWriteError: ")[2] for line in lines if "Error: " in line]
    assert len(set(reasons)) == len(reasons), err


def test_an_embedded_program_logs_a_repeated_failure_once(own_server: PgServer) -> None:
    """Twenty flushes into a stopped server, Python's default logging: each raises, and the
    log holds one traceback per distinct failure (two at most: the dropped connection, then
    the refused ones), not one per retry."""
    process = subprocess.Popen(
        [sys.executable, str(WORKER), own_server.dsn, "20"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    assert process.stdout.readline() == "ready\n"
    own_server.stop()
    out, err = process.communicate("go\n", timeout=LIMIT)
    assert process.returncode == 0, err
    assert out == "failed 20\n", err
    assert "Pipeline" not in err
    assert 1 <= err.count("Traceback (most recent call last)") <= 2 * 2, err
