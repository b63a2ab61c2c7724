"""The turn driver: steps, tool calls, stop reasons, and what a cancelled call had done."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import Tools
from trio_agents.cancel import HookCancel
from trio_agents.model import (
    CallTool,
    Fail,
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    Say,
    ScriptedModel,
    TextDelta,
    Usage,
    Wait,
)
from trio_agents.session import (
    AssistantMessage,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
)


@attrs.frozen
class SleepParams:
    seconds: float


def sleeper(log: list[str]) -> ag.Tool:
    async def run(call: ag.ToolContext, params: SleepParams) -> str:
        log.append(f"start {call.call_id}")
        await trio.sleep(params.seconds)
        log.append(f"end {call.call_id}")
        return f"slept {params.seconds}"

    return ag.Tool("sleep", "Sleep for a while.", SleepParams, run)


def records(agent: ag.Agent, kind: type) -> list:  # type: ignore[type-arg]
    return [r for r in agent.session.records if isinstance(r, kind)]


async def test_tool_calls_run_concurrently_and_results_are_recorded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two calls of one step run at once; both results land before the model's answer."""
    log: list[str] = []
    model = ScriptedModel(
        [
            [CallTool("sleep", {"seconds": 2}), CallTool("sleep", {"seconds": 1})],
            [Say("both done")],
        ]
    )
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(sleeper(log)))
        agent = (await root.agents.create()).agent
        start = trio.current_time()
        agent.prompt("go")
        await agent.when_idle()
        assert trio.current_time() - start < 3
        assert {e for e in log if e.startswith("start")} == {"start call-1", "start call-2"}
        assert [r.content for r in records(agent, ToolCallEnded)] == ["slept 1.0", "slept 2.0"]
        assert [r.content for r in records(agent, AssistantMessage)] == ["both done"]
        [ended] = records(agent, TurnEnded)
        assert ended.stop_reason is StopReason.COMPLETED


async def test_cancel_during_a_tool_call_records_it_as_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call cancelled while running says started=True: it may have had effects."""
    log: list[str] = []
    model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(sleeper(log)))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["start call-1"]
        agent.cancel()
        await agent.when_idle()
        [result] = records(agent, ToolCallEnded)
        assert (result.started, result.is_error) == (True, True)
        assert records(agent, TurnEnded)[0].stop_reason is StopReason.CANCELLED


async def test_cancel_before_a_tool_call_began_records_it_as_not_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A call whose turn was cancelled before it ran says started=False and never runs."""
    log: list[str] = []
    model = ScriptedModel([[CallTool("sleep", {"seconds": 1})]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(sleeper(log)))
        agent = (await root.agents.create()).agent
        cancelled = False

        def cancel_on_call(event: object) -> None:
            nonlocal cancelled
            if not cancelled and isinstance(getattr(event, "record", None), ToolCall):
                cancelled = True
                agent.cancel()

        from trio_agents.session import SessionAppended

        root.on(SessionAppended, cancel_on_call)
        agent.prompt("go")
        await agent.when_idle()
        assert log == []
        [result] = records(agent, ToolCallEnded)
        assert (result.started, result.is_error) == (False, True)


async def test_model_error_ends_the_turn_with_its_message() -> None:
    """A ModelError becomes TurnEnded(error) with the model's message."""
    async with ag.open_runtime(model=ScriptedModel([[Fail("the endpoint said no")]])) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("x")
        await agent.when_idle()
        [ended] = records(agent, TurnEnded)
        assert ended.stop_reason is StopReason.ERROR
        assert ended.error is not None
        assert "the endpoint said no" in ended.error


@pytest.mark.parametrize("calls", [1, 2])
async def test_a_tool_result_the_session_refuses_ends_the_turn_naming_why(calls: int) -> None:
    """A result that cannot be recorded ends the turn in error with that reason, however many
    calls the step ran (not the name of the group that carried it)."""

    @attrs.frozen
    class NoParams:
        pass

    async def garbled(call: ag.ToolContext, params: NoParams) -> str:
        return "a \ud800 b"

    model = ScriptedModel([[CallTool("garbled") for _ in range(calls)], [Say("unreached")]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(ag.Tool("garbled", "Answers broken text.", NoParams, garbled)))
        agent = (await root.agents.create()).agent
        agent.prompt("x")
        await agent.when_idle()
        [ended] = records(agent, TurnEnded)
        assert ended.stop_reason is StopReason.ERROR
        assert ended.error is not None
        assert re.match(r"UnstorableRecordError: ToolCallEnded .* lone surrogate", ended.error)
        assert records(agent, AssistantMessage) == []


async def test_turn_stops_after_max_steps() -> None:
    """A model that keeps calling tools is stopped at max_steps."""
    model = ScriptedModel([[CallTool("nothing")] for _ in range(5)])
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create(max_steps=3)).agent
        agent.prompt("loop")
        await agent.when_idle()
        [ended] = records(agent, TurnEnded)
        assert ended.stop_reason is StopReason.MAX_STEPS
        assert len(records(agent, ToolCall)) == 3
        assert all(r.is_error for r in records(agent, ToolCallEnded))


async def test_a_tool_outside_the_agents_allowance_is_refused() -> None:
    """create(tools=...) limits what the agent may call; other calls get an error result."""
    log: list[str] = []
    model = ScriptedModel([[CallTool("sleep", {"seconds": 0})], [Say("ok")]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(sleeper(log)))
        agent = (await root.agents.create(tools=[])).agent
        agent.prompt("x")
        await agent.when_idle()
        [result] = records(agent, ToolCallEnded)
        assert result.is_error
        assert result.content.startswith("tool 'sleep' is not available to this agent")
        assert log == []


async def test_hook_cancel_ends_the_turn_blocked(autojump_clock: trio.testing.MockClock) -> None:
    """A HookCancel (a vetoing hook) is recorded as stop reason blocked, with the cause."""
    async with ag.open_runtime(model=ScriptedModel([[Wait(10), Say("late")]])) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("x")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel(HookCancel("policy"))
        await agent.when_idle()
        [ended] = records(agent, TurnEnded)
        assert ended.stop_reason is StopReason.BLOCKED
        assert ended.cause == HookCancel("policy")


async def test_resumed_history_is_what_the_model_saw() -> None:
    """The model request of a later turn holds the earlier turn's messages, from the records."""
    from tests.helpers.support import conversation
    from trio_agents.model import AssistantText, SystemText, ToolOutput, UserText

    model = ScriptedModel([[CallTool("nothing", {}, call_id="c1")], [Say("done")]])
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create(instructions="be brief")).agent
        agent.prompt("hi")
        await agent.when_idle()
        history = conversation(agent.session.records, agent.instructions)
    assert history[0] == SystemText("be brief")
    assert history[1] == UserText("hi")
    assert isinstance(history[2], AssistantText)
    assert [c.call_id for c in history[2].tool_calls] == ["c1"]
    assert isinstance(history[3], ToolOutput)
    assert history[3].is_error
    assert history[4] == AssistantText("done")


async def test_a_process_level_exception_still_closes_the_turn_durably() -> None:
    """A KeyboardInterrupt raised inside a turn propagates, after TurnEnded was written."""
    import pytest

    from trio_agents.session import MemoryStore

    @attrs.frozen
    class NoParams:
        pass

    async def interrupt(call: ag.ToolContext, params: NoParams) -> str:
        raise KeyboardInterrupt

    store = MemoryStore()
    agent: ag.Agent | None = None
    with pytest.RaisesGroup(KeyboardInterrupt, flatten_subgroups=True):
        async with ag.open_runtime(store=store, model=ScriptedModel([[CallTool("ki")]])) as root:
            await root.plugin(Tools(ag.Tool("ki", "Interrupts.", NoParams, interrupt)))
            agent = (await root.agents.create()).agent
            agent.prompt("x")
            await trio.sleep_forever()
    assert agent is not None
    [ended] = records(agent, TurnEnded)
    assert ended.stop_reason is StopReason.ERROR
    assert ended.error == "interrupted by KeyboardInterrupt"


@attrs.define
class _Lingering:
    """A model whose stream goes on after its Finished; it logs when it is closed."""

    log: list[str]
    name: str = "lingering"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        try:
            yield TextDelta("done")
            yield Finished(FinishReason.STOP, Usage())
            self.log.append("read past Finished")  # pragma: no cover - the turn stops reading
        finally:
            self.log.append("closed")


async def test_a_model_stream_left_at_its_finish_is_closed() -> None:
    """The turn stops reading at Finished and closes the stream: its finally runs."""
    log: list[str] = []
    async with ag.open_runtime() as root:
        agent = (await root.agents.create(model=_Lingering(log))).agent
        agent.prompt("go")
        await agent.when_idle()
        assert log == ["closed"]
        assert records(agent, TurnEnded)[-1].stop_reason is StopReason.COMPLETED
