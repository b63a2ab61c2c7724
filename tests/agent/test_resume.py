"""Resume: history and pending inbox come back; a crash leaves a resumable session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.model import ScriptedModel
from trio_agents.session import (
    JsonlStore,
    SessionNotFoundError,
    StopReason,
    TurnEnded,
    UserMessage,
)


async def test_resume_restores_history_and_pending_inbox(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A resumed agent has the old records and runs the prompt that was still queued."""
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=ScriptedModel.echo(1.0)) as root:
        handle = await root.agents.create(session_id="r1")
        handle.agent.prompt("done before")
        await handle.agent.when_idle()
        handle.agent.prompt("running")
        await trio.testing.wait_all_tasks_blocked()
        handle.agent.prompt("still queued")
        await handle.dispose()
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=ScriptedModel.echo(1.0)) as root:
        agent = (await root.agents.resume("r1")).agent
        await agent.when_idle()
        contents = [r.content for r in agent.session.records if isinstance(r, UserMessage)]
        assert contents == ["done before", "running", "still queued"]
        ends = [r.stop_reason for r in agent.session.records if isinstance(r, TurnEnded)]
        assert ends == [StopReason.COMPLETED, StopReason.CANCELLED, StopReason.COMPLETED]
        turn_ids = [r.turn_id for r in agent.session.records if isinstance(r, UserMessage)]
        assert turn_ids == ["t-1", "t-2", "t-3"]


async def test_resume_of_unknown_id_is_a_clear_error(tmp_path: Path) -> None:
    """Resuming an id that was never stored names it."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        with pytest.raises(SessionNotFoundError, match=r"nope"):
            await root.agents.resume("nope")


async def test_resume_of_a_live_id_is_refused(tmp_path: Path) -> None:
    """Resuming an agent that is live already is AgentIdInUseError."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        await root.agents.create(session_id="live")
        with pytest.raises(ag.AgentIdInUseError):
            await root.agents.resume("live")


CHILD = textwrap.dedent(
    """
    import sys, trio
    import trio_agents.agent as ag
    from trio_agents.model import ScriptedModel
    from trio_agents.session import JsonlStore

    async def main():
        async with ag.open_runtime(store=JsonlStore(sys.argv[1])) as root:
            agent = (await root.agents.create(session_id="crash",
                                              model=ScriptedModel.echo(delay=3600))).agent
            agent.prompt("the turn that is killed")
            agent.prompt("queued")
            await root.sessions.flush(agent.session)
            while sum(1 for r in agent.session.records if type(r).__name__ == "TurnStarted") < 1:
                await trio.sleep(0.01)
            await root.sessions.flush(agent.session)
            print("ready", flush=True)
            await trio.sleep_forever()

    trio.run(main)
    """
)


def crash_child(tmp_path: Path) -> None:
    """Run CHILD until it reports a turn in flight, then SIGKILL it."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


async def test_sigkill_mid_turn_leaves_a_session_that_resumes_interrupted(tmp_path: Path) -> None:
    """A process SIGKILLed mid-turn (torn last line too) resumes with the turn interrupted."""
    await trio.to_thread.run_sync(crash_child, tmp_path)
    path = tmp_path / "crash.jsonl"
    flushed = path.read_text().splitlines()
    with path.open("a") as f:
        f.write('{"type": "assistant_mess')  # a torn write
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=ScriptedModel.echo()) as root:
        agent = (await root.agents.resume("crash", model=None)).agent
        ends = [r for r in agent.session.records if isinstance(r, TurnEnded)]
        assert [e.stop_reason for e in ends] == [StopReason.INTERRUPTED]
        assert len(agent.session.records) >= len(flushed) - 1
        await agent.when_idle()
        contents = [r.content for r in agent.session.records if isinstance(r, UserMessage)]
        assert contents == ["the turn that is killed", "queued"]
