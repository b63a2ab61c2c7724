"""``Agent.ask``: prompt, wait for that message's turn, return its answer or say why not."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_agents as ta
from trio_agents.agent import MessageDroppedError, TurnFailedError
from trio_agents.agent._ask import AnswerFold
from trio_agents.kernel import Context
from trio_agents.model import CallTool, Fail, Say, ScriptedModel, Wait
from trio_agents.session import (
    AssistantMessage,
    InboxSpliced,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
)


@ta.tool
async def shout(text: str) -> str:
    """Upper-case ``text``."""
    await trio.lowlevel.checkpoint()
    return text.upper()


# -- the fold (sans-IO) -------------------------------------------------------------------------


def test_fold_answers_with_the_text_after_the_last_tool_call() -> None:
    """A tool-calling step's text is not the answer; an empty final step answers ``""``."""
    fold = AnswerFold("a", "m-1")
    records = [
        UserMessage(message_id="m-1", content="x", turn_id="t-1"),
        AssistantMessage(turn_id="t-1", content="let me look"),
        ToolCall(turn_id="t-1", call_id="c-1", name="look", arguments={}),
        ToolCallEnded(turn_id="t-1", call_id="c-1", name="look", content="found"),
        TurnEnded(turn_id="t-1", stop_reason=StopReason.COMPLETED),
    ]
    assert fold.feed(records) == ""


def test_fold_answers_with_the_last_step_of_its_own_turn() -> None:
    """Records of other turns are ignored; the final step's text of the turn is the answer."""
    fold = AnswerFold("a", "m-2")
    assert fold.feed([UserMessage(message_id="m-1", content="x", turn_id="t-1")]) is None
    assert fold.feed([AssistantMessage(turn_id="t-1", content="other")]) is None
    assert fold.feed([UserMessage(message_id="m-2", content="y", turn_id="t-2")]) is None
    assert fold.turn_id == "t-2"
    steps = [
        AssistantMessage(turn_id="t-2", content="calling"),
        ToolCall(turn_id="t-2", call_id="c-1", name="look", arguments={}),
        TurnEnded(turn_id="t-1", stop_reason=StopReason.ERROR, error="boom"),
        AssistantMessage(turn_id="t-2", content="final"),
        TurnEnded(turn_id="t-2", stop_reason=StopReason.COMPLETED),
    ]
    assert fold.feed(steps) == "final"


def test_fold_answers_empty_text_when_the_model_said_nothing() -> None:
    """A completed turn without assistant text answers ``""`` (not ``None``: it ended)."""
    fold = AnswerFold("a", "m-1")
    records = [
        UserMessage(message_id="m-1", content="x", turn_id="t-1"),
        TurnEnded(turn_id="t-1", stop_reason=StopReason.COMPLETED),
    ]
    assert fold.feed(records) == ""


def test_fold_refuses_a_message_removed_before_its_turn() -> None:
    """A ``remove`` of the message raises MessageDroppedError with the reason."""
    fold = AnswerFold("a", "m-1")
    removed = InboxSpliced(op="remove", lane="next_turn", message_id="m-1", reason="discarded")
    with pytest.raises(MessageDroppedError, match=r"^message m-1 of agent a was discarded ") as e:
        fold.feed([removed])
    assert (e.value.message_id, e.value.reason) == ("m-1", "discarded")


# -- the agent ----------------------------------------------------------------------------------


async def test_ask_returns_the_answer_after_the_model_delay(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """``ask`` returns the echoed text once its turn has ended: 1 s of trio time before each
    of its two words."""
    handle = await echo_runtime.agents.create()
    start = trio.current_time()
    assert await handle.agent.ask("hello there") == "hello there"
    assert trio.current_time() - start == pytest.approx(2.0)
    assert isinstance(handle.agent.session.records[-1], TurnEnded)
    await handle.dispose()


async def test_ask_answers_with_the_reply_after_the_tool_results(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With a tool call in the turn, the answer is the model's last step."""
    model = ScriptedModel([[CallTool("shout", {"text": "hi"})], "it said HI"])
    async with ta.open_runtime(model=model) as root:
        root.get("tools").register(shout)
        handle = await root.agents.create(tools=["shout"])
        assert await handle.agent.ask("shout hi") == "it said HI"
        await handle.dispose()


async def test_concurrent_asks_each_get_their_own_turn(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """Two asks queued at once are answered by two turns, each with its own text."""
    agent = (await echo_runtime.agents.create()).agent
    answers: dict[str, str] = {}

    async def ask(text: str) -> None:
        answers[text] = await agent.ask(text)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "one")
        nursery.start_soon(ask, "two")
    assert answers == {"one": "one", "two": "two"}
    assert agent.statistics().turns == 2


async def test_ask_raises_turn_failed_when_the_model_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A model error ends the turn ``error``; ask says so and carries the record."""
    async with ta.open_runtime(model=ScriptedModel([[Fail("overloaded")]])) as root:
        agent = (await root.agents.create()).agent
        with pytest.raises(TurnFailedError, match=r"^turn t-1 of agent \S+ ended error") as e:
            await agent.ask("hi")
        assert e.value.record.stop_reason is StopReason.ERROR
        assert "overloaded" in str(e.value)


async def test_ask_raises_turn_failed_with_the_cause_when_its_turn_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A cancel during the turn makes ask raise, naming the typed cause."""
    async with ta.open_runtime(model=ScriptedModel([[Wait(10), Say("late")]])) as root:
        agent = (await root.agents.create()).agent
        async with trio.open_nursery() as nursery:

            async def cancel_soon() -> None:
                await trio.sleep(1)
                assert agent.cancel(ta.UserCancel())

            nursery.start_soon(cancel_soon)
            with pytest.raises(TurnFailedError, match=r"ended cancelled by UserCancel\(\)") as e:
                await agent.ask("hi")
        assert e.value.record.cause == ta.UserCancel()


async def test_ask_raises_message_dropped_when_cancelled_while_queued(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A message cleared from the inbox by a cancel never ran: ask says it was cancelled."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("first")
    await trio.testing.wait_all_tasks_blocked()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:

            async def ask_second() -> None:
                with pytest.raises(MessageDroppedError, match=r"was cancelled before a turn"):
                    await agent.ask("second")

            nursery.start_soon(ask_second)
            await trio.testing.wait_all_tasks_blocked()
            assert len(agent.queued()) == 1
            agent.cancel()


async def test_ask_raises_agent_closed_when_disposed_while_queued(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """Disposing the agent leaves the message queued in the session; ask says so."""
    handle = await echo_runtime.agents.create()
    handle.agent.prompt("first")
    await trio.testing.wait_all_tasks_blocked()
    async with trio.open_nursery() as nursery:

        async def ask_second() -> None:
            with pytest.raises(ta.AgentClosedError, match=r"disposed before it answered"):
                await handle.agent.ask("second")

        nursery.start_soon(ask_second)
        await trio.testing.wait_all_tasks_blocked()
        await handle.dispose()


async def test_cancelling_the_caller_of_ask_leaves_the_turn_running(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A timeout around ask stops the wait only; the turn completes and is recorded."""
    agent = (await echo_runtime.agents.create()).agent
    with trio.move_on_after(0.5):
        await agent.ask("hello")
    await agent.when_idle()
    ended = [r for r in agent.session.records if isinstance(r, TurnEnded)]
    assert [r.stop_reason for r in ended] == [StopReason.COMPLETED]
