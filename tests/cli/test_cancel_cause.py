"""``sessions show`` names the typed cause of every cancelled turn, read back from the store."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import TRIO_AGENTS
from trio_agents.model import ScriptedModel
from trio_agents.session import JsonlStore


async def store_a_cancelled_parent_and_child(store: Path) -> None:
    async with ag.open_runtime(store=JsonlStore(store), model=ScriptedModel.echo(delay=10)) as root:
        parent = await root.agents.create(session_id="parent")
        child = await root.agents.create(session_id="child", parent=parent.agent)
        parent.agent.prompt("first")
        child.agent.prompt("second")
        await trio.testing.wait_all_tasks_blocked()
        assert parent.agent.cancel() is True
        await parent.agent.when_idle()
        await child.agent.when_idle()


def show(store: Path, session_id: str, home: Path) -> str:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [str(TRIO_AGENTS), "sessions", "show", session_id, "--store", str(store)],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_sessions_show_names_the_cause_of_a_cancelled_turn(tmp_path: Path) -> None:
    """After the process that cancelled is gone: ``cancelled by UserCancel`` for the parent's
    turn, ``cancelled by ParentCancel(parent_id='parent')`` for the child's."""
    store = tmp_path / "sessions"
    trio.run(
        store_a_cancelled_parent_and_child,
        store,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    assert ": cancelled by UserCancel\n" in show(store, "parent", tmp_path)
    assert ": cancelled by ParentCancel(parent_id='parent')\n" in show(store, "child", tmp_path)


async def store_a_cut_and_a_finished_turn(store: Path) -> None:
    model = ScriptedModel(["hello there", "ok"])
    async with ag.open_runtime(store=JsonlStore(store), model=model) as root:
        agent = (await root.agents.create(session_id="cut")).agent
        cut: list[str] = []

        def show_word(event: ag.AgentOutput) -> None:
            cut.append(event.text)
            if len(cut) == 1:
                agent.cancel()

        entry = root.on(ag.AgentOutput, show_word)
        agent.prompt("greet")
        await agent.when_idle()
        await entry.close()
        agent.prompt("again")
        await agent.when_idle()


def test_sessions_show_marks_interrupted_text_and_shows_usage(tmp_path: Path) -> None:
    """The text of a cut stream is shown marked interrupted; each turn shows the tokens its
    requests used, and the session's total closes the listing."""
    store = tmp_path / "sessions"
    trio.run(store_a_cut_and_a_finished_turn, store)
    out = show(store, "cut", tmp_path)
    assert "agent: hello  (interrupted)\n" in out  # "hello " as streamed
    assert "turn t-1: cancelled by UserCancel\n" in out  # a cut request reports no usage
    # ScriptedModel counts words: "greet", "hello ", "again" in (3), "ok" out (1).
    assert "turn t-2: completed · 3 in, 1 out tokens (1 request)\n" in out
    assert out.endswith("usage: 3 in, 1 out tokens (1 request)\n")
