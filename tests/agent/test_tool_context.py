"""What a tool reaches through its ``ToolContext``: the application's deps, the calling
agent's usage, and children of the calling agent (``ctx.start_child``)."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import attrs

import trio_agents.agent as ag
from tests.helpers.paths import TYPING
from tests.helpers.support import Tools
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import ToolCallEnded


@attrs.frozen
class Deps:
    name: str


async def _name(ctx: ag.ToolContext[Deps], params: None) -> str:
    return ctx.deps.name


async def _requests(ctx: ag.ToolContext, params: None) -> str:
    usage = ctx.usage
    return "none" if usage is None else str(usage.requests)


def _calls(name: str, times: int = 1) -> ScriptedModel:
    return ScriptedModel([[CallTool(name)] for _ in range(times)] + [[Say("done")]])


def _results(agent: ag.Agent) -> list[str]:
    return [r.content for r in agent.session.records if isinstance(r, ToolCallEnded)]


def _typed_tool_module() -> ModuleType:
    # Loaded by path: the directory is named after what it checks (typing), not importable.
    path = TYPING / "typed_deps_tool.py"
    spec = importlib.util.spec_from_file_location("typed_deps_tool", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_a_tool_reads_the_runtime_deps() -> None:
    """``open_runtime(deps=...)`` reaches an agent's tools as ``ctx.deps``, in a turn or not."""
    async with ag.open_runtime(model=_calls("name"), deps=Deps("runtime")) as root:
        await root.plugin(Tools(ag.Tool("name", "the deps' name", None, _name)))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        assert _results(agent) == ["runtime"]
        # A script's call on the agent's behalf, outside its turns, sees them too.
        assert (await root.tools.invoke("name", {}, agent)).content == "runtime"


async def test_the_tool_decorator_takes_a_typed_context() -> None:
    """``@tool`` knows ``ctx: ToolContext[Deps]`` is the context, not an argument."""

    @ag.tool
    async def greet(ctx: ag.ToolContext[Deps], who: str) -> str:
        """Greet someone by the deps' name."""
        return f"{ctx.deps.name} greets {who}"

    assert list(greet.spec().parameters["properties"]) == ["who"]
    model = ScriptedModel([[CallTool("greet", {"who": "you"})], [Say("done")]])
    async with ag.open_runtime(model=model, deps=Deps("runtime")) as root:
        await root.plugin(Tools(greet))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        assert _results(agent) == ["runtime greets you"]


async def test_an_agent_s_own_deps_replace_the_runtime_s_and_are_not_stored() -> None:
    """``create(deps=...)`` wins over the runtime's; a resume without deps gets the runtime's."""
    async with ag.open_runtime(deps=Deps("runtime")) as root:
        await root.plugin(Tools(ag.Tool("name", "the deps' name", None, _name)))
        handle = await root.agents.create(model=_calls("name"), deps=Deps("own"))
        handle.agent.prompt("go")
        await handle.agent.when_idle()
        await handle.dispose()
        resumed = await root.agents.resume(handle.agent.id, model=_calls("name"))
        resumed.agent.prompt("again")
        await resumed.agent.when_idle()
        await resumed.dispose()
        given = await root.agents.resume(handle.agent.id, model=_calls("name"), deps=Deps("new"))
        given.agent.prompt("once more")
        await given.agent.when_idle()
        assert _results(given.agent) == ["own", "runtime", "new"]


async def test_usage_counts_the_requests_of_the_running_turn() -> None:
    """``ctx.usage`` is read at each call: the second call of a turn sees both requests."""
    async with ag.open_runtime(model=_calls("requests", times=2)) as root:
        await root.plugin(Tools(ag.Tool("requests", "requests so far", None, _requests)))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        assert _results(agent) == ["1", "2"]
        assert agent.usage.requests == 3


async def test_a_call_without_an_agent_has_no_usage_deps_or_children() -> None:
    """Without an agent: no usage, no deps, and ``start_child`` is refused in one line."""

    async def spawn(ctx: ag.ToolContext, params: None) -> str:
        await ctx.start_child()
        return "started"

    async with ag.open_runtime(deps=Deps("runtime")) as root:
        await root.plugin(
            Tools(
                ag.Tool("requests", "requests so far", None, _requests),
                ag.Tool("spawn", "start a child", None, spawn),
            )
        )
        assert (await root.tools.invoke("requests", {})).content == "none"
        refused = await root.tools.invoke("spawn", {})
        assert refused.is_error
        assert re.fullmatch(
            r"tool 'spawn' failed: NoCallingAgentError: start_child\(\) starts a child of the "
            r"calling agent, and this tool was called without one; call it through an agent's "
            r"turn, or pass the agent to ToolRegistry\.invoke\(\)",
            refused.content,
        )
        assert root.agents.list() == ()
    assert ag.ToolContext().deps is None


async def test_a_child_started_by_a_tool_is_disposed_before_its_parent() -> None:
    """A tool's child is owned by the calling agent: disposing the parent disposes it first."""
    children: list[ag.AgentHandle] = []

    async def spawn(ctx: ag.ToolContext[Deps], params: None) -> str:
        child = await ctx.start_child(instructions="a helper")
        children.append(child)
        return child.agent.id

    disposed: list[str] = []
    async with ag.open_runtime(model=_calls("spawn"), deps=Deps("runtime")) as root:
        root.on(ag.AgentDisposed, lambda event: disposed.append(event.agent_id))
        await root.plugin(Tools(ag.Tool("spawn", "start a child", None, spawn)))
        parent = await root.agents.create()
        parent.agent.prompt("go")
        await parent.agent.when_idle()
        [child] = children
        ids = [child.agent.id, parent.agent.id]
        assert _results(parent.agent) == ids[:1]
        assert child.agent.parent is parent.agent
        assert child.agent in root.agents.list()
        await parent.dispose()
        assert disposed == ids
        assert root.agents.list() == ()


async def test_the_typed_tool_of_tests_typing_runs() -> None:
    """The mypy-checked tool reads its typed deps, the usage and starts a child."""
    module = _typed_tool_module()
    deps = module.Deps(module.Database("pg"))
    async with ag.open_runtime(model=_calls("lookup"), deps=deps) as root:
        await root.plugin(Tools(module.lookup_tool))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        assert _results(agent) == ["pg 1 True"]
