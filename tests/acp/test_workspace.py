"""Over ACP, in process: the plan tool's ``plan`` updates (live and on ``session/load``),
``usage_update`` after each turn, ``session_info_update`` once, and the project instructions
a new session's agent gets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers.acp_support import Message, serve_bridge
from trio_agents.session import MemoryStore


def updates(messages: list[Message], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    ]


PLAN = {
    "entries": [
        {"content": "read the code", "status": "completed", "priority": "high"},
        {"content": "write the fix", "status": "in_progress"},
        {"content": "run the tests"},
    ]
}
EXPECTED = [
    {"content": "read the code", "priority": "high", "status": "completed"},
    {"content": "write the fix", "priority": "medium", "status": "in_progress"},
    {"content": "run the tests", "priority": "medium", "status": "pending"},
]


async def test_a_plan_call_sends_the_plan_and_a_load_replays_it() -> None:
    """plan is a 'think' call; once it completed, a plan update carries every entry (the
    defaults filled in); session/load of the stored session sends the same plan again."""
    store = MemoryStore()
    async with serve_bridge(store=store, workspace=True) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        prompt = await s.client.prompt(session_id, f"!tool plan {json.dumps(PLAN)}")
        seen, response = await s.client.until(prompt)
        assert response["result"] == {"stopReason": "end_turn"}
        [call] = updates(seen, "tool_call")
        assert (call["kind"], call["title"]) == ("think", "plan")
        [plan] = updates(seen, "plan")
        assert plan["entries"] == EXPECTED
        statuses = [u["status"] for u in updates(seen, "tool_call_update")]
        assert statuses == ["in_progress", "completed"]
        await s.client.call("session/close", {"sessionId": session_id})
    async with serve_bridge(store=store, workspace=True) as s:
        await s.client.initialize()
        replayed, loaded = await s.client.until(
            await s.client.request(
                "session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
            )
        )
        assert set(loaded["result"]) == {"modes", "configOptions"}
    assert [u["entries"] for u in updates(replayed, "plan")] == [EXPECTED]


async def test_usage_update_follows_each_turn_when_the_window_is_known() -> None:
    """With a known context window, each turn ends with usage_update (used > 0, size the
    window); without one, none is sent (size is required, a guess would mislead)."""
    async with serve_bridge("echo?context_window=2000") as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        for text in ("one", "two"):
            seen, _ = await s.client.until(await s.client.prompt(session_id, text))
            [usage] = updates(seen, "usage_update")
            assert usage["size"] == 2000
            assert 0 < usage["used"] < 2000
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        seen, _ = await s.client.until(await s.client.prompt(session_id, "one"))
        assert updates(seen, "usage_update") == []


async def test_session_info_update_gives_the_title_once() -> None:
    """The first turn names the session (its first line, as session/list does); later
    turns send no other title."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        first, _ = await s.client.until(await s.client.prompt(session_id, "fix the bug\nplease"))
        assert updates(first, "session_info_update") == [
            {"sessionUpdate": "session_info_update", "title": "fix the bug"}
        ]
        second, _ = await s.client.until(await s.client.prompt(session_id, "and more"))
        assert updates(second, "session_info_update") == []
        listed = await s.client.call("session/list", {})
        assert [e["title"] for e in listed["sessions"]] == ["fix the bug"]


async def test_a_new_session_gets_the_project_instructions_of_its_cwd(tmp_path: Path) -> None:
    """AGENTS.md of the repository root and CLAUDE.md of the cwd, outermost first, are the
    new agent's system text; with project_files=False, none."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    work = tmp_path / "pkg"
    work.mkdir()
    (work / "CLAUDE.md").write_text("Run nox.\n")
    async with serve_bridge() as s:
        await s.client.initialize()
        agent = s.agents.get(await s.client.new_session(str(work)))
        assert agent is not None
        assert agent.instructions == (
            f"# Project instructions from {tmp_path / 'AGENTS.md'}\n\nUse tabs.\n\n"
            f"# Project instructions from {work / 'CLAUDE.md'}\n\nRun nox."
        )
    async with serve_bridge(project_files=False) as s:
        await s.client.initialize()
        agent = s.agents.get(await s.client.new_session(str(work)))
        assert agent is not None
        assert agent.instructions is None


async def test_a_client_error_on_fs_is_the_calls_error_and_writes_follow_the_capability(
    tmp_path: Path,
) -> None:
    """A client that offers only readTextFile: its error answer is the failed call's text,
    and write_file goes to the disk, never fs/write_text_file."""
    async with serve_bridge(workspace=True, allow_bash=True) as s:
        s.client.fs = lambda m: {"error": {"code": -32002, "message": "no such buffer"}}
        capabilities = {"fs": {"readTextFile": True, "writeTextFile": False}}
        await s.client.call(
            "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities}
        )
        session_id = await s.client.new_session(str(tmp_path))
        seen, _ = await s.client.until(
            await s.client.prompt(session_id, '!tool read_file {"path": "gone.txt"}')
        )
        [asked] = [m for m in seen if m.get("method") == "fs/read_text_file"]
        assert asked["params"] == {"sessionId": session_id, "path": str(tmp_path / "gone.txt")}
        [failed] = [u for u in updates(seen, "tool_call_update") if u["status"] == "failed"]
        assert failed["content"][-1]["content"]["text"] == (
            f"{tmp_path / 'gone.txt'}: the editor could not read it: no such buffer"
        )
        write = '!tool write_file {"path": "new.txt", "content": "x"}'
        seen, _ = await s.client.until(await s.client.prompt(session_id, write))
        assert not [m for m in seen if m.get("method") == "fs/write_text_file"]
        assert (tmp_path / "new.txt").read_text() == "x"


async def test_the_question_about_an_overwrite_shows_the_files_old_text(tmp_path: Path) -> None:
    """write_file over an existing file: the permission request's diff has the file's text as
    oldText (read before asking), not a new file; a load replays the call with its diff."""
    (tmp_path / "note.txt").write_text("old\n")
    store = MemoryStore()
    async with serve_bridge(store=store, workspace=True) as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(tmp_path))
        args = {"path": "note.txt", "content": "new\n"}
        prompt = await s.client.prompt(session_id, f"!tool write_file {json.dumps(args)}")
        _, response = await s.client.until(prompt)
        assert response["result"] == {"stopReason": "end_turn"}
        (asked,) = s.client.permission_requests
        (diff,) = asked["params"]["toolCall"]["content"]
        assert diff == {
            "type": "diff",
            "path": str(tmp_path / "note.txt"),
            "oldText": "old\n",
            "newText": "new\n",
        }
        assert (tmp_path / "note.txt").read_text() == "new\n"
        await s.client.call("session/close", {"sessionId": session_id})
    async with serve_bridge(store=store, workspace=True) as s:
        await s.client.initialize()
        replayed, _ = await s.client.until(
            await s.client.request(
                "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            )
        )
        (end,) = [u for u in updates(replayed, "tool_call_update") if u["status"] == "completed"]
        assert [c["type"] for c in end["content"]] == ["diff", "content"]
