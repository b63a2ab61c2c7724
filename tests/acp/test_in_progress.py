"""Over ACP, in process: every tool call goes ``pending`` -> ``in_progress`` -> its end,
whether it needs no approval, is asked about, or runs on a standing ``allow_always``."""

from __future__ import annotations

from typing import Any

from tests.helpers.acp_support import Message, allow, serve_bridge
from trio_agents.session import MemoryStore


def statuses(seen: list[Message]) -> list[tuple[str, str]]:
    """The (sessionUpdate, status) of every tool call update, in order."""
    out = []
    for m in seen:
        update: dict[str, Any] = (
            m["params"]["update"] if m.get("method") == "session/update" else {}
        )
        if update.get("sessionUpdate") in ("tool_call", "tool_call_update"):
            out.append((update["sessionUpdate"], update["status"]))
    return out


EXPECTED = [
    ("tool_call", "pending"),
    ("tool_call_update", "in_progress"),
    ("tool_call_update", "completed"),
]


async def test_a_call_allowed_by_a_standing_answer_goes_in_progress() -> None:
    """After 'always allow', the next bash call is not asked about and still goes pending ->
    in_progress -> completed; so does one in a loaded session whose answer was restored."""
    store = MemoryStore()
    async with serve_bridge(store=store) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        s.client.permission = allow("allow-always")
        seen, _ = await s.client.until(await s.client.prompt(session_id, "!bash echo one"))
        assert statuses(seen) == EXPECTED
        assert len(s.client.permission_requests) == 1
        seen, _ = await s.client.until(await s.client.prompt(session_id, "!bash echo two"))
        assert len(s.client.permission_requests) == 1  # the standing answer, not asked
        assert statuses(seen) == EXPECTED
        await s.client.call("session/close", {"sessionId": session_id})
    async with serve_bridge(store=store) as s:
        await s.client.initialize()
        await s.client.call(
            "session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
        )
        seen, _ = await s.client.until(await s.client.prompt(session_id, "!bash echo three"))
        assert s.client.permission_requests == []
        assert statuses(seen) == EXPECTED
