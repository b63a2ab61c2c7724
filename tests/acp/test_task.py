"""Over ACP, in process: a session's ``task`` call is one tool call (kind ``think``, title
``task: NAME``) whose content streams the child's text while it answers, then its answer."""

from __future__ import annotations

import json
from typing import Any

from tests.helpers.acp_support import Message, serve_bridge


def updates(messages: list[Message], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    ]


def text_of(update: dict[str, Any]) -> str:
    texts = [c["content"]["text"] for c in update.get("content", []) if c["type"] == "content"]
    return "".join(texts)


async def test_a_task_call_streams_the_childs_text_then_its_answer() -> None:
    """The child's words appear in the call as in_progress updates, each with the text so far;
    the call completes with the child's answer; no child text reaches the session's own
    message chunks."""
    async with serve_bridge() as s:
        await s.root.agents.define("echoer", description="echoes", model="echo")
        await s.client.initialize()
        session_id = await s.client.new_session()
        args = {"agent": "echoer", "prompt": "three little words"}
        prompt = await s.client.prompt(session_id, f"!tool task {json.dumps(args)}")
        seen, response = await s.client.until(prompt)
        assert response["result"] == {"stopReason": "end_turn"}
        [call] = updates(seen, "tool_call")
        assert (call["kind"], call["title"]) == ("think", "task: echoer")
        progress = [u for u in updates(seen, "tool_call_update") if u["status"] == "in_progress"]
        streamed = [text_of(u) for u in progress if u.get("content")]
        assert streamed == ["three ", "three little ", "three little words"]
        final = updates(seen, "tool_call_update")[-1]
        assert final["status"] == "completed"
        assert text_of(final).startswith("three little words\n\n[")
        chunks = "".join(u["content"]["text"] for u in updates(seen, "agent_message_chunk"))
        assert "three little words" in chunks  # the lead's own report of the call
        assert not chunks.startswith("three ")
