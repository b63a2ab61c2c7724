"""The agents service: ownership of handles, declared agents, model resolution."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents._base import InvalidTransitionError
from trio_agents.kernel import Context
from trio_agents.model import ModelSpecError, ScriptedModel
from trio_agents.session import TurnEnded


def owned_labels(ctx: Context) -> list[str]:
    return [label for label in ctx.fiber.statistics().entries if label.startswith("defer")]


async def test_caller_co_owns_and_loses_its_entry_when_handle_disposes() -> None:
    """The creating fiber holds a disposer entry; a handle dispose removes it."""
    async with ag.open_runtime() as root:
        before = owned_labels(root)
        handle = await root.agents.create()
        assert len(owned_labels(root)) == len(before) + 1
        await handle.dispose()
        assert owned_labels(root) == before


async def test_declared_agents_are_owned_by_the_agent_loop_only() -> None:
    """Agents declared in configuration exist at start and leave with the AgentLoop."""
    async with ag.open_runtime(agents=[ag.DeclaredAgent(id="cfg", instructions="hi")]) as root:
        agent = root.agents.get("cfg")
        assert agent is not None
        assert agent.instructions == "hi"
        assert owned_labels(root) == []
        [loop] = [f for f in root.fiber.children if f.name == "agent-loop"]
        await loop.dispose()
        assert agent.done


async def test_model_spec_strings_select_a_model_per_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """create(model="echo?delay=5") makes the agent wait 5 s of trio time per answer."""
    async with ag.open_runtime(model="echo") as root:
        agent = (await root.agents.create(model="echo?delay=5")).agent
        start = trio.current_time()
        agent.prompt("slow")
        await agent.when_idle()
        assert trio.current_time() - start >= 5
        assert [r.stop_reason.value for r in agent.session.records if isinstance(r, TurnEnded)] == [
            "completed"
        ]


async def test_unknown_model_spec_is_a_clear_error() -> None:
    """A bad spec names the valid forms and creates nothing."""
    async with ag.open_runtime() as root:
        with pytest.raises(ModelSpecError, match=r"unknown model spec"):
            await root.agents.create(model="nonsense:x")
        assert root.agents.list() == ()


async def test_scope_of_a_disposed_agent_is_refused() -> None:
    """Only a live agent has a scope (and can be a parent)."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create()
        await handle.dispose()
        with pytest.raises(ValueError, match=r"^agent .* is not live"):
            root.agents.scope_of(handle.agent)
        with pytest.raises(ValueError, match=r"^agent .* is not live"):
            await root.agents.create(parent=handle.agent)


async def test_child_agent_is_disposed_with_its_parent() -> None:
    """The parent's teardown disposes its children; they leave the registry first."""
    async with ag.open_runtime() as root:
        order: list[str] = []
        root.on(ag.AgentDisposed, lambda e: order.append(e.agent_id))
        parent = await root.agents.create(session_id="parent")
        child = await root.agents.create(session_id="child", parent=parent.agent)
        await parent.dispose()
        assert order == ["child", "parent"]
        assert child.agent.done
        assert parent.agent.children == ()


def test_agent_status_machine_refuses_illegal_transitions() -> None:
    """disposed is final: no transition leaves it."""
    from trio_agents.agent._status import AgentStatus, check_status

    assert check_status(AgentStatus.IDLE, AgentStatus.RUNNING) is AgentStatus.RUNNING
    with pytest.raises(InvalidTransitionError, match=r"^an agent cannot go from 'disposed'"):
        check_status(AgentStatus.DISPOSED, AgentStatus.IDLE)


async def test_default_model_is_the_echo_model() -> None:
    """With no model configured the runtime's default echoes."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create()).agent
        assert isinstance(agent.model, ScriptedModel)
        agent.prompt("echo me")
        await agent.when_idle()
        from trio_agents.session import AssistantMessage

        texts = [r.content for r in agent.session.records if isinstance(r, AssistantMessage)]
        assert texts == ["echo me"]
