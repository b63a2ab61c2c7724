"""The session holds what the user saw, and what it cost (issue 10 items 2 and 3).

- Text streamed before a stream was cut (a cancel, a model error) is recorded as an
  interrupted ``AssistantMessage`` and is part of the next request's history.
- Every finished model request records its ``ModelUsage``; the agent's totals are folded from
  those records, so they survive a resume.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.model import (
    AssistantText,
    CallTool,
    Finished,
    FinishReason,
    ModelError,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    TextDelta,
    Usage,
    UserText,
)
from trio_agents.session import (
    AssistantMessage,
    JsonlStore,
    MemoryStore,
    ModelUsage,
    StopReason,
    TurnEnded,
)


@attrs.define
class Streamer:
    """A model that streams "hello " and then, on its first request, hangs (``hang``) or
    fails (``fail``); later requests say "ok". It records every request."""

    name: str = "streamer"
    context_window: int | None = None
    fail: bool = False
    usage: Usage = attrs.field(factory=lambda: Usage(7, 3))
    requests: list[ModelRequest] = attrs.Factory(list)
    calls: int = 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        self.calls += 1
        await trio.lowlevel.checkpoint()
        if self.calls > 1:
            yield TextDelta("ok")
            yield Finished(FinishReason.STOP, self.usage)
            return
        yield TextDelta("hello ")
        if self.fail:
            raise ModelError("the connection was reset mid-stream")
        await trio.Event().wait()  # until cancelled


def said(records: tuple[object, ...]) -> list[tuple[str, bool]]:
    return [(r.content, r.interrupted) for r in records if isinstance(r, AssistantMessage)]


async def test_text_streamed_before_a_cancel_is_recorded_and_seen_next(tmp_path: Path) -> None:
    """Cancel after "hello " was streamed: the session keeps it (interrupted), the next
    request's history contains it, and so does the history of the resumed agent."""
    model = Streamer()
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        agent = (await root.agents.create(session_id="p")).agent
        agent.prompt("greet me")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.cancel()
        await agent.when_idle()
        assert said(agent.session.records) == [("hello ", True)]
        agent.prompt("go on")
        await agent.when_idle()
        history = model.requests[1].messages
        assert history[:3] == (UserText("greet me"), AssistantText("hello "), UserText("go on"))
    model.requests.clear()
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        agent = (await root.agents.resume("p")).agent
        assert said(agent.session.records) == [("hello ", True), ("ok", False)]
        agent.prompt("again")
        await agent.when_idle()
        assert model.requests[0].messages[1] == AssistantText("hello ")


async def test_text_streamed_before_a_model_error_is_recorded() -> None:
    """A stream that fails after "hello ": the turn ends in error and the text is kept."""
    async with ag.open_runtime(model=Streamer(fail=True)) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("greet me")
        await agent.when_idle()
        assert said(agent.session.records) == [("hello ", True)]
        [end] = [r for r in agent.session.records if isinstance(r, TurnEnded)]
        assert end.stop_reason is StopReason.ERROR


@pytest.mark.parametrize("k", range(1, 6))
async def test_cancel_after_each_streamed_word_records_exactly_what_was_shown(
    k: int, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancel as the k-th word reaches the user: the recorded text is exactly the words the
    user was shown, for every k, marked interrupted (even after the last word: the stream
    had not finished)."""
    async with ag.open_runtime(model=ScriptedModel(["one two three four five"])) as root:
        agent = (await root.agents.create()).agent
        shown: list[str] = []

        def show(event: ag.AgentOutput) -> None:
            shown.append(event.text)
            if len(shown) == k:
                agent.cancel()

        root.on(ag.AgentOutput, show)
        agent.prompt("count")
        await agent.when_idle()
        assert said(agent.session.records) == [("".join(shown), True)]
        assert len(shown) == k


async def test_usage_is_recorded_per_request_and_summed_on_the_agent(tmp_path: Path) -> None:
    """Each finished request records the model's usage; the agent's totals add them up, come
    back on resume, and a request cut by a cancel adds nothing."""
    model = Streamer(usage=Usage(input_tokens=11, output_tokens=4))
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        agent = (await root.agents.create(session_id="u")).agent
        agent.prompt("cut")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.when_idle()
        assert agent.usage == ag.AgentUsage()
        agent.prompt("one")
        await agent.when_idle()
        agent.prompt("two")
        await agent.when_idle()
        usages = [r for r in agent.session.records if isinstance(r, ModelUsage)]
        assert [(u.turn_id, u.input_tokens, u.output_tokens) for u in usages] == [
            ("t-2", 11, 4),
            ("t-3", 11, 4),
        ]
        assert agent.usage == ag.AgentUsage(input_tokens=22, output_tokens=8, requests=2)
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        resumed = (await root.agents.resume("u")).agent
        assert resumed.usage == ag.AgentUsage(input_tokens=22, output_tokens=8, requests=2)
        resumed.prompt("three")
        await resumed.when_idle()
        assert resumed.usage.requests == 3


async def test_usage_counts_every_request_of_a_turn_with_tool_calls() -> None:
    """A turn of two model requests (a tool call, then the answer) records two usages."""
    model = ScriptedModel([[CallTool("missing")], "done"])
    async with ag.open_runtime(store=MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("use a tool")
        await agent.when_idle()
        usages = [r for r in agent.session.records if isinstance(r, ModelUsage)]
        assert [u.turn_id for u in usages] == ["t-1", "t-1"]
        assert agent.usage.requests == 2
        assert agent.usage.output_tokens == sum(u.output_tokens for u in usages) > 0
