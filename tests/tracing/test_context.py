"""Trace context across processes: shell jobs, HTTP model requests, MCP servers, ACP prompts."""

from __future__ import annotations

import json
import re

import pytest
import trio
from opentelemetry.sdk.trace import ReadableSpan

import trio_agents.agent as ag
from tests.helpers.acp_support import serve_bridge
from tests.helpers.mcp_support import invoke, tools_server
from tests.helpers.support import FakeServer, Reply, serve
from tests.helpers.tracing_support import in_memory, named
from trio_agents.model import CallTool, OpenAIChatModel, Say, ScriptedModel
from trio_agents.session import ToolCallEnded
from trio_agents.shell import LocalShell, tool_bash

TRACEPARENT = re.compile(r"^00-(?P<trace>[0-9a-f]{32})-(?P<span>[0-9a-f]{16})-[0-9a-f]{2}$")


def traceparent_of(span: ReadableSpan) -> str:
    """The W3C ``traceparent`` of ``span``."""
    context = span.context
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


async def test_a_shell_job_sees_its_tool_calls_span_in_traceparent() -> None:
    """A command run by the bash tool prints $TRACEPARENT: the span of the call that ran it."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("bash", {"command": 'echo "$TRACEPARENT"'})], [Say("ok")]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        [ended] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
    [call] = named(list(exporter.get_finished_spans()), "execute_tool bash")
    printed = re.search(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}", ended.content)
    assert printed is not None, ended.content
    assert printed.group() == traceparent_of(call)


def sse(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def test_an_http_model_request_carries_the_chat_spans_traceparent() -> None:
    """The OpenAI-compatible request's traceparent header names its ``chat`` span."""
    provider, exporter = in_memory()
    async with trio.open_nursery() as nursery:
        server: FakeServer = await serve(nursery, "/v1")
        choice = {"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}
        server.script(Reply(chunks=[sse({"choices": [choice]}), b"data: [DONE]\n\n"]))
        model = OpenAIChatModel("test-model", base_url=server.url, api_key="k")
        async with ag.open_runtime(model=model, tracer_provider=provider) as root:
            agent = (await root.agents.create()).agent
            agent.prompt("go")
            await agent.when_idle()
        nursery.cancel_scope.cancel()
    [chat] = named(list(exporter.get_finished_spans()), "chat test-model")
    assert server.seen[0].headers["traceparent"] == traceparent_of(chat)
    assert dict(chat.attributes or {})["gen_ai.provider.name"] == "openai"


async def test_an_mcp_request_carries_the_trace_context_in_meta() -> None:
    """A stdio MCP server reads the tool call's trace context from the request's _meta."""
    provider, exporter = in_memory()
    async with ag.open_runtime(tracer_provider=provider) as root:
        await root.plugin(tools_server())
        result = await invoke(root, "t__traceparent")
    [call] = named(list(exporter.get_finished_spans()), "execute_tool t__traceparent")
    match = TRACEPARENT.match(result.content)
    assert match is not None, result.content
    assert call.context is not None
    assert int(match["trace"], 16) == call.context.trace_id


@pytest.mark.parametrize("meta", [True, False])
async def test_an_acp_prompts_meta_traceparent_is_its_turns_parent(meta: bool) -> None:
    """session/prompt with _meta.traceparent: the turn's span is a child of the editor's;
    without (or with one that is not valid), the turn starts a trace of its own."""
    provider, exporter = in_memory()
    remote = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with serve_bridge(tracer_provider=provider) as served:
        client = served.client
        await client.initialize()
        session_id = await client.new_session()
        params: dict[str, object] = {
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": "hello"}],
        }
        params["_meta"] = {"traceparent": remote if meta else "00-not-a-trace-01"}
        result = await client.call("session/prompt", params)
        assert result["stopReason"] == "end_turn"
    [turn] = named(list(exporter.get_finished_spans()), f"invoke_agent {session_id}")
    assert turn.context is not None
    if meta:
        assert turn.parent is not None
        assert (turn.context.trace_id, turn.parent.span_id) == (
            0x0AF7651916CD43DD8448EB211C80319C,
            0xB7AD6B7169203331,
        )
        assert turn.parent.is_remote
    else:
        assert turn.parent is None
