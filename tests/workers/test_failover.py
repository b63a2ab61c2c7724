"""Failover across real processes: a ``trio-agents worker`` command SIGKILLed while it holds
a session with queued prompts; the other worker serves them once the dead worker's session
lease ends, and says nothing of an error meanwhile (the queue works as designed)."""

from __future__ import annotations

import re

import trio

from tests.helpers.pg_workers import Worker, workers
from tests.helpers.workers_support import DEADLINE, prompt_rows, query, turn_started
from trio_agents.workers import AgentTemplate, open_remote

SERVING = re.compile(r"^trio-agents: worker (\S+) serving$")


async def start(dsn: str, started: list[Worker], model: str) -> Worker:
    """A worker command (lease 1 s) on ``model``, once it serves."""
    worker = await Worker.command(dsn, "--lease", "1", "--model", model)
    started.append(worker)
    assert SERVING.match(await worker.line())
    return worker


async def test_a_worker_serves_a_killed_worker_s_session_after_its_lease_without_errors(
    pg_dsn: str,
) -> None:
    """SIGKILL the worker that holds session s (one prompt running, two queued) while the
    session's lease outlives its worker's row by 3 s (its last renewal came after its last
    heartbeat): the other worker answers all three, and its output has no error line."""
    with trio.fail_after(DEADLINE):
        async with workers() as started, open_remote(pg_dsn) as remote:
            slow = await start(pg_dsn, started, "echo?delay=3600")
            first = await remote.submit("s", "one", agent=AgentTemplate())
            await turn_started(first)
            queued = [await remote.submit("s", text) for text in ("two", "three")]
            fast = await start(pg_dsn, started, "echo")
            slow.process.kill()
            await slow.process.wait()
            query(
                pg_dsn,
                "UPDATE trio_agents_sessions SET expires = clock_timestamp() "
                "+ interval '3 seconds' WHERE id = 's'",
            )
            answers = [await prompt.answer() for prompt in (first, *queued)]
            fast.process.terminate()
            lines: list[str] = []
            try:
                while True:
                    lines.append(await fast.line())
            except EOFError:
                pass
            assert await fast.process.wait() == 0
    assert answers == ["one", "two", "three"]
    assert [line for line in lines if re.search(r"error", line, re.IGNORECASE)] == []
    assert [row["state"] for row in prompt_rows(pg_dsn)] == ["completed"] * 3
