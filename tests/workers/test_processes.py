"""The work queue across real processes: ``trio-agents worker`` commands killed, drained
and replaced on a real throwaway PostgreSQL server; the records say what happened."""

from __future__ import annotations

import re
import signal
import subprocess

import pytest
import trio

from tests.helpers.pg_workers import Worker, workers
from tests.helpers.support import TRIO_AGENTS
from tests.helpers.workers_support import (
    DEADLINE,
    claimed_attempts,
    prompt_rows,
    stored_records,
    turn_started,
)
from trio_agents.session import StopReason, TurnEnded
from trio_agents.workers import (
    AgentTemplate,
    PromptFailed,
    PromptFailedError,
    TurnInterrupted,
    WorkerDrained,
    WorkerLost,
    open_remote,
)

NEW = AgentTemplate()
SERVING = re.compile(r"^trio-agents: worker (\S+) serving$")


async def start(dsn: str, started: list[Worker], *options: str) -> tuple[Worker, str]:
    """A worker command (lease 1 s), once it serves; and its id."""
    worker = await Worker.command(dsn, "--lease", "1", *options)
    started.append(worker)
    found = SERVING.match(await worker.line())
    assert found is not None
    return worker, found[1]


async def test_a_sigkilled_worker_s_prompt_is_run_again_by_the_next_owner(pg_dsn: str) -> None:
    """SIGKILL the worker mid-turn: the next worker closes the turn as interrupted with
    WorkerLost(the dead worker), runs the prompt again (policy retry) and answers it."""
    with trio.fail_after(DEADLINE):
        async with workers() as started, open_remote(pg_dsn) as remote:
            slow, slow_id = await start(pg_dsn, started, "--model", "echo?delay=3600")
            prompt = await remote.submit("s", "survives", agent=NEW)
            await turn_started(prompt)
            slow.process.kill()
            await slow.process.wait()
            await start(pg_dsn, started, "--model", "echo")
            assert await prompt.answer() == "survives"
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    assert [a.attempt for a in claimed_attempts(records, prompt.id)] == [1, 2]
    first, second = [r for r in records if isinstance(r, TurnEnded)]
    assert first.stop_reason is StopReason.INTERRUPTED
    [why] = [r for r in records if isinstance(r, TurnInterrupted)]
    assert (why.turn_id, why.cause) == (first.turn_id, WorkerLost(worker=slow_id))
    assert second.stop_reason is StopReason.COMPLETED
    [row] = prompt_rows(pg_dsn)
    assert (row["state"], row["claim"]) == ("completed", 2)


async def test_a_worker_stopped_past_its_lease_writes_nothing_more_of_its_prompt(
    pg_dsn: str,
) -> None:
    """SIGSTOP the worker mid-turn past its lease: another worker takes the session and the
    prompt over and answers it; SIGCONT: the stopped worker's writes are refused (its turn's
    end is not stored, its claim is not its own), and it drains cleanly."""
    with trio.fail_after(DEADLINE):
        async with workers() as started, open_remote(pg_dsn) as remote:
            slow, slow_id = await start(pg_dsn, started, "--model", "echo?delay=3600")
            prompt = await remote.submit("s", "taken over", agent=NEW)
            await turn_started(prompt)
            slow.process.send_signal(signal.SIGSTOP)
            _, fast_id = await start(pg_dsn, started, "--model", "echo")
            assert await prompt.answer() == "taken over"
            slow.process.send_signal(signal.SIGCONT)
            slow.process.send_signal(signal.SIGTERM)
            seen: list[str] = []
            try:
                while not seen or seen[-1] != f"trio-agents: worker {slow_id} drained":
                    seen.append(await slow.line())
            except EOFError:
                raise AssertionError("\n".join(seen)) from None
            assert await slow.process.wait() == 0
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    assert [c.worker for c in claimed_attempts(records, prompt.id)] == [slow_id, fast_id]
    ended = [r for r in records if isinstance(r, TurnEnded)]
    assert [e.stop_reason for e in ended] == [StopReason.INTERRUPTED, StopReason.COMPLETED]
    [row] = prompt_rows(pg_dsn)
    assert (row["state"], row["worker"], row["claim"]) == ("completed", fast_id, 2)


@pytest.mark.parametrize(("policy", "retries"), [("fail", 1), ("retry", 0)])
async def test_a_sigkilled_worker_s_prompt_is_reported_failed_per_its_policy(
    pg_dsn: str, policy: str, retries: int
) -> None:
    """With policy ``fail`` (or ``retry`` and no retries left) the next owner records the
    failure with WorkerLost and the client's answer raises; the prompt never runs twice."""
    with trio.fail_after(DEADLINE):
        async with workers() as started, open_remote(pg_dsn) as remote:
            slow, slow_id = await start(pg_dsn, started, "--model", "echo?delay=3600")
            prompt = await remote.submit(
                "s",
                "lost",
                agent=NEW,
                policy=policy,  # type: ignore[arg-type]
                retries=retries,
            )
            await turn_started(prompt)
            slow.process.kill()
            await slow.process.wait()
            await start(pg_dsn, started, "--model", "echo")
            with pytest.raises(
                PromptFailedError,
                match=rf"^prompt {prompt.id} of session 's' failed: its worker was lost "
                rf"mid-turn \(WorkerLost\(worker='{re.escape(slow_id)}'\)\) once, and its policy",
            ):
                await prompt.answer()
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    assert len(claimed_attempts(records, prompt.id)) == 1
    [failed] = [r for r in records if isinstance(r, PromptFailed)]
    assert failed.cause == WorkerLost(worker=slow_id)


async def test_sigterm_drains_the_worker_command_which_exits_0(pg_dsn: str) -> None:
    """SIGTERM: the worker stops claiming, hands its running prompt back past the drain
    timeout (the turn cancelled with WorkerDrained, recorded), exits 0; the next worker
    answers the prompt."""
    with trio.fail_after(DEADLINE):
        async with workers() as started, open_remote(pg_dsn) as remote:
            slow, slow_id = await start(
                pg_dsn, started, "--model", "echo?delay=3600", "--drain-timeout", "0.2"
            )
            prompt = await remote.submit("s", "handed back", agent=NEW)
            await turn_started(prompt)
            slow.process.send_signal(signal.SIGTERM)
            assert await slow.line() == f"trio-agents: worker {slow_id} draining"
            assert await slow.line() == f"trio-agents: worker {slow_id} drained"
            assert await slow.process.wait() == 0
            assert (await prompt.status()).state == "queued"
            await start(pg_dsn, started, "--model", "echo")
            assert await prompt.answer() == "handed back"
    records = (await stored_records(pg_dsn, ["s"]))["s"]
    first, _ = [r for r in records if isinstance(r, TurnEnded)]
    assert first.cause == WorkerDrained(worker=slow_id)


async def test_run_remote_prints_the_answer_a_worker_gave(pg_dsn: str) -> None:
    """``trio-agents run --remote DSN --session ID TEXT`` submits through the queue, prints
    the answer a worker process gave, and exits 0; the session was created."""
    with trio.fail_after(DEADLINE):
        async with workers() as started:
            await start(pg_dsn, started, "--model", "echo")
            done = await trio.run_process(
                [str(TRIO_AGENTS), "run", "--remote", pg_dsn, "--session", "s", "hi there"],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"hi there\n", b"")
    assert [row["state"] for row in prompt_rows(pg_dsn)] == ["completed"]


def test_the_worker_command_refuses_a_store_that_is_not_postgresql() -> None:
    """``trio-agents worker --store memory`` is one line that says what to give, status 1."""
    done = subprocess.run(
        [str(TRIO_AGENTS), "worker", "--store", "memory"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert re.fullmatch(
        r"trio-agents: error: trio-agents worker needs the work queue's PostgreSQL database: "
        r"give --store postgresql://USER@HOST/DB \(got 'memory'\)\n",
        done.stderr,
    )
