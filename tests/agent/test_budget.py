"""Budgets down the ownership tree: limits, the stop of the subtree under a spent budget, the
spending folded from the session (so a resume keeps it), and costs from the price table."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.support import Tools
from trio_agents.model import CallTool, Price, PriceTable, Say, ScriptedModel, Wait
from trio_agents.session import (
    ChildEnded,
    JsonlStore,
    ModelUsage,
    StopReason,
    ToolCallEnded,
    TurnEnded,
    dump_record,
    load_record,
)


def _ends(agent: ag.Agent) -> list[TurnEnded]:
    return [r for r in agent.session.records if isinstance(r, TurnEnded)]


def _usages(agent: ag.Agent) -> list[ModelUsage]:
    return [r for r in agent.session.records if isinstance(r, ModelUsage)]


async def _noop(ctx: ag.ToolContext, params: None) -> str:
    return "ran"


NOOP = ag.Tool("noop", "does nothing", None, _noop)


def test_a_budget_takes_any_subset_of_its_limits() -> None:
    """Every limit is optional, and ``limits()`` names the ones that are set."""
    assert ta.Budget().limits() == {}
    assert not ta.Budget()
    budget = ta.Budget(output_tokens=100, cost=0.5, seconds=30)
    assert budget.limits() == {"output_tokens": 100, "seconds": 30, "cost": 0.5}
    assert ta.Budget.of({"tokens": 1000.0, "cost": 1}) == ta.Budget(tokens=1000, cost=1)


def test_a_negative_limit_is_refused_with_a_clear_error() -> None:
    """A negative limit, a count that is not whole and an unknown limit name are refused."""
    with pytest.raises(ValueError, match=r"^budget tokens must be >= 0 .*; got -1$"):
        ta.Budget(tokens=-1)
    with pytest.raises(TypeError, match=r"^budget turns is a whole number >= 0 .*; got float 1.5$"):
        ta.Budget(turns=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^unknown budget limit 'dollars'; the limits are "):
        ta.Budget.of({"dollars": 1})


def test_budget_exhausted_round_trips_in_a_turn_ended_record() -> None:
    """``BudgetExhausted`` is a recordable cause: ``TurnEnded`` keeps it through JSON."""
    cause = ta.BudgetExhausted("a-1", "output_tokens", 117, 100)
    assert cause.describe() == "output_tokens budget 100 spent (117)"
    record = TurnEnded(turn_id="t-1", stop_reason=StopReason.CANCELLED, cause=cause)
    assert load_record(dump_record(record)) == record


async def test_a_spent_parent_budget_stops_its_subtree_and_nothing_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two children stream under a parent with an output-token budget: the first child's
    answer spends it, so the parent's turn and the other child's stream stop with the
    parent's ``BudgetExhausted``; a sibling outside the subtree answers in full."""
    async with ag.open_runtime() as root:
        parent = (
            await root.agents.create(
                model=ScriptedModel([[Wait(100), Say("late")]]),
                budget=ta.Budget(output_tokens=3),
            )
        ).agent
        first = (
            await root.agents.create(
                model=ScriptedModel([[Say("one two three four five", delay=1)], "again"]),
                parent=parent,
            )
        ).agent
        second = (
            await root.agents.create(
                model=ScriptedModel([[Say("a b c d e f g h i j", delay=2)]]), parent=parent
            )
        ).agent
        sibling = (
            await root.agents.create(model=ScriptedModel([[Say("x y z w v u", delay=3)]]))
        ).agent
        for agent in (parent, first, second, sibling):
            agent.prompt("go")
        for agent in (parent, first, second, sibling):
            await agent.when_idle()
        cause = ta.BudgetExhausted(parent.id, "output_tokens", 5, 3)
        assert [(e.stop_reason, e.cause) for e in _ends(parent)] == [(StopReason.CANCELLED, cause)]
        assert [(e.stop_reason, e.cause) for e in _ends(second)] == [(StopReason.CANCELLED, cause)]
        # The answer that spent the budget was given in full; the stream cut reported none.
        assert [e.stop_reason for e in _ends(first)] == [StopReason.COMPLETED]
        assert _usages(second) == []
        assert [(e.stop_reason, e.cause) for e in _ends(sibling)] == [(StopReason.COMPLETED, None)]
        # The budget stays spent: the next turn under the parent stops before its request.
        first.prompt("more")
        await first.when_idle()
        assert _ends(first)[-1].cause == cause
        assert len(_usages(first)) == 1


async def test_a_childs_own_budget_stops_only_that_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child whose own budget is spent stops with its own cause; its parent goes on."""
    async with ag.open_runtime() as root:
        parent = (await root.agents.create(model=ScriptedModel(["p", "q"]))).agent
        child = (
            await root.agents.create(
                model=ScriptedModel(["one two", "three"]),
                parent=parent,
                budget=ta.Budget(requests=1),
            )
        ).agent
        child.prompt("a")
        await child.when_idle()
        child.prompt("b")
        await child.when_idle()
        assert _ends(child)[-1].cause == ta.BudgetExhausted(child.id, "requests", 1, 1)
        parent.prompt("go")
        await parent.when_idle()
        assert [(e.stop_reason, e.cause) for e in _ends(parent)] == [(StopReason.COMPLETED, None)]


async def test_a_tool_call_beyond_the_budget_is_recorded_not_started() -> None:
    """With ``tool_calls=1`` the second call is refused: recorded not started, with the
    budget in its content, and the turn ends with ``BudgetExhausted``."""
    model = ScriptedModel([[CallTool("noop")], [CallTool("noop")], [Say("done")]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(NOOP))
        agent = (await root.agents.create(budget=ta.Budget(tool_calls=1))).agent
        agent.prompt("go")
        await agent.when_idle()
        results = [
            (r.content, r.started) for r in agent.session.records if isinstance(r, ToolCallEnded)
        ]
        assert results == [
            ("ran", True),
            ("refused: the tool_calls budget 1 spent (1)", False),
        ]
        assert _ends(agent)[-1].cause == ta.BudgetExhausted(agent.id, "tool_calls", 1, 1)


async def test_a_turns_budget_lets_that_many_turns_run() -> None:
    """``turns=1``: the first turn runs, the second stops before its model request."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create(budget=ta.Budget(turns=1))).agent
        for text in ("one", "two"):
            agent.prompt(text)
            await agent.when_idle()
        assert [(e.stop_reason, e.cause) for e in _ends(agent)] == [
            (StopReason.COMPLETED, None),
            (StopReason.CANCELLED, ta.BudgetExhausted(agent.id, "turns", 1, 1)),
        ]
        assert len(_usages(agent)) == 1


async def test_a_seconds_budget_counts_from_the_agents_creation() -> None:
    """``seconds=0`` is spent at once: the first turn stops before any request."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create(budget=ta.Budget(seconds=0))).agent
        agent.prompt("hi")
        await agent.when_idle()
        (end,) = _ends(agent)
        assert isinstance(end.cause, ta.BudgetExhausted)
        assert (end.cause.limit, end.cause.allowed) == ("seconds", 0)
        assert _usages(agent) == []


async def test_a_resumed_agent_keeps_its_budget_and_what_it_spent(tmp_path: Path) -> None:
    """The budget is recorded and the spending folded from the records: after a resume
    the spent budget still stops the next turn."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        handle = await root.agents.create(
            model="echo", session_id="b", budget=ta.Budget(output_tokens=3)
        )
        handle.agent.prompt("one two three four")
        await handle.agent.when_idle()
        await handle.dispose()
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        agent = (await root.agents.resume("b")).agent
        assert agent.config.budget == ta.Budget(output_tokens=3)
        agent.prompt("more")
        await agent.when_idle()
        assert _ends(agent)[-1].cause == ta.BudgetExhausted("b", "output_tokens", 4, 3)
        assert len(_usages(agent)) == 1


async def test_each_request_records_its_cost_from_the_price_table() -> None:
    """A request's ``ModelUsage`` carries its cost by the runtime's prices, summed in
    ``agent.usage.cost``; a model without a price has ``cost=None``."""
    prices = {"scripted": Price(input=1_000_000, output=2_000_000)}
    async with ag.open_runtime(prices=prices) as root:
        priced = (await root.agents.create(model=ScriptedModel(["a b c"]))).agent
        unpriced = (await root.agents.create(model=ScriptedModel(["a"], name="mystery"))).agent
        for agent in (priced, unpriced):
            agent.prompt("one two")
            await agent.when_idle()
        (usage,) = _usages(priced)
        assert (usage.input_tokens, usage.output_tokens, usage.cost) == (2, 3, 2 * 1 + 3 * 2)
        assert priced.usage.cost == 8
        assert [u.cost for u in _usages(unpriced)] == [None]
        assert unpriced.usage.cost is None


async def test_a_cost_budget_stops_the_agent_that_spent_it() -> None:
    """``cost`` is spent when the requests' costs reach it."""
    prices = PriceTable({"scripted": Price(input=0, output=1_000_000)})
    async with ag.open_runtime(prices=prices) as root:
        agent = (
            await root.agents.create(
                model=ScriptedModel(["a b c", "d"]), budget=ta.Budget(cost=2.5)
            )
        ).agent
        for text in ("one", "two"):
            agent.prompt(text)
            await agent.when_idle()
        assert _ends(agent)[-1].cause == ta.BudgetExhausted(agent.id, "cost", 3, 2.5)


def test_a_dated_model_name_has_the_price_of_its_model() -> None:
    """``gpt-4o-2024-08-06`` is priced as ``gpt-4o``; an unknown model has no cost."""
    table = ta.model.DEFAULT_PRICES
    assert table.price("gpt-4o-2024-08-06") == table.price("gpt-4o")
    assert table.cost("gpt-4o", 1_000_000, 1_000_000) == pytest.approx(12.5)
    assert table.cost("no-such-model", 1, 1) is None


async def _spawn(ctx: ag.ToolContext, params: None) -> str:
    child = await ctx.start_child(
        ScriptedModel(["one two three four five"]), budget=ta.Budget(turns=5)
    )
    return await child.agent.ask("go")


async def test_a_child_started_by_a_tool_spends_its_callers_budget() -> None:
    """``ctx.start_child(budget=...)`` records the child's own budget, and the child's
    answer spends the calling agent's: the caller's turn, waiting in the tool, stops."""
    model = ScriptedModel([[CallTool("spawn")], "never"])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(ag.Tool("spawn", "start a child", None, _spawn)))
        parent = (await root.agents.create(budget=ta.Budget(output_tokens=3))).agent
        parent.prompt("delegate")
        await parent.when_idle()
        ends = [r for r in parent.session.records if isinstance(r, TurnEnded)]
        assert [e.cause for e in ends] == [ta.BudgetExhausted(parent.id, "output_tokens", 5, 3)]
        (result,) = [r for r in parent.session.records if isinstance(r, ToolCallEnded)]
        assert result.started
        (child,) = [r for r in root.agents.list() if r.parent is parent]
        assert child.config.budget == ta.Budget(turns=5)


async def test_two_task_children_stop_with_their_parents_spent_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A parent calls ``task`` twice in one step under a budget of 3 output tokens: the
    first child's answer spends it, so the second child (still streaming) and the parent's
    turn stop with the parent's ``BudgetExhausted``; an agent outside the subtree answers."""
    model = ScriptedModel(
        [
            [
                CallTool("task", {"agent": "slow", "prompt": "one two three four"}),
                CallTool("task", {"agent": "slow", "prompt": "five six seven eight nine ten"}),
            ]
        ]
    )
    async with ag.open_runtime() as root:
        await root.agents.define("slow", description="slow echo", model="echo?delay=1")
        parent = (
            await root.agents.create(model, tools=["task"], budget=ta.Budget(output_tokens=3))
        ).agent
        sibling = (await root.agents.create("echo?delay=1")).agent
        parent.prompt("go")
        sibling.prompt("a b c d e f")
        await trio.sleep(2.5)  # both children are mid-stream
        children = parent.children
        assert len(children) == 2
        await parent.when_idle()
        await sibling.when_idle()
        cause = ta.BudgetExhausted(parent.id, "output_tokens", 4, 3)
        assert [(e.stop_reason, e.cause) for e in _ends(parent)] == [(StopReason.CANCELLED, cause)]
        # The shorter answer spent the budget; the longer one was cut, with no usage.
        seen = set()
        for child in children:
            stored = await root.sessions.load(child.id)
            try:
                (end,) = [r for r in stored.records if isinstance(r, TurnEnded)]
                outputs = [r.output_tokens for r in stored.records if isinstance(r, ModelUsage)]
                seen.add((end.stop_reason, end.cause, tuple(outputs)))
            finally:
                await root.sessions.abandon(stored)
        assert seen == {(StopReason.COMPLETED, None, (4,)), (StopReason.CANCELLED, cause, ())}
        child_ends = [r for r in parent.session.records if isinstance(r, ChildEnded)]
        assert {(e.stop_reason, e.cause) for e in child_ends} == {
            (StopReason.COMPLETED, None),
            (StopReason.CANCELLED, cause),
        }
        assert [(e.stop_reason, e.cause) for e in _ends(sibling)] == [(StopReason.COMPLETED, None)]
        assert set(root.agents.list()) == {parent, sibling}


async def _linger(ctx: ag.ToolContext, params: None) -> str:
    try:
        await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            await trio.sleep(10)  # a slow cleanup: the agent stays "disposing" meanwhile


async def test_a_spent_budget_stops_the_children_of_an_owner_being_disposed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The owner is being disposed (its cancel does nothing) while two children stream: the
    first child's answer spends the owner's budget, and the other child is stopped then,
    not when the disposal reaches it."""
    async with ag.open_runtime() as root:
        await root.plugin(Tools(ag.Tool("linger", "waits", None, _linger)))
        handle = await root.agents.create(
            model=ScriptedModel([[CallTool("linger")]]), budget=ta.Budget(output_tokens=3)
        )
        parent = handle.agent
        short = (await root.agents.create("echo?delay=1", parent=parent)).agent
        long = (await root.agents.create("echo?delay=1", parent=parent)).agent
        parent.prompt("go")
        short.prompt("one two three four")
        long.prompt("five six seven eight nine ten")
        await trio.sleep(0.5)
        await handle.dispose()
        cause = ta.BudgetExhausted(parent.id, "output_tokens", 4, 3)
        assert [(e.stop_reason, e.cause) for e in _ends(long)] == [(StopReason.CANCELLED, cause)]
        assert _usages(long) == []
        assert [u.output_tokens for u in _usages(short)] == [4]
