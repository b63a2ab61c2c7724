"""Approval over ACP: a tool that is not bash, through the real ACP client (the client's
``session/request_permission`` answer decides whether the tool runs), and standing answers
kept across ``session/load``."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import trio

from tests.helpers.acp_bridge import chunks, serve
from tests.helpers.acp_client import Recorder, agent_process, run
from tests.helpers.acp_support import CWD, allow
from trio_agents.session import MemoryStore, ToolApproval

pytest.importorskip("acp")

from acp import text_block

PLUGIN = '''
import trio_agents as ta
from trio_agents.model import CallTool, Say, ScriptedModel, register_model_scheme


@ta.tool(ask=True)
async def note(path: str) -> str:
    """Write a note file."""
    open(path, "w").close()
    return "noted"


def _model(rest: str) -> ScriptedModel:
    return ScriptedModel([[CallTool("note", {"path": rest})], [Say("done")]] * 3)


register_model_scheme("notes", _model)


class Notes:
    name = "notes"
    inject = ("tools",)

    async def apply(self, ctx, config):
        ctx.tools.register(note)


plugin = Notes()
'''


def setup(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "notes_plugin.py").write_text(textwrap.dedent(PLUGIN))
    config = tmp_path / "notes.toml"
    config.write_text('[[plugins]]\nmodule = "notes_plugin"\nattr = "plugin"\n')
    return config, tmp_path / "note"


@pytest.mark.parametrize(
    ("answer", "runs", "stop"),
    [
        ("allow_once", True, "end_turn"),
        ("reject_once", False, "end_turn"),
        (None, False, "cancelled"),
    ],
    ids=["allow", "reject", "cancelled"],
)
def test_a_tool_marked_ask_is_asked_through_the_client(
    tmp_path: Path, answer: str | None, runs: bool, stop: str
) -> None:
    """The permission request names the tool; allow runs it, reject refuses and the turn
    goes on, cancelled ends the turn cancelled; bash is not the only tool asked about."""
    config, note = setup(tmp_path)

    async def main() -> None:
        recorder = Recorder(permission=answer)
        args = ("--store", "memory", "--config", str(config), "--model", f"notes:{note}")
        async with agent_process(recorder, *args) as (conn, _):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("write it")]
            )
            assert response.stop_reason == stop
            [asked] = recorder.permission_requests
            assert asked.kind == "other"
            assert asked.title == f'note {{"path": "{note}"}}'
            assert asked.raw_input == {"path": str(note)}
            updates = [u for _, u in recorder.updates if u.session_update == "tool_call_update"]
            # An allowed call is in_progress once allowed, then completed.
            assert [u.status for u in updates] == (
                ["in_progress", "completed"] if runs else ["failed"]
            )
            update = updates[-1]
            if answer == "reject_once":
                assert "the user rejected this call of tool 'note'" in str(update.content)

    run(main)
    assert note.exists() is runs


def test_allow_always_stops_asking_for_that_tool(tmp_path: Path) -> None:
    """allow_always: the second call of the tool in the session runs unasked."""
    config, note = setup(tmp_path)

    async def main() -> None:
        recorder = Recorder(permission="allow_always")
        args = ("--store", "memory", "--config", str(config), "--model", f"notes:{note}")
        async with agent_process(recorder, *args) as (conn, _):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            for _ in range(2):
                response = await conn.prompt(
                    session_id=session.session_id, prompt=[text_block("write it")]
                )
                assert response.stop_reason == "end_turn"
            assert len(recorder.permission_requests) == 1

    run(main)
    assert note.exists()


async def test_always_answers_survive_session_load() -> None:
    """allow_always in one connection; after session/load in another, bash runs unasked, and
    the answers are recorded as ToolApproval (which replays as nothing but the notice)."""
    store = MemoryStore()
    async with serve(store=store) as s:
        await s.client.initialize()
        s.client.permission = allow("allow-always")
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "!bash one"))
        assert len(s.client.permission_requests) == 1
    async with serve(store=store) as s:
        await s.client.initialize()
        params = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        request_id = await s.client.request("session/load", params)
        replayed, _ = await s.client.until(request_id)
        _, response = await s.client.until(await s.client.prompt(session_id, "!bash two"))
        assert response["result"] == {"stopReason": "end_turn"}
        assert s.bash.ran == ["two"]
        assert s.client.permission_requests == []
        records = s.agent(session_id).session.records
        assert [(r.decision, r.by) for r in records if isinstance(r, ToolApproval)] == [
            ("allow_always", "acp client"),
            ("allow_always", "standing answer"),
        ]
        # The records replay as nothing; the one notice of the restored answer names them.
        (notice,) = [m for m in replayed if "approval" in str(m)]
        assert notice is replayed[-1]


async def test_session_load_announces_a_standing_approval_and_can_forget_it() -> None:
    """session/load of a session with an allow_always answer sends one agent_message notice
    naming bash; with forget_approvals the notice says it is ignored and bash is asked again."""
    store = MemoryStore()
    async with serve(store=store) as s:
        await s.client.initialize()
        s.client.permission = allow("allow-always")
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "!bash one"))
    params = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
    async with serve(store=store) as s:
        await s.client.initialize()
        replayed, _ = await s.client.until(await s.client.request("session/load", params))
        assert chunks(replayed).endswith(
            "[trio-agents] this session stores 'always' approvals: bash run without asking "
            "(trio-agents acp --forget-approvals asks again).\n"
        )
    async with serve(store=store, forget_approvals=True) as s:
        await s.client.initialize()
        s.client.permission = allow("reject-once")
        replayed, _ = await s.client.until(await s.client.request("session/load", params))
        assert chunks(replayed).endswith(
            "[trio-agents] this session's stored 'always' approvals (bash) are ignored.\n"
        )
        await s.client.until(await s.client.prompt(session_id, "!bash two"))
        assert len(s.client.permission_requests) == 1
        assert s.bash.ran == []


async def test_a_child_of_a_sessions_agent_asks_the_client_about_bash() -> None:
    """A child agent inherits the bridge as approver with its "always ask about bash": the
    client is asked in the parent's session, and its answer lets the command run."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        parent = s.agent(session_id)
        child = (await s.root.get("agents").create(parent=parent)).agent
        child.prompt("!bash from the child")
        with trio.fail_after(30):
            asked = await s.client.next()
            while asked.get("method") != "session/request_permission":
                asked = await s.client.next()
            await s.client.send({"jsonrpc": "2.0", "id": asked["id"], **allow("allow-once")(asked)})
            await child.when_idle()
        assert asked["params"]["sessionId"] == session_id
        assert asked["params"]["toolCall"]["title"] == "bash: from the child"
        assert s.bash.ran == ["from the child"]
