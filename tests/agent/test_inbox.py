"""The two-lane inbox: prompt, steer, inject; nothing batched or dropped."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.agent._inbox import Inbox
from trio_agents.kernel import Context
from trio_agents.model import ScriptedModel
from trio_agents.session import TurnEnded, UserMessage


def user_messages(agent: ag.Agent) -> list[UserMessage]:
    return [r for r in agent.session.records if isinstance(r, UserMessage)]


async def test_steer_is_consumed_by_the_next_step_of_the_running_turn(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A steer sent during a turn becomes input of that turn's next step."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("go")
    await trio.testing.wait_all_tasks_blocked()
    agent.steer("turn left")
    await agent.when_idle()
    messages = user_messages(agent)
    assert [m.content for m in messages] == ["go", "turn left"]
    assert messages[0].turn_id == messages[1].turn_id
    assert len([r for r in agent.session.records if isinstance(r, TurnEnded)]) == 1


async def test_inject_does_not_wake_an_idle_agent(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """An injected message waits for the next turn; it does not start one."""
    agent = (await echo_runtime.agents.create()).agent
    agent.inject("context")
    await agent.when_idle()
    assert agent.status is ag.AgentStatus.IDLE
    assert user_messages(agent) == []
    agent.prompt("now")
    await agent.when_idle()
    assert [m.content for m in user_messages(agent)] == ["context", "now"]


async def test_each_prompt_is_its_own_turn(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """Three prompts queued at once run as three turns, in order, none dropped."""
    agent = (await echo_runtime.agents.create()).agent
    ids = [agent.prompt(text) for text in ("a", "b", "c")]
    assert len(set(ids)) == 3
    await agent.when_idle()
    messages = user_messages(agent)
    assert [m.content for m in messages] == ["a", "b", "c"]
    assert len({m.turn_id for m in messages}) == 3


async def test_when_idle_follows_a_successor_turn(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """when_idle does not return between a turn and the successor queued behind it."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("a")
    agent.prompt("b")
    await agent.when_idle()
    assert len([r for r in agent.session.records if isinstance(r, TurnEnded)]) == 2
    assert agent.queued() == ()


async def test_when_idle_returns_when_disposed_while_waiting(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A waiter on when_idle is released by disposal instead of hanging."""
    handle = await echo_runtime.agents.create(model=ScriptedModel.echo(delay=1000.0))
    handle.agent.prompt("long")
    released = trio.Event()

    async def wait() -> None:
        await handle.agent.when_idle()
        released.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert not released.is_set()
        await handle.dispose()
    assert released.is_set()


async def test_prompt_after_dispose_is_refused(echo_runtime: Context) -> None:
    """A disposed agent takes no more messages and says why."""
    handle = await echo_runtime.agents.create()
    await handle.dispose()
    with pytest.raises(ag.AgentClosedError, match=r"^agent .* takes no more messages"):
        handle.agent.prompt("late")


def test_inbox_claim_turn_takes_one_prompt_and_all_step_input() -> None:
    """The sans-IO inbox: a turn claims the oldest prompt and every next-step message."""
    inbox = Inbox()
    p1 = inbox.add("next_turn", "p1", wake=True)
    s1 = inbox.add("next_step", "s1", wake=False)
    inbox.add("next_turn", "p2", wake=True)
    assert [m.id for m in inbox.claim_turn()] == [p1.id, s1.id]
    assert [m.content for m in inbox.queued()] == ["p2"]
    assert inbox.wakeable
