"""Random interleavings of the agent lifecycle, checked after every step.

Hypothesis generates a program (a list of operations on a few agent slots); one ``trio.run``
with an autojumping :class:`trio.testing.MockClock` executes it, and the invariants are checked
after every operation. Running each example inside one trio run keeps the concurrency real
(turns run while later operations arrive) and deterministic (the mock clock and
``wait_all_tasks_blocked`` decide every interleaving, not wall time).
"""

from __future__ import annotations

from typing import Literal, get_args

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agents.agent as ag
from tests.helpers import budget
from trio_agents.kernel import Context, Fiber
from trio_agents.model import ScriptedModel
from trio_agents.session import Record, TurnEnded, TurnStarted, UserMessage

SLOTS = 3

Op = Literal[
    "create",
    "create_owned",
    "prompt",
    "steer",
    "cancel",
    "discard",
    "dispose",
    "unload_owner",
    "advance",
    "settle",
]


@attrs.frozen
class Step:
    op: Op
    slot: int
    arg: int


steps = st.lists(
    st.builds(
        Step,
        st.sampled_from(get_args(Op)),
        st.integers(0, SLOTS - 1),
        st.integers(0, 3),
    ),
    max_size=25,
)


@attrs.define
class Slot:
    handle: ag.AgentHandle
    owner: Fiber | None = None
    disposed: bool = False


class Owner:
    """A plugin that creates one agent and so co-owns it."""

    name = "owner"
    inject = ("agents",)

    def __init__(self) -> None:
        self.handle: ag.AgentHandle | None = None

    async def apply(self, ctx: Context, config: None) -> None:
        self.handle = await ctx.agents.create()


def check(root: Context, slots: dict[int, Slot], forbidden: set[tuple[str, str]]) -> None:
    live = {a.id for a in root.agents.list()}
    for slot in slots.values():
        agent = slot.handle.agent
        records: tuple[Record, ...] = agent.session.records
        assert [r.seq for r in records] == list(range(len(records)))
        started = [r.turn_id for r in records if isinstance(r, TurnStarted)]
        ended = [r.turn_id for r in records if isinstance(r, TurnEnded)]
        assert len(set(ended)) == len(ended)
        assert set(ended) <= set(started)
        assert len(started) - len(ended) <= 1
        if slot.disposed:
            assert agent.id not in live
            assert len(started) == len(ended)
        claimed = {(agent.id, r.message_id) for r in records if isinstance(r, UserMessage)}
        assert not claimed & forbidden


async def execute(program: list[Step]) -> None:
    async with ag.open_runtime(model=ScriptedModel.echo(delay=1.0)) as root:
        slots: dict[int, Slot] = {}
        forbidden: set[tuple[str, str]] = set()
        for step in program:
            slot = slots.get(step.slot)
            agent = slot.handle.agent if slot is not None and not slot.disposed else None
            if step.op == "create" and agent is None:
                slots[step.slot] = Slot(await root.agents.create())
            elif step.op == "create_owned" and agent is None:
                owner = Owner()
                fiber = await root.plugin(owner)
                assert owner.handle is not None
                slots[step.slot] = Slot(owner.handle, fiber)
            elif agent is None or slot is None:
                pass
            elif step.op == "prompt":
                agent.prompt(f"p{step.arg}")
            elif step.op == "steer":
                agent.steer(f"s{step.arg}")
            elif step.op == "cancel":
                queued = {(agent.id, m.id) for m in agent.queued()}
                agent.cancel(keep_inbox=step.arg == 0)
                if step.arg != 0:
                    forbidden |= queued
            elif step.op == "discard":
                queued_ids = [m.id for m in agent.queued()]
                if queued_ids:
                    target = queued_ids[step.arg % len(queued_ids)]
                    assert agent.discard(target) is True
                    forbidden.add((agent.id, target))
            elif step.op == "dispose":
                await slot.handle.dispose()
                slot.disposed = True
            elif step.op == "unload_owner" and slot.owner is not None:
                await slot.owner.dispose()
                slot.disposed = True
            elif step.op == "advance":
                await trio.sleep(0.5 * (step.arg + 1))
            elif step.op == "settle":
                await trio.testing.wait_all_tasks_blocked()
            check(root, slots, forbidden)
        for slot in slots.values():
            if not slot.disposed:
                await slot.handle.agent.when_idle()
        check(root, slots, forbidden)


@settings(
    max_examples=budget.examples(60, 3000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps)
def test_random_lifecycles_keep_the_invariants(program: list[Step]) -> None:
    """No agent listed after dispose; turns paired; cancelled messages never run; seq contiguous."""
    trio.run(execute, program, clock=trio.testing.MockClock(autojump_threshold=0))
