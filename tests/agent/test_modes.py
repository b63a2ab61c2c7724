"""Modes (ask, edit, plan) and the model switch of a running agent, in plain trio."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import Tools
from trio_agents.model import CallTool, ModelSpecError, Say, ScriptedModel
from trio_agents.session import AgentConfigured, JsonlStore, ModeChanged, ToolCallEnded


def recorder(name: str, ran: list[str], *, read_only: bool = False) -> ag.Tool:
    """A tool named ``name`` that notes each call in ``ran``."""

    async def fn(ctx: ag.ToolContext, params: None) -> str:
        ran.append(name)
        return f"{name} ran"

    return ag.Tool(name, f"the tool {name}", None, fn, read_only=read_only)


def calling(*names: str) -> ScriptedModel:
    """One turn that calls each tool of ``names`` in turn, then says ``done``."""
    return ScriptedModel([*([CallTool(n)] for n in names), [Say("done")]])


def ended(agent: ag.Agent) -> dict[str, ToolCallEnded]:
    return {r.name: r for r in agent.session.records if isinstance(r, ToolCallEnded)}


async def test_plan_mode_refuses_changing_tools_and_runs_readers() -> None:
    """plan: bash, write_file and an unmarked tool are refused unstarted; readers run."""
    ran: list[str] = []
    tools = [
        recorder("bash", ran),
        recorder("write_file", ran),
        recorder("deploy", ran),
        recorder("grep", ran),
        recorder("lookup", ran, read_only=True),
    ]
    model = calling("bash", "write_file", "deploy", "grep", "lookup")
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(*tools))
        agent = (await root.agents.create()).agent
        assert agent.set_mode("plan") is ag.MODES[2]
        agent.prompt("go")
        await agent.when_idle()
        results = ended(agent)
    assert ran == ["grep", "lookup"]
    for name in ("bash", "write_file", "deploy"):
        result = results[name]
        assert (result.is_error, result.started) == (True, False)
        assert re.match(rf"^tool '{name}' is not available in the 'plan' mode \(", result.content)
    assert not results["lookup"].is_error


async def test_edit_mode_runs_file_edits_unasked_and_still_asks_for_commands() -> None:
    """edit: write_file runs although approval is required; bash, asked with nobody to ask,
    is refused."""
    ran: list[str] = []
    async with ag.open_runtime(model=calling("write_file", "bash")) as root:
        await root.plugin(Tools(recorder("write_file", ran), recorder("bash", ran)))
        root.get("tools").require_approval(["write_file", "bash"])
        agent = (await root.agents.create()).agent
        agent.set_mode("edit")
        agent.prompt("go")
        await agent.when_idle()
        results = ended(agent)
    assert ran == ["write_file"]
    assert re.match(r"^tool 'bash' needs approval and nobody can be asked", results["bash"].content)


async def test_the_ask_mode_keeps_the_approval_rules() -> None:
    """ask (every agent's first mode): write_file is asked as configured (nobody: refused)."""
    ran: list[str] = []
    async with ag.open_runtime(model=calling("write_file")) as root:
        await root.plugin(Tools(recorder("write_file", ran)))
        root.get("tools").require_approval(["write_file"])
        agent = (await root.agents.create()).agent
        assert agent.mode.id == "ask"
        agent.prompt("go")
        await agent.when_idle()
    assert ran == []


async def test_a_mode_is_recorded_and_a_resumed_agent_is_in_it(tmp_path: Path) -> None:
    """set_mode writes ModeChanged; the resumed agent is in the latest mode and refuses."""
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store) as root:
        handle = await root.agents.create(session_id="moded")
        handle.agent.set_mode("plan")
        handle.agent.set_mode("edit")
        handle.agent.set_mode("plan")
        await handle.dispose()
        ran: list[str] = []
        await root.plugin(Tools(recorder("bash", ran)))
        resumed = (await root.agents.resume("moded", model=calling("bash"))).agent
        assert resumed.mode.id == "plan"
        changes = [r.mode for r in resumed.session.records if isinstance(r, ModeChanged)]
        assert changes == ["plan", "edit", "plan"]
        resumed.prompt("go")
        await resumed.when_idle()
    assert ran == []


async def test_a_child_follows_its_parents_mode_at_the_time_of_the_call() -> None:
    """A child with no mode of its own is in its parent's, as it is now."""
    async with ag.open_runtime() as root:
        parent = (await root.agents.create()).agent
        child = (await root.agents.create(parent=parent)).agent
        assert child.mode.id == "ask"
        parent.set_mode("plan")
        assert child.mode.id == "plan"
        child.set_mode("edit")
        parent.set_mode("ask")
        assert child.mode.id == "edit"


async def test_an_unknown_mode_is_refused_and_changes_nothing() -> None:
    """set_mode('yolo') raises UnknownModeError naming the modes; nothing is recorded."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create()).agent
        before = len(agent.session.records)
        with pytest.raises(
            ag.UnknownModeError, match=r"^unknown mode 'yolo'; the modes are ask, edit, plan$"
        ):
            agent.set_mode("yolo")
        assert agent.mode.id == "ask"
        assert len(agent.session.records) == before


async def test_set_model_answers_the_next_request_and_a_resume_keeps_it(tmp_path: Path) -> None:
    """The switched model answers the next turn; AgentConfigured records its spec, and a
    resume rebuilds it."""
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store, model=ScriptedModel([[Say("first")]])) as root:
        handle = await root.agents.create(session_id="switch")
        agent = handle.agent
        assert await agent.ask("one") == "first"
        switched = agent.set_model("echo")
        assert switched.name == agent.model.name
        assert await agent.ask("two") == "two"
        assert agent.config.model == "echo"
        latest = [r for r in agent.session.records if isinstance(r, AgentConfigured)][-1]
        assert (latest.model, latest.model_name) == ("echo", switched.name)
        await handle.dispose()
        resumed = (await root.agents.resume("switch")).agent
        assert await resumed.ask("three") == "three"


async def test_set_model_with_a_bad_spec_changes_nothing() -> None:
    """A spec that names no model raises ModelSpecError; the agent keeps its model."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create()).agent
        before, records = agent.model, len(agent.session.records)
        with pytest.raises(ModelSpecError):
            agent.set_model("nosuch:thing")
        assert agent.model is before
        assert len(agent.session.records) == records


async def test_a_mode_change_mid_turn_applies_to_the_next_tool_call() -> None:
    """A turn that has called one tool meets the new mode at its next call."""
    ran: list[str] = []
    gate = trio.Event()

    async def first(ctx: ag.ToolContext, params: None) -> str:
        ran.append("first")
        await gate.wait()
        return "ok"

    tools = [ag.Tool("first", "the first", None, first), recorder("second", ran)]
    async with ag.open_runtime(model=calling("first", "second")) as root:
        await root.plugin(Tools(*tools))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        assert ran == ["first"]
        agent.set_mode("plan")
        gate.set()
        await agent.when_idle()
        changed = [r for r in agent.session.records if isinstance(r, ModeChanged)]
    assert ran == ["first"]
    assert changed[0].turn_id == "t-1"
