"""Approval of a tool that is not bash, through the real ACP client: the client's
``session/request_permission`` answer decides whether the tool runs."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from test_acp_client import Recorder, agent_process, run

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
            [update] = [u for _, u in recorder.updates if u.session_update == "tool_call_update"]
            assert update.status == ("completed" if runs else "failed")
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
