"""``terminal/*`` over ACP, in process with raw frames and the autojump clock: a command's
timeout kills its terminal, a client that cannot create one is a refused call, and every
terminal created is released."""

from __future__ import annotations

import json
from typing import Any

import trio

from tests.helpers.acp_support import Client, Message, serve_bridge


async def init_terminal(client: Client) -> str:
    await client.call(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"terminal": True}}
    )
    return await client.new_session()


async def drive(
    client: Client, request_id: int, answers: dict[str, Any]
) -> tuple[list[Message], Message]:
    """Serve the terminal/* requests until the response to ``request_id``: each method is
    answered with ``answers[method]`` (a response member dict), or left unanswered when
    absent; returns every request and notification seen, and the response."""
    seen: list[Message] = []
    while True:
        message = await client.next()
        method = message.get("method")
        if method == "session/request_permission":
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}},
                }
            )
        elif isinstance(method, str) and method.startswith("terminal/"):
            seen.append(message)
            if method in answers:
                await client.send({"jsonrpc": "2.0", "id": message["id"], **answers[method]})
        elif method is not None:
            seen.append(message)
        else:
            assert message["id"] == request_id, message
            return seen, message


def methods(seen: list[Message]) -> list[str]:
    return [m["method"] for m in seen if str(m["method"]).startswith("terminal/")]


def last_result(seen: list[Message]) -> dict[str, Any]:
    updates = [
        m["params"]["update"]
        for m in seen
        if m["method"] == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "tool_call_update"
    ]
    result: dict[str, Any] = updates[-1]
    return result


async def test_a_timeout_kills_the_terminal_then_reads_it_and_releases_it(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A client that never reports the exit: after the call's timeout the terminal is
    killed, its output read (the model is told it timed out) and released."""
    async with serve_bridge(allow_bash=True) as s:
        session_id = await init_terminal(s.client)
        args = json.dumps({"command": "sleep 600", "timeout": 5})
        answers = {
            "terminal/create": {"result": {"terminalId": "t1"}},
            "terminal/kill": {"result": {}},
            "terminal/output": {"result": {"output": "partial\n", "truncated": True}},
            "terminal/release": {"result": {}},
        }
        before = trio.current_time()
        seen, response = await drive(
            s.client, await s.client.prompt(session_id, f"!tool bash {args}"), answers
        )
        assert trio.current_time() - before >= 5
        assert response["result"] == {"stopReason": "end_turn"}
        assert methods(seen) == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release",
        ]
        end = last_result(seen)
        assert end["status"] == "failed"
        assert end["content"][0] == {"type": "terminal", "terminalId": "t1"}
        text = end["rawOutput"]["content"]
        assert text.startswith("[... earlier output dropped by the editor's terminal")
        assert "partial\n" in text
        assert text.endswith("[timed out after 5 s; killed (exit code None)]")


async def test_a_client_that_cannot_create_a_terminal_refuses_the_call() -> None:
    """An error answer to terminal/create: the model reads the client's message, the
    command did not run, and nothing is left to release."""
    async with serve_bridge(allow_bash=True) as s:
        session_id = await init_terminal(s.client)
        answers = {"terminal/create": {"error": {"code": -32603, "message": "no pty here"}}}
        seen, response = await drive(
            s.client, await s.client.prompt(session_id, "!bash echo hi"), answers
        )
        assert response["result"] == {"stopReason": "end_turn"}
        assert methods(seen) == ["terminal/create"]
        end = last_result(seen)
        assert end["status"] == "failed"
        assert end["rawOutput"]["content"] == (
            "the editor's terminal failed: no pty here; the command did not run"
        )
        assert s.bridge.statistics().prompts == 0
