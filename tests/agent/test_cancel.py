"""Queue-aware cancel: the single public stop (DESIGN.md §5)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents import open_runtime
from trio_agents.cancel import DisposedCancel, UserCancel
from trio_agents.kernel import Context
from trio_agents.model import ScriptedModel
from trio_agents.session import InboxSpliced, StopReason, TurnEnded, TurnStarted, UserMessage


def turn_ends(agent: ag.Agent) -> list[TurnEnded]:
    return [r for r in agent.session.records if isinstance(r, TurnEnded)]


def claimed(agent: ag.Agent) -> list[str]:
    return [r.content for r in agent.session.records if isinstance(r, UserMessage)]


async def test_cancel_running_turn_records_cancelled_with_user_cause(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A cancel mid-turn ends the turn as cancelled, with the typed UserCancel cause."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("hello")
    await trio.testing.wait_all_tasks_blocked()
    assert agent.status is ag.AgentStatus.RUNNING
    assert agent.cancel() is True
    await agent.when_idle()
    [ended] = turn_ends(agent)
    assert ended.stop_reason is StopReason.CANCELLED
    assert ended.cause == UserCancel()


async def test_cancel_before_claim_never_runs_and_later_prompt_runs(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """Prompts queued before a cancel never run; a prompt sent after it is independent."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("first")
    await trio.testing.wait_all_tasks_blocked()
    agent.prompt("queued-1")
    agent.prompt("queued-2")
    agent.cancel()
    agent.prompt("after")
    await agent.when_idle()
    assert claimed(agent) == ["first", "after"]
    assert [e.stop_reason for e in turn_ends(agent)] == [
        StopReason.CANCELLED,
        StopReason.COMPLETED,
    ]
    removed = [r for r in agent.session.records if isinstance(r, InboxSpliced) and r.op == "remove"]
    assert [r.reason for r in removed] == ["cancelled", "cancelled"]


async def test_cancel_of_prompt_not_yet_started_never_runs(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A prompt cancelled in the same tick it was sent never becomes a turn."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("never")
    assert agent.cancel() is True
    await agent.when_idle()
    assert not [r for r in agent.session.records if isinstance(r, TurnStarted)]


async def test_cancel_requested_event_is_emitted_once_before_clearing(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """AgentCancelRequested comes once, while the inbox and the turn are still intact."""
    agent = (await echo_runtime.agents.create()).agent
    seen: list[tuple[ag.AgentCancelRequested, int, bool]] = []

    def on_cancel(event: ag.AgentCancelRequested) -> None:
        seen.append((event, len(agent.queued()), agent.statistics().running_turn is not None))

    echo_runtime.on(ag.AgentCancelRequested, on_cancel)
    agent.prompt("one")
    await trio.testing.wait_all_tasks_blocked()
    agent.prompt("two")
    agent.cancel()
    await agent.when_idle()
    assert seen == [(ag.AgentCancelRequested(agent.id, UserCancel()), 1, True)]


async def test_idle_cancel_emits_nothing_and_next_prompt_runs(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """An idle cancel with nothing queued returns False, emits nothing, strands nothing."""
    agent = (await echo_runtime.agents.create()).agent
    seen: list[object] = []
    echo_runtime.on(ag.AgentCancelRequested, seen.append)
    assert agent.cancel() is False
    agent.prompt("runs")
    await agent.when_idle()
    assert seen == []
    assert claimed(agent) == ["runs"]
    assert [e.stop_reason for e in turn_ends(agent)] == [StopReason.COMPLETED]


async def test_keep_inbox_aborts_turn_but_keeps_queue(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """cancel(keep_inbox=True) aborts the running turn; the queued prompt then runs."""
    agent = (await echo_runtime.agents.create()).agent
    agent.prompt("first")
    await trio.testing.wait_all_tasks_blocked()
    agent.prompt("kept")
    assert agent.cancel(keep_inbox=True) is True
    await agent.when_idle()
    assert claimed(agent) == ["first", "kept"]
    assert [e.stop_reason for e in turn_ends(agent)] == [
        StopReason.CANCELLED,
        StopReason.COMPLETED,
    ]


async def test_discard_removes_exactly_one(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """discard() removes the one message named, and says False for a claimed one."""
    agent = (await echo_runtime.agents.create()).agent
    first = agent.prompt("first")
    await trio.testing.wait_all_tasks_blocked()
    a = agent.prompt("a")
    agent.prompt("b")
    assert agent.discard(a) is True
    assert agent.discard(a) is False
    assert agent.discard(first) is False
    await agent.when_idle()
    assert claimed(agent) == ["first", "b"]


async def test_cancel_rejects_a_free_string_cause(echo_runtime: Context) -> None:
    """Causes are CancelCause values, never strings."""
    agent = (await echo_runtime.agents.create()).agent
    with pytest.raises(TypeError, match=r"^cancel causes are CancelCause instances"):
        agent.cancel("stop")


async def test_parent_cancel_reaches_child_as_parent_cancel(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A parent's effective cancel cancels its children with ParentCancel(parent_id)."""
    from trio_agents.cancel import ParentCancel

    parent = (await echo_runtime.agents.create()).agent
    child = (await echo_runtime.agents.create(parent=parent)).agent
    assert child in parent.children
    parent.prompt("p")
    child.prompt("c")
    await trio.testing.wait_all_tasks_blocked()
    parent.cancel()
    await child.when_idle()
    [ended] = turn_ends(child)
    assert ended.cause == ParentCancel(parent_id=parent.id)


@pytest.mark.parametrize("queued", [0, 1, 3])
async def test_cancel_after_dispose_returns_false_and_records_nothing(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock, queued: int
) -> None:
    """A disposed agent has nothing to stop: ``cancel()`` returns False, emits nothing and
    writes nothing, even with prompts still queued (recorded for a resume) at dispose time."""
    handle = await echo_runtime.agents.create()
    agent = handle.agent
    agent.prompt("running")
    for n in range(queued):
        agent.prompt(f"queued-{n}")
    await trio.testing.wait_all_tasks_blocked()
    await handle.dispose()
    assert agent.status is ag.AgentStatus.DISPOSED
    seen: list[object] = []
    echo_runtime.on(ag.AgentCancelRequested, seen.append)
    before = len(agent.session.records)
    assert agent.cancel() is False
    assert agent.cancel(keep_inbox=True) is False
    assert seen == []
    assert len(agent.session.records) == before


async def test_cancel_during_dispose_returns_false(
    echo_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """From the moment dispose starts, the turn is the disposer's to stop: cancel() is False."""
    handle = await echo_runtime.agents.create()
    agent = handle.agent
    agent.prompt("running")
    agent.prompt("queued")
    await trio.testing.wait_all_tasks_blocked()
    results: list[bool] = []

    def on_status(event: ag.AgentStatusChanged) -> None:
        if event.new is ag.AgentStatus.DISPOSING:
            results.append(agent.cancel())

    echo_runtime.on(ag.AgentStatusChanged, on_status)
    await handle.dispose()
    assert results == [False]


async def test_an_application_scope_around_the_runtime_ends_the_turn_as_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The owner goes away: a plain trio cancel scope of the application around the runtime
    (no cause of ours) cancels a running turn, which is recorded with DisposedCancel, not a
    missing cause."""
    agents: list[ag.Agent] = []
    with trio.move_on_after(5):
        async with open_runtime(model=ScriptedModel.echo(delay=60)) as root:
            agent = (await root.agents.create()).agent
            agents.append(agent)
            agent.prompt("a long question")
            await trio.sleep_forever()
    [agent] = agents
    [ended] = turn_ends(agent)
    assert ended.stop_reason is StopReason.CANCELLED
    assert ended.cause == DisposedCancel()
