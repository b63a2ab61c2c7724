"""Random trees of agents, children, budgets and cancels, checked after every step.

Hypothesis generates a program of operations on a few slots (create an agent, possibly as
the child of another, with or without a budget; prompt; cancel; dispose; let time pass); one
``trio.run`` with an autojumping clock runs it, children streaming concurrently with their
parents and siblings. After every step: no child outlives its parent; what a subtree spent
never exceeds a budget by more than one request's usage (requests: not at all); every turn
of a disposed agent is closed, and at the end every stored session's turns are closed.
"""

from __future__ import annotations

from typing import Literal, get_args

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers import budget
from trio_agents.model import ScriptedModel
from trio_agents.session import (
    MemoryStore,
    ModelUsage,
    Record,
    SessionAppended,
    TurnEnded,
    TurnStarted,
)

SLOTS = 4

Op = Literal[
    "create", "create_child", "prompt", "prompt_all", "cancel", "dispose", "advance", "settle"
]
Kind = Literal["output_tokens", "requests"]


@attrs.frozen
class Step:
    op: Op
    slot: int
    arg: int
    limit: tuple[Kind, int] | None


limits = st.none() | st.tuples(st.sampled_from(get_args(Kind)), st.integers(0, 6))
#: The tree made before the steps: each agent's parent (an earlier one; else none) and
#: budget. Most are children: budgets that reach descendants are what is checked.
trees = st.lists(st.tuples(st.sampled_from([None, 0, 0, 1, 2]), limits), min_size=2, max_size=SLOTS)
#: The operations, the ones that make work (a prompt to every live agent) most often.
ops = st.sampled_from([*get_args(Op), "prompt_all", "prompt_all", "advance"])
steps = st.lists(
    st.builds(Step, ops, st.integers(0, SLOTS - 1), st.integers(0, 4), limits),
    max_size=20,
)


@attrs.define
class Node:
    handle: ag.AgentHandle
    parent: Node | None
    limit: tuple[Kind, int] | None
    disposed: bool = False

    @property
    def agent(self) -> ag.Agent:
        return self.handle.agent

    def ancestors(self) -> list[Node]:
        found, node = [], self.parent
        while node is not None:
            found.append(node)
            node = node.parent
        return found


def _budget(limit: tuple[Kind, int] | None) -> ta.Budget | None:
    return ta.Budget(**{limit[0]: limit[1]}) if limit is not None else None


def _usages(node: Node) -> list[ModelUsage]:
    return [r for r in node.agent.session.records if isinstance(r, ModelUsage)]


def _open_turns(records: tuple[Record, ...]) -> set[str]:
    started = {r.turn_id for r in records if isinstance(r, TurnStarted)}
    return started - {r.turn_id for r in records if isinstance(r, TurnEnded)}


def check(root: ta.kernel.Context, nodes: list[Node], order: list[ModelUsage]) -> None:
    live = {a.id for a in root.agents.list()}
    for node in nodes:
        records = node.agent.session.records
        if node.disposed:
            assert node.agent.id not in live
            assert _open_turns(records) == set()
        elif node.parent is not None:
            assert not node.parent.disposed, "a child outlived its parent"
            assert node.parent.agent.id in live
        for record in records:
            if isinstance(record, TurnEnded) and isinstance(record.cause, ta.BudgetExhausted):
                owners = {n.agent.id for n in [node, *node.ancestors()]}
                assert record.cause.owner_id in owners
        if node.limit is None:
            continue
        kind, allowed = node.limit
        subtree = {id(u) for n in nodes if n is node or node in n.ancestors() for u in _usages(n)}
        # In the order they were recorded: once the budget is spent, nothing more is.
        spent = 0
        for usage in (u for u in order if id(u) in subtree):
            assert spent < allowed, f"{kind} {allowed} spent ({spent}) before {usage}"
            spent += 1 if kind == "requests" else usage.output_tokens
        if kind == "requests":
            assert spent <= allowed


async def execute(
    tree: list[tuple[int | None, tuple[Kind, int] | None]], program: list[Step]
) -> None:
    store = MemoryStore()
    async with ag.open_runtime(store=store, model=ScriptedModel.echo(delay=1.0)) as root:
        nodes: list[Node] = []
        slots: dict[int, Node] = {}
        order: list[ModelUsage] = []

        def on_append(event: SessionAppended) -> None:
            if isinstance(event.record, ModelUsage):
                order.append(event.record)

        root.on(SessionAppended, on_append)
        for index, (parent_index, limit) in enumerate(tree):
            parent = slots.get(parent_index) if parent_index is not None else None
            handle = await root.agents.create(
                parent=parent.agent if parent is not None else None, budget=_budget(limit)
            )
            slots[index] = Node(handle, parent, limit)
            nodes.append(slots[index])
        for step in program:
            node = slots.get(step.slot)
            agent = node.agent if node is not None and not node.disposed else None
            if step.op in ("create", "create_child") and agent is None:
                parent = slots.get(step.arg % SLOTS) if step.op == "create_child" else None
                if parent is not None and parent.disposed:
                    parent = None
                handle = await root.agents.create(
                    parent=parent.agent if parent is not None else None, budget=_budget(step.limit)
                )
                slots[step.slot] = Node(handle, parent, step.limit)
                nodes.append(slots[step.slot])
            elif agent is None or node is None:
                pass
            elif step.op == "prompt":
                agent.prompt(" ".join(["w"] * (step.arg + 1)))
            elif step.op == "prompt_all":
                for other in nodes:
                    if not other.disposed:
                        other.agent.prompt(" ".join(["w"] * (step.arg + 1)))
            elif step.op == "cancel":
                agent.cancel()
            elif step.op == "dispose":
                await node.handle.dispose()
                for other in nodes:
                    if other is node or node in other.ancestors():
                        other.disposed = True
            elif step.op == "advance":
                await trio.sleep(0.5 * (step.arg + 1))
            elif step.op == "settle":
                await trio.testing.wait_all_tasks_blocked()
            check(root, nodes, order)
        for node in nodes:
            if not node.disposed:
                await node.agent.when_idle()
        check(root, nodes, order)
        for node in reversed(nodes):
            if not node.disposed:
                await node.handle.dispose()
                node.disposed = True
        check(root, nodes, order)
        for node in nodes:
            stored = await store.load(node.agent.id)
            assert _open_turns(stored.records) == set()
            await store.abandon(stored)


@settings(
    max_examples=budget.examples(100, 2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(trees, steps)
def test_random_trees_keep_budgets_and_ownership(
    tree: list[tuple[int | None, tuple[Kind, int] | None]], program: list[Step]
) -> None:
    """After every step no child outlives its parent, no budget is exceeded by more than one
    request's usage, and every disposed agent's turns are closed (durably at the end)."""
    trio.run(execute, tree, program, clock=trio.testing.MockClock(autojump_threshold=0))
