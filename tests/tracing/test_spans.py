"""Tracing: spans that follow ownership, with the GenAI conventions and the typed cancel cause."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator

import attrs
import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.support import Tools
from tests.helpers.tracing_support import in_memory, named, tree
from trio_agents.model import (
    CallTool,
    Fail,
    ModelError,
    ModelEvent,
    ModelRequest,
    Say,
    ScriptedModel,
)
from trio_agents.session import ModelUsage, UserMessage
from trio_agents.shell import JobDone, LocalShell, tool_bash


@attrs.frozen
class SleepParams:
    seconds: float


async def _sleep(call: ag.ToolContext, params: SleepParams) -> str:
    await trio.sleep(params.seconds)
    return "slept"


SLEEP = ag.Tool("sleep", "Sleep for a while.", SleepParams, _sleep)


@ta.tool
async def write(text: str) -> str:
    """Write some text."""
    return f"wrote {text}"


@ta.tool(name="write", ask=True)
async def asked_write(text: str) -> str:
    """Write some text, once allowed."""
    return f"wrote {text}"


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    [span] = named(spans, name)
    return span


def attributes(span: ReadableSpan) -> dict[str, object]:
    return dict(span.attributes or {})


async def test_a_turn_with_a_tool_call_is_a_tree_of_its_requests_and_calls() -> None:
    """The turn's span holds its model requests and its tool call, with the GenAI attributes."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("write", {"text": "a"})], [Say("done")]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(Tools(write))
        agent = (await root.agents.create()).agent
        prompt_id = agent.prompt("go")
        await agent.when_idle()
        usage = [r for r in agent.session.records if isinstance(r, ModelUsage)]
    spans = list(exporter.get_finished_spans())
    assert tree(spans) == [
        f"invoke_agent {agent.id}",
        "  chat scripted",
        "  execute_tool write",
        "  chat scripted",
    ]
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    turn = one(spans, f"invoke_agent {agent.id}")
    assert attributes(turn) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": agent.id,
        "gen_ai.agent.name": agent.id,
        "gen_ai.conversation.id": agent.id,
        "trio_agents.turn.id": "t-1",
        "trio_agents.turn.prompt_ids": (prompt_id,),
        "trio_agents.turn.stop_reason": "completed",
    }
    assert turn.status.status_code is StatusCode.UNSET
    first, second = named(spans, "chat scripted")
    assert attributes(first) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "trio_agents.scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": usage[0].input_tokens,
        "gen_ai.usage.output_tokens": usage[0].output_tokens,
    }
    assert attributes(second)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attributes(second)["gen_ai.usage.output_tokens"] == usage[1].output_tokens == 1
    assert attributes(one(spans, "execute_tool write")) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "write",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.id": "call-1",
        "trio_agents.tool.is_error": False,
    }


async def test_message_contents_are_on_the_spans_only_with_capture_content(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The conventions' opt-in variable puts prompts, replies, arguments and results on spans."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("write", {"text": "a"})], [Say("done")]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(Tools(write))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    tool = attributes(one(spans, "execute_tool write"))
    assert json.loads(str(tool["gen_ai.tool.call.arguments"])) == {"text": "a"}
    assert tool["gen_ai.tool.call.result"] == "wrote a"
    first, second = (attributes(s) for s in named(spans, "chat scripted"))
    assert json.loads(str(first["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "go"}]}
    ]
    assert json.loads(str(first["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call-1", "name": "write", "arguments": {"text": "a"}}
            ],
        }
    ]
    assert json.loads(str(second["gen_ai.input.messages"]))[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call-1", "response": "wrote a"}],
    }
    assert json.loads(str(second["gen_ai.output.messages"])) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "done"}]}
    ]
    [event] = one(spans, f"invoke_agent {agent.id}").events
    assert (event.name, dict(event.attributes or {})) == ("gen_ai.user.message", {"content": "go"})


def cancelled_by(span: ReadableSpan) -> dict[str, object]:
    """The cancel attributes of ``span``, checked to be also its event and its status."""
    cancel = {k: v for k, v in attributes(span).items() if k.startswith("trio_agents.cancel.")}
    [event] = [e for e in span.events if e.name == "trio_agents.cancel"]
    assert dict(event.attributes or {}) == cancel
    assert span.status.status_code is StatusCode.ERROR
    assert attributes(span)["error.type"] == "cancelled"
    return cancel


async def test_a_cancelled_tool_call_and_its_turn_end_with_the_typed_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """agent.cancel() during a tool call: both spans carry UserCancel, as attribute and event."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(Tools(SLEEP))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    assert tree(spans) == [f"invoke_agent {agent.id}", "  chat scripted", "  execute_tool sleep"]
    tool, turn = one(spans, "execute_tool sleep"), one(spans, f"invoke_agent {agent.id}")
    assert cancelled_by(tool) == {"trio_agents.cancel.cause": "UserCancel"}
    assert tool.status.description == "cancelled by UserCancel()"
    assert cancelled_by(turn) == {"trio_agents.cancel.cause": "UserCancel"}
    assert attributes(turn)["trio_agents.turn.stop_reason"] == "cancelled"
    assert one(spans, "chat scripted").status.status_code is StatusCode.UNSET


async def test_a_model_request_cancelled_mid_stream_ends_its_chat_span_with_the_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """agent.cancel() while the model streams: its chat span and the turn carry UserCancel."""
    provider, exporter = in_memory()
    model = ScriptedModel([[Say("late", delay=100)], [Say("next")]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.when_idle()
        agent.prompt("again")
        await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    first, second = named(spans, "chat scripted")
    assert cancelled_by(first) == {"trio_agents.cancel.cause": "UserCancel"}
    assert second.status.status_code is StatusCode.UNSET
    turns = named(spans, f"invoke_agent {agent.id}")
    assert [attributes(t)["trio_agents.turn.stop_reason"] for t in turns] == [
        "cancelled",
        "completed",
    ]


async def test_a_child_turn_cancelled_through_its_parent_carries_parent_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The parent's cancel reaches the child's turn: its spans say ParentCancel(parent_id)."""
    provider, exporter = in_memory()
    async with ag.open_runtime(tracer_provider=provider) as root:
        await root.plugin(Tools(SLEEP))
        parent = (await root.agents.create(model=ScriptedModel([]))).agent
        child_model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
        child = (await root.agents.create(model=child_model, parent=parent)).agent
        child.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        parent.cancel()
        await child.when_idle()
    spans = list(exporter.get_finished_spans())
    turn = one(spans, f"invoke_agent {child.id}")
    expected = {
        "trio_agents.cancel.cause": "ParentCancel",
        "trio_agents.cancel.parent_id": parent.id,
    }
    assert cancelled_by(turn) == expected
    assert cancelled_by(one(spans, "execute_tool sleep")) == expected
    assert attributes(turn)["trio_agents.agent.parent_id"] == parent.id
    assert turn.status.description == f"cancelled by {ta.ParentCancel(parent.id).describe()}"


async def test_a_turn_cut_by_dispose_ends_with_disposed_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Disposing the agent mid-call: the turn and the call end with DisposedCancel."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(Tools(SLEEP))
        handle = await root.agents.create()
        handle.agent.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        await handle.dispose()
    spans = list(exporter.get_finished_spans())
    expected = {"trio_agents.cancel.cause": "DisposedCancel"}
    assert cancelled_by(one(spans, f"invoke_agent {handle.agent.id}")) == expected
    assert cancelled_by(one(spans, "execute_tool sleep")) == expected


async def test_a_failed_model_request_marks_its_span_and_the_turn() -> None:
    """A ModelError: the chat span records it; the turn ends in error with the message."""
    provider, exporter = in_memory()
    model = ScriptedModel([[Fail("model down")]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    chat = one(spans, "chat scripted")
    assert chat.status.status_code is StatusCode.ERROR
    assert attributes(chat)["error.type"] == "ModelError"
    assert [e.name for e in chat.events] == ["exception"]
    turn = one(spans, f"invoke_agent {agent.id}")
    assert (turn.status.status_code, turn.status.description) == (StatusCode.ERROR, "model down")
    assert attributes(turn)["trio_agents.turn.stop_reason"] == "error"


class RefusesFirst:
    """A model whose ``stream()`` raises when called, before any stream, the first time."""

    name = "refuses-first"
    context_window: int | None = None

    def __init__(self) -> None:
        self.calls = 0

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.calls += 1
        if self.calls == 1:
            raise ModelError("no stream today")
        return ScriptedModel.echo().stream(request)


async def test_a_model_refusing_before_its_stream_ends_its_chat_span_alone() -> None:
    """A stream() that raises: its chat span ends marked; the next turn's spans are its own."""
    provider, exporter = in_memory()
    async with ag.open_runtime(model=RefusesFirst(), tracer_provider=provider) as root:
        agent = (await root.agents.create(session_id="a")).agent
        for prompt in ("one", "two"):
            agent.prompt(prompt)
            await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    assert tree(spans) == [
        "invoke_agent a",
        "  chat refuses-first",
        "invoke_agent a",
        "  chat refuses-first",
    ]
    refused = named(spans, "chat refuses-first")[0]
    assert refused.status.status_code is StatusCode.ERROR
    assert attributes(refused)["error.type"] == "ModelError"


class Asker:
    """An approver that answers every question with one decision."""

    name = "scripted"

    def __init__(self, decision: ta.Decision) -> None:
        self.decision = decision

    async def approve(self, request: ta.ApprovalRequest) -> ta.Decision:
        await trio.lowlevel.checkpoint()
        return self.decision


@pytest.mark.parametrize(
    ("decision", "is_error"), [(ta.Decision.ALLOW_ONCE, False), (ta.Decision.REJECT_ONCE, True)]
)
async def test_the_approval_decision_is_on_the_tool_calls_span(
    decision: ta.Decision, is_error: bool
) -> None:
    """The answer of the approver (and who gave it) is on the call's span; a refusal errs."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("write", {"text": "a"})], [Say("ok")]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(Tools(asked_write))
        agent = (await root.agents.create(approver=Asker(decision))).agent
        agent.prompt("go")
        await agent.when_idle()
    span = one(list(exporter.get_finished_spans()), "execute_tool write")
    assert attributes(span)["trio_agents.tool.approval"] == decision.value
    assert attributes(span)["trio_agents.tool.approval_by"] == "scripted"
    assert attributes(span)["trio_agents.tool.is_error"] is is_error
    expected = StatusCode.ERROR if is_error else StatusCode.UNSET
    assert span.status.status_code is expected


async def test_a_compaction_has_its_own_span() -> None:
    """agent.compact() is one span of the agent, beside its turns."""
    provider, exporter = in_memory()
    async with ag.open_runtime(tracer_provider=provider) as root:
        agent = (await root.agents.create()).agent
        for text in ("one", "two", "three", "four"):
            agent.prompt(text)
            await agent.when_idle()
        assert await agent.compact() is not None
    spans = list(exporter.get_finished_spans())
    assert tree(spans)[-1] == f"compaction {agent.id}"
    assert attributes(one(spans, f"compaction {agent.id}")) == {"gen_ai.agent.id": agent.id}


async def test_spans_are_made_only_where_a_tracer_provider_was_given() -> None:
    """A runtime without a tracer provider makes no span, even beside a traced one."""
    provider, exporter = in_memory()
    async with ag.open_runtime() as root:
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
    async with ag.open_runtime(tracer_provider=provider) as root:
        traced = (await root.agents.create()).agent
        traced.prompt("go")
        await traced.when_idle()
    assert tree(list(exporter.get_finished_spans())) == [
        f"invoke_agent {traced.id}",
        "  chat echo",
    ]
    assert [r.content for r in traced.session.records if isinstance(r, UserMessage)] == ["go"]


async def test_shell_commands_and_jobs_have_spans_under_their_tool_call() -> None:
    """A command runs in a span under its bash call; a background job's span lasts until it
    exits, under the call that started it."""
    provider, exporter = in_memory()
    model = ScriptedModel(
        [
            [CallTool("bash", {"command": "echo hi"})],
            [CallTool("bash", {"command": "exit 3", "run_in_background": True})],
            [Say("ok")],
        ]
    )
    done = trio.Event()
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        root.on(JobDone, lambda event: done.set())
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        await done.wait()
    spans = list(exporter.get_finished_spans())
    assert tree(spans) == [
        f"invoke_agent {agent.id}",
        "  chat scripted",
        "  execute_tool bash",
        "    shell command",
        "  chat scripted",
        "  execute_tool bash",
        "    shell bash-1",
        "  chat scripted",
    ]
    command, job = one(spans, "shell command"), one(spans, "shell bash-1")
    assert attributes(command)["process.exit.code"] == 0
    assert attributes(command)["trio_agents.job.owner"] == agent.id
    assert "process.command_line" not in attributes(command)
    assert {k: v for k, v in attributes(job).items() if k != "process.pid"} == {
        "trio_agents.job.id": "bash-1",
        "trio_agents.job.owner": agent.id,
        "trio_agents.job.status": "exited",
        "process.exit.code": 3,
    }
    assert isinstance(attributes(job)["process.pid"], int)


class AlwaysDue:
    """A policy due before every request, that keeps the history as it is."""

    def due(self, context: ag.ContextUsage) -> bool:
        return True

    async def compact(self, request: ag.CompactionRequest) -> ag.Compaction | None:
        await trio.lowlevel.checkpoint()
        return None


async def test_a_compaction_a_turn_needed_is_a_child_of_that_turn() -> None:
    """A compaction due before a request runs inside the turn, in a span under it."""
    provider, exporter = in_memory()
    policy = AlwaysDue()
    async with ag.open_runtime(tracer_provider=provider, compactor=policy) as root:
        agent = (await root.agents.create(session_id="a")).agent
        for text in ("one", "two"):
            agent.prompt(text)
            await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    assert tree(spans) == ["invoke_agent a", "  compaction a", "  chat echo"] * 2
    second = named(spans, "compaction a")[1]
    assert attributes(second) == {"gen_ai.agent.id": "a", "trio_agents.turn.id": "t-2"}


def linked(span: ReadableSpan) -> list[tuple[int, dict[str, object]]]:
    """The span ids ``span`` links to, with the links' attributes."""
    return [(link.context.span_id, dict(link.attributes or {})) for link in span.links]


async def test_a_child_turn_cancelled_through_its_parent_links_the_parents_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ParentCancel: the child's cancelled turn links to the parent's running turn."""
    provider, exporter = in_memory()
    sleeping = [[CallTool("sleep", {"seconds": 100})]]
    async with ag.open_runtime(tracer_provider=provider) as root:
        await root.plugin(Tools(SLEEP))
        parent = (await root.agents.create(model=ScriptedModel(sleeping), session_id="p")).agent
        child_model = ScriptedModel(sleeping)
        child = (await root.agents.create(model=child_model, parent=parent, session_id="c")).agent
        parent.prompt("go")
        child.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        parent.cancel()
        await child.when_idle()
        await parent.when_idle()
    spans = list(exporter.get_finished_spans())
    parent_turn, child_turn = one(spans, "invoke_agent p"), one(spans, "invoke_agent c")
    assert parent_turn.context is not None
    assert linked(child_turn) == [
        (parent_turn.context.span_id, {"trio_agents.link": "cancelled_by"})
    ]
    assert linked(parent_turn) == []


@ta.tool
async def stop(ctx: ag.ToolContext) -> str:
    """Stop the agent that called this."""
    assert ctx.agent is not None
    ctx.agent.cancel()
    await trio.lowlevel.checkpoint()  # where the cancel lands
    return "not reached"


async def test_a_turn_cancelled_from_a_tool_call_links_that_call() -> None:
    """A tool that cancels its own agent: the cancelled turn links to the call's span."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("stop", {})]])
    async with ag.open_runtime(model=model, tracer_provider=provider) as root:
        await root.plugin(Tools(stop))
        agent = (await root.agents.create(session_id="a")).agent
        agent.prompt("go")
        await agent.when_idle()
    spans = list(exporter.get_finished_spans())
    call = one(spans, "execute_tool stop")
    assert call.context is not None
    turn = one(spans, "invoke_agent a")
    assert linked(turn) == [(call.context.span_id, {"trio_agents.link": "cancelled_by"})]
    assert cancelled_by(turn) == {"trio_agents.cancel.cause": "UserCancel"}


async def test_a_turn_cut_by_a_cancel_around_the_runtime_ends_with_disposed_cancel(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The application's own scope cancelled mid-call: the turn's span says DisposedCancel,
    as its TurnEnded does."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
    with trio.move_on_after(5):
        async with ag.open_runtime(model=model, tracer_provider=provider) as root:
            await root.plugin(Tools(SLEEP))
            agent = (await root.agents.create(session_id="a")).agent
            agent.prompt("go")
            await trio.sleep_forever()
    spans = list(exporter.get_finished_spans())
    turn = one(spans, "invoke_agent a")
    assert cancelled_by(turn) == {"trio_agents.cancel.cause": "DisposedCancel"}
    # The call's own cause depends on which reaches it first: the plain cancel of the
    # application's scope or the agent's disposal; either way the span says it was cancelled.
    assert attributes(one(spans, "execute_tool sleep"))["error.type"] == "cancelled"
