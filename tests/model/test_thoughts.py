"""A model's streamed reasoning (issue 40, item 7): each provider's wire turns it into
``ThoughtDelta`` events, the turn emits them as ``AgentThought``, never recording them, and an
ACP session sends them as ``agent_thought_chunk`` updates."""

from __future__ import annotations

from contextlib import aclosing

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.acp_support import serve_bridge
from tests.helpers.answer_streams import WIRES, Wire
from tests.helpers.support import FakeServer, Reply, serve
from trio_agents.model import (
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    TextDelta,
    Think,
    ThoughtDelta,
    UserText,
    model_from_spec,
)
from trio_agents.model import Say as SayStep


@pytest.fixture(params=WIRES, ids=lambda wire: wire.scheme)
def wire(request: pytest.FixtureRequest) -> Wire:
    assert isinstance(request.param, Wire)
    return request.param


async def test_each_wire_streams_reasoning_as_thoughts(
    nursery: trio.Nursery, wire: Wire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reasoning_content (OpenAI-compatible) and thinking_delta (Anthropic) arrive as
    ThoughtDelta, in order with the text; signatures and refusals do not."""
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    server: FakeServer = await serve(nursery, wire.prefix)
    chunks = [
        *wire.opening(),
        wire.text("answer"),
        *wire.reasoning_start(),
        wire.reasoning("first "),
        wire.reasoning("thought"),
        *wire.closing(),
    ]
    server.script(Reply(chunks=chunks))
    model = model_from_spec(wire.spec(server, "m", "max_retries=0"))
    seen: list[ModelEvent] = []
    request = ModelRequest(messages=(UserText("hi"),))
    with trio.fail_after(10):
        async with aclosing(model.stream(request)) as events:
            async for event in events:
                if isinstance(event, TextDelta | ThoughtDelta):
                    seen.append(event)
    assert seen == [TextDelta("answer"), ThoughtDelta("first "), ThoughtDelta("thought")]


async def test_a_turns_thoughts_are_events_and_not_records() -> None:
    """AgentThought events carry the reasoning; the session records only the answer."""
    model = ScriptedModel([[Think("let me see"), SayStep("done")]])
    thoughts: list[str] = []
    async with ag.open_runtime() as root:
        root.on(ag.AgentThought, lambda event: thoughts.append(event.text))
        agent = (await root.agents.create(model)).agent
        assert await agent.ask("go") == "done"
        contents = [getattr(r, "content", "") for r in agent.session.records]
    assert thoughts == ["let ", "me ", "see"]
    assert not any("let me" in str(content) for content in contents)


async def test_an_acp_session_sends_thoughts_as_agent_thought_chunks() -> None:
    """The thoughts stream as agent_thought_chunk updates before the answer's chunks."""
    model = ScriptedModel([[Think("hmm ok"), SayStep("fine")]])
    async with serve_bridge(model) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        seen, response = await s.client.until(await s.client.prompt(session_id, "go"))
    assert response["result"] == {"stopReason": "end_turn"}
    kinds = [
        (m["params"]["update"]["sessionUpdate"], m["params"]["update"]["content"]["text"])
        for m in seen
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"].endswith("_chunk")
    ]
    assert kinds == [
        ("agent_thought_chunk", "hmm "),
        ("agent_thought_chunk", "ok"),
        ("agent_message_chunk", "fine"),
    ]
