"""Typed final output on the wire: the OpenAI-compatible and Anthropic providers against
loopback servers (``support.FakeServer``) show the schema in the request and parse the answer."""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio
import trio.testing

import trio_agents as ta
from tests.helpers.support import FakeServer, Reply, serve
from trio_agents.model import AnthropicModel, ModelRequest, OpenAIChatModel, ToolSpec
from trio_agents.model._messages import OutputSpec
from trio_agents.model._openai_wire import request_body
from trio_agents.session import OutputProduced


@attrs.frozen
class Verdict:
    ok: bool
    reasons: list[str]


SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "reasons": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["ok", "reasons"],
    "additionalProperties": False,
}


def openai_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def openai_text(*pieces: str) -> Reply:
    chunks = [
        openai_event({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
        for p in pieces
    ]
    end = openai_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return Reply(chunks=[*chunks, end, b"data: [DONE]\n\n"])


def sse(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def anthropic_tool_use(call_id: str, name: str, arguments: str) -> Reply:
    usage = {"input_tokens": 9, "output_tokens": 1}
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    piece = {"type": "input_json_delta", "partial_json": arguments}
    return Reply(
        chunks=[
            sse("message_start", message={"id": "msg_1", "role": "assistant", "usage": usage}),
            sse("content_block_start", index=0, content_block=block),
            sse("content_block_delta", index=0, delta=piece),
            sse("content_block_stop", index=0),
            sse("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 5}),
            sse("message_stop"),
        ]
    )


async def test_openai_asks_with_response_format_and_parses_the_json_text(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """The request carries response_format json_schema (strict) instead of the tool; the
    answer, streamed as text, comes back typed after one refusal."""
    server: FakeServer = await serve(nursery, "/v1")
    server.script(openai_text('{"ok": "yes"}'), openai_text('{"ok": true, ', '"reasons": []}'))
    model = OpenAIChatModel("test-model", base_url=server.url, api_key="k", timeout=None)
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        assert await agent.ask("Is it fine?", output=Verdict) == Verdict(ok=True, reasons=[])
        refused, _ = [r for r in agent.session.records if isinstance(r, OutputProduced)]
        assert refused.call_id is None
    first, second = (seen.body for seen in server.seen)
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_answer", "schema": SCHEMA, "strict": True},
    }
    assert "tools" not in first
    told = second["messages"][-1]
    assert told["role"] == "user"
    assert told["content"].startswith("Your final answer was not accepted:\n- expected a bool")


def test_openai_strict_mode_only_for_a_schema_that_fits_it() -> None:
    """A schema with an optional property or a default is sent with strict off."""
    optional = {**SCHEMA, "required": ["ok"]}
    defaulted = {**SCHEMA, "properties": {"ok": {"type": "boolean", "default": True}}}
    for schema, strict in ((SCHEMA, True), (optional, False), (defaulted, False)):
        spec = ToolSpec("final_answer", "", schema)
        request = ModelRequest((), tools=(spec,), output=OutputSpec("final_answer", schema))
        body = request_body("m", request)
        assert body["response_format"]["json_schema"]["strict"] is strict
        assert "tools" not in body


async def test_anthropic_forces_a_tool_call_and_parses_the_final_answer(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """The request offers final_answer with the schema and tool_choice any; a refused input
    is an error tool_result, and the next tool_use input is the typed answer."""
    server: FakeServer = await serve(nursery, "")
    server.script(
        anthropic_tool_use("toolu_1", "final_answer", '{"ok": false}'),
        anthropic_tool_use("toolu_2", "final_answer", '{"ok": false, "reasons": ["x"]}'),
    )
    model = AnthropicModel("claude-test", base_url=server.url, api_key="k", timeout=None)
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        verdict = await agent.ask("Is it fine?", output=Verdict)
        assert verdict == Verdict(ok=False, reasons=["x"])
    first, second = (seen.body for seen in server.seen)
    (tool,) = first["tools"]
    assert (tool["name"], tool["input_schema"]) == ("final_answer", SCHEMA)
    assert first["tool_choice"] == {"type": "any"}
    result = second["messages"][-1]["content"][0]
    assert (result["type"], result["tool_use_id"], result["is_error"]) == (
        "tool_result",
        "toolu_1",
        True,
    )
    assert "required argument missing @ answer.reasons" in result["content"]
