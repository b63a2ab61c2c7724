"""The agent package's classes take their slots from attrs (issue #38 item 3): no module of
``trio_agents/agent/`` writes a ``__slots__`` list that repeats its ``__init__``, and the
objects an idle agent is made of carry no instance ``__dict__``."""

from __future__ import annotations

import attrs

import trio_agents as ta
from tests.helpers.paths import ROOT
from tests.helpers.slots import hand_written_slots

AGENT_PACKAGE = ROOT / "trio_agents" / "agent"


def test_no_agent_class_writes_its_own_slots() -> None:
    """The agent package's classes are attrs classes, slotted by attrs, never by hand."""
    assert hand_written_slots(AGENT_PACKAGE, at_least=31) == []


async def test_the_objects_of_an_idle_agent_are_slotted_attrs_classes() -> None:
    """An idle agent, its parts, approvals, inbox, history and meter have no __dict__."""
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        handle = await root.agents.create()
        agent = handle.agent
        parts = agent._parts
        objects = (agent, parts, parts.approvals, parts.inbox, parts.history, parts.meter)
        for obj in objects:
            assert attrs.has(type(obj)), type(obj).__name__
            assert not hasattr(obj, "__dict__"), type(obj).__name__
        await handle.dispose()
