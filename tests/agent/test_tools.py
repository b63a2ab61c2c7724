"""Tools: schemas from attrs classes, strict argument validation, the registry as an effect."""

from __future__ import annotations

import enum
import importlib
import logging
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.agent import Tool, ToolContext, ToolNameInUseError, ToolRegistry, ToolResult
from trio_agents.agent._tool_signature import tool
from trio_agents.agent._tools import tools_plugin
from trio_agents.cancel import CauseScope, UserCancel, current_cause
from trio_agents.kernel import Context, FiberState, open_root
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ToolSpec,
    Usage,
)


@attrs.frozen
class BashArgs:
    command: str = attrs.field(metadata={"description": "the shell command"})
    timeout: float | None = None
    run_in_background: bool = False


@tool(params=BashArgs)
async def bash(ctx: ToolContext, args: BashArgs) -> str:
    """Run a shell command."""
    return f"ran {args.command} (timeout={args.timeout}, bg={args.run_in_background})"


@tool(name="now", params=None)
async def now_tool(ctx: ToolContext, args: None) -> ToolResult:
    """Say the time."""
    return ToolResult("noon")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Inner:
    x: int


@attrs.frozen
class Everything:
    text: str
    count: int
    ratio: float
    flag: bool
    names: list[str]
    pair: tuple[int, ...]
    mode: Literal["fast", "slow"]
    color: Color
    inner: Inner
    extra: dict[str, int]
    anything: Any
    maybe: str | None = attrs.field(kw_only=True)
    limit: int = 10


async def _noop(ctx: ToolContext, params: object) -> str:
    return "ok"


# -- schema ----------------------------------------------------------------------------------------


def test_decorator_takes_name_and_description_from_the_function() -> None:
    """@tool defaults the name to the function name and the description to its docstring."""
    assert bash.name == "bash"
    assert bash.description == "Run a shell command."
    assert now_tool.name == "now"


def test_spec_schema_comes_from_the_attrs_class() -> None:
    """Field types, descriptions, defaults and required fields map to JSON schema."""
    assert bash.spec() == ToolSpec(
        "bash",
        "Run a shell command.",
        {
            "type": "object",
            "properties": {
                "command": {"description": "the shell command", "type": "string"},
                "timeout": {"type": ["number", "null"], "default": None},
                "run_in_background": {"type": "boolean", "default": False},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    )


def test_schema_covers_every_supported_type() -> None:
    """Every supported field type has its JSON schema form."""
    schema = Tool("all", "", Everything, _noop).spec().parameters
    assert schema["properties"] == {
        "text": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "names": {"type": "array", "items": {"type": "string"}},
        "pair": {"type": "array", "items": {"type": "integer"}},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "color": {"enum": ["red", "blue"]},
        "inner": {
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        "anything": {},
        "maybe": {"type": ["string", "null"]},
        "limit": {"type": "integer", "default": 10},
    }
    assert schema["required"] == [
        "text", "count", "ratio", "flag", "names", "pair", "mode", "color", "inner", "extra",
        "anything",
    ]  # fmt: skip


def test_tool_without_params_has_an_empty_object_schema() -> None:
    """params=None means the tool takes no arguments."""
    assert now_tool.spec().parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_unsupported_field_type_is_refused_when_the_tool_is_built() -> None:
    """A field type with no JSON schema is a TypeError naming the field."""

    @attrs.frozen
    class Bad:
        when: complex

    with pytest.raises(TypeError, match=r"^tool argument .*Bad\.when has type"):
        Tool("bad", "", Bad, _noop)


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dots.no"])
def test_invalid_tool_names_are_refused(name: str) -> None:
    """Tool names follow what model APIs accept."""
    with pytest.raises(ValueError, match=r"^a tool name is 1-64"):
        Tool(name, "", None, _noop)


def test_params_must_be_an_attrs_class() -> None:
    """A params that is not an attrs class is a TypeError."""
    with pytest.raises(TypeError, match=r"^a tool's params must be an attrs class"):
        Tool("x", "", dict, _noop)


# -- the registry ----------------------------------------------------------------------------------


async def _registry(root: Context) -> ToolRegistry:
    await root.plugin(tools_plugin)
    registry = root.get("tools")
    assert isinstance(registry, ToolRegistry)
    return registry


async def test_tools_plugin_provides_the_registry_service() -> None:
    """Applying tools_plugin publishes a ToolRegistry as 'tools'; disposing withdraws it."""
    async with open_root() as root:
        fiber = await root.plugin(tools_plugin)
        assert isinstance(root.get("tools"), ToolRegistry)
        await fiber.dispose()
        assert root.get("tools") is None


async def test_registered_tool_is_listed_and_invocable() -> None:
    """register() makes the tool reachable by get, names, specs and invoke."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(bash)
        tools.register(now_tool)
        assert tools.get("bash") is bash
        assert tools.names() == ("bash", "now")
        assert tools.specs() == (bash.spec(), now_tool.spec())
        result = await tools.invoke("bash", {"command": "ls", "timeout": 3})
        assert result == ToolResult("ran ls (timeout=3.0, bg=False)")
        assert await tools.invoke("now", {}) == ToolResult("noon")


async def test_registration_is_owned_by_the_calling_fiber() -> None:
    """A tool registered in a child plugin's apply disappears when that fiber is disposed."""

    class Provider:
        name = "provides-bash"
        inject = ("tools",)

        async def apply(self, ctx: Context, config: None) -> None:
            ctx.tools.register(bash)

    async with open_root() as root:
        tools = await _registry(root)
        fiber = await root.plugin(Provider())
        assert tools.get("bash") is bash
        assert any("ToolRegistry._unregister" in e for e in fiber.statistics().entries)
        await fiber.dispose()
        assert fiber.state is FiberState.DISPOSED
        assert tools.get("bash") is None
        tools.register(bash)
        assert tools.get("bash") is bash


async def test_closing_the_entry_unregisters_early() -> None:
    """The Entry returned by register() unregisters when closed."""
    async with open_root() as root:
        tools = await _registry(root)
        entry = tools.register(bash)
        await entry.close()
        assert tools.get("bash") is None


async def test_duplicate_name_is_refused_naming_the_owner() -> None:
    """A second tool with a registered name is a ToolNameInUseError."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(bash)
        other = Tool("bash", "another", None, _noop)
        with pytest.raises(ToolNameInUseError, match=r"^tool 'bash' is already registered by"):
            tools.register(other)
        assert tools.get("bash") is bash


async def test_a_stale_unregister_does_not_remove_a_newer_registration() -> None:
    """Closing an entry twice, after re-registration, leaves the newer tool in place."""
    async with open_root() as root:
        tools = await _registry(root)
        first = tools.register(bash)
        await first.close()
        tools.register(bash)
        await first.close()
        assert tools.get("bash") is bash


def test_register_outside_every_fiber_is_refused() -> None:
    """register() needs a calling fiber to own the registration."""
    with pytest.raises(RuntimeError, match=r"^no trio_agents fiber is running"):
        ToolRegistry().register(bash)


# -- invoke ------------------------------------------------------------------------------------


async def test_unknown_tool_is_an_error_result_listing_the_available_ones() -> None:
    """Invoking an unregistered name returns an error result, not an exception."""
    async with open_root() as root:
        tools = await _registry(root)
        assert await tools.invoke("nope", {}) == ToolResult(
            "unknown tool 'nope'; available: none", is_error=True, started=False
        )
        tools.register(now_tool)
        tools.register(bash)
        result = await tools.invoke("nope", {})
        assert result.content == "unknown tool 'nope'; available: bash, now"


async def test_invalid_arguments_list_every_problem() -> None:
    """Each wrong, missing or extra argument is reported, with where it is."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(bash)
        result = await tools.invoke(
            "bash", {"timeout": "soon", "run_in_background": 1, "shell": "zsh"}
        )
        assert result.is_error
        assert not result.started
        assert result.content.splitlines() == [
            "invalid arguments for tool 'bash' (4 problems):",
            "  - required argument missing @ arguments.command",
            "  - expected a number, got string 'soon' @ arguments.timeout",
            "  - expected a boolean, got integer 1 @ arguments.run_in_background",
            "  - unknown arguments: shell @ arguments",
        ]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"names": "abc"}, "expected an array, got string 'abc' @ arguments.names"),
        ({"names": ["a", 2]}, "expected a string, got integer 2 @ arguments.names[1]"),
        ({"count": True}, "expected an integer, got boolean True @ arguments.count"),
        ({"count": 1.5}, "expected an integer, got number 1.5 @ arguments.count"),
        ({"text": 7}, "expected a string, got integer 7 @ arguments.text"),
        ({"mode": "medium"}, "expected one of 'fast', 'slow', got string 'medium'"),
        ({"inner": {"x": "1"}}, "expected an integer, got string '1' @ arguments.inner.x"),
        ({"pair": [1, "2"]}, "expected an integer, got string '2' @ arguments.pair[1]"),
    ],
)
async def test_arguments_are_checked_as_json_without_coercion(
    arguments: dict[str, Any], problem: str
) -> None:
    """Strings are not numbers, numbers are not booleans, strings are not arrays."""
    valid: dict[str, Any] = {
        "text": "t",
        "count": 1,
        "ratio": 1,
        "flag": True,
        "names": [],
        "pair": [1, 2],
        "mode": "fast",
        "color": "red",
        "inner": {"x": 1},
        "extra": {},
        "anything": None,
    }
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("all", "", Everything, _noop))
        assert await tools.invoke("all", valid) == ToolResult("ok")
        result = await tools.invoke("all", {**valid, **arguments})
        assert result.is_error
        assert problem in result.content


async def test_valid_arguments_are_structured_into_the_params_class() -> None:
    """The tool receives an instance of its params class; absent optionals are None."""
    received: list[Everything] = []

    async def capture(ctx: ToolContext, params: Everything) -> str:
        received.append(params)
        return "ok"

    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("all", "", Everything, capture))
        arguments = {
            "text": "t", "count": 2.0, "ratio": 1, "flag": False, "names": ["a"],
            "pair": [3], "mode": "slow", "color": "blue", "inner": {"x": 4},
            "extra": {"k": 5}, "anything": [1],
        }  # fmt: skip
        assert await tools.invoke("all", arguments) == ToolResult("ok")
    assert received == [
        Everything(
            "t", 2, 1.0, False, ["a"], (3,), "slow", Color.BLUE, Inner(4), {"k": 5}, [1],
            maybe=None,
        )
    ]  # fmt: skip


async def test_tool_without_params_refuses_arguments() -> None:
    """A tool that takes no arguments reports any it was given."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(now_tool)
        result = await tools.invoke("now", {"b": 1, "a": 2})
        assert result.is_error
        assert result.content.endswith("unknown arguments: a, b @ arguments")


async def test_arguments_that_are_not_an_object_are_an_error_result() -> None:
    """A non-mapping arguments value is reported, not raised."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(bash)
        result = await tools.invoke("bash", ["ls"])  # type: ignore[arg-type]
        assert result.is_error
        assert "expected an object, got array @ arguments" in result.content


async def test_a_raising_tool_becomes_an_error_result_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An Exception from the tool is reported as 'tool x failed: Type: message'."""

    async def broken(ctx: ToolContext, params: None) -> str:
        raise KeyError("missing")

    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("broken", "", None, broken))
        with caplog.at_level(logging.ERROR, logger="trio_agents"):
            result = await tools.invoke("broken", {})
    assert result == ToolResult("tool 'broken' failed: KeyError: 'missing'", is_error=True)
    assert "tool 'broken' failed" in caplog.text


async def test_a_tool_returning_the_wrong_type_is_an_error_result() -> None:
    """A tool returns str, ToolResult, or a JSON value; anything else is an error result."""

    async def wrong(ctx: ToolContext, params: None) -> object:
        return object()

    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("wrong", "", None, wrong))
        result = await tools.invoke("wrong", {})
    assert result.is_error
    assert result.content.startswith("tool 'wrong' returned object, which is not JSON (")
    assert result.content.endswith(
        "tools return str, ToolResult, a JSON value or an attrs instance"
    )


async def test_tool_sees_the_agent_call_id_and_turn_scope() -> None:
    """ToolContext carries what invoke() was given: the caller's agent and turn, the call id,
    the scope (the caller's turn scope unless one is given)."""
    seen: list[ToolContext] = []

    async def look(ctx: ToolContext, params: None) -> str:
        seen.append(ctx)
        return "ok"

    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("look", "", None, look))
        with CauseScope() as turn, CauseScope() as own:
            caller = ag.Caller(agent_id="a-1", turn_id="t-3", scope=turn)
            await tools.invoke("look", {}, caller, call_id="call-7")
            await tools.invoke("look", {}, caller, call_id="call-8", scope=own)
    assert [(c.agent, c.call_id, c.scope, c.turn_id) for c in seen] == [
        (None, "call-7", turn, "t-3"),
        (None, "call-8", own, "t-3"),
    ]


async def test_cancellation_propagates_untouched_and_on_start_says_it_began(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """trio.Cancelled from a running tool is not turned into a result; on_start ran first."""
    causes: list[object] = []
    started: list[bool] = []

    async def slow(ctx: ToolContext, params: None) -> str:
        try:
            await trio.sleep(100)
        finally:
            causes.append(current_cause())
        return "never"  # pragma: no cover

    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("slow", "", None, slow))
        results: list[ToolResult] = []
        with CauseScope() as scope:

            async def cancel_soon() -> None:
                await trio.sleep(1)
                scope.cancel(UserCancel())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_soon)
                on_start = lambda: started.append(True)  # noqa: E731
                results.append(await tools.invoke("slow", {}, scope=scope, on_start=on_start))
    assert scope.cancelled_caught
    assert results == []
    assert started == [True]
    assert causes == [UserCancel()]


async def test_invoke_is_a_checkpoint_even_for_an_unknown_tool() -> None:
    """A cancelled caller is stopped at invoke() before anything runs."""
    started: list[bool] = []
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(now_tool)
        with trio.CancelScope() as scope:
            scope.cancel()
            await tools.invoke("now", {}, on_start=lambda: started.append(True))
        assert scope.cancelled_caught
        with trio.CancelScope() as scope:
            scope.cancel()
            await tools.invoke("missing", {})
        assert scope.cancelled_caught
    assert started == []


# -- the specs cache -------------------------------------------------------------------------------


async def test_specs_are_computed_once_until_a_tool_comes_or_goes() -> None:
    """specs() is the same tuple until register or unregister; each change is seen at once."""
    async with open_root() as root:
        tools = await _registry(root)
        empty = tools.specs()
        assert empty == ()
        first = tools.register(bash)
        specs = tools.specs()
        assert specs == (bash.spec(),)
        assert tools.specs() is specs
        second = tools.register(now_tool)
        both = tools.specs()
        assert both == (bash.spec(), now_tool.spec())
        await first.close()
        assert tools.specs() == (now_tool.spec(),)
        after = tools.specs()
        await first.close()  # closing it again changes nothing, and keeps the cache
        assert tools.specs() is after
        await second.close()
        assert tools.specs() == ()


@attrs.define(eq=False)
class _ToolsSeen:
    """A model that notes the tools offered in each request and answers at once."""

    name: str = "tools-seen"
    context_window: int | None = None
    offered: list[list[tuple[str, str]]] = attrs.field(factory=list)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.offered.append([(s.name, s.description) for s in request.tools])
        await trio.lowlevel.checkpoint()
        yield Finished(FinishReason.STOP, Usage())


async def _turn(agent: ag.Agent) -> None:
    agent.prompt("go")
    await agent.when_idle()


async def test_each_request_offers_the_tools_registered_at_that_moment() -> None:
    """An agent's requests follow register and unregister, whole and with a tools filter."""
    model = _ToolsSeen()
    async with ag.open_runtime(model=model) as root:
        registry = root.get("tools")
        assert isinstance(registry, ToolRegistry)
        every = (await root.agents.create()).agent
        only_now = (await root.agents.create(tools=["now"])).agent
        entry = registry.register(bash)
        await _turn(every)
        await _turn(only_now)
        registry.register(now_tool)
        await _turn(every)
        await _turn(only_now)
        await entry.close()
        await _turn(every)
        await _turn(only_now)
    bash_, now_ = ("bash", "Run a shell command."), ("now", "Say the time.")
    assert model.offered == [[bash_], [], [bash_, now_], [now_], [now_], [now_]]


TOOL_MODULE = '''
from trio_agents.agent import ToolContext, tool

name = "described"
inject = ("tools",)


@tool(params=None)
async def described(ctx: ToolContext, params: None) -> str:
    """{description}"""
    return "ok"


async def apply(ctx, config):
    ctx.tools.register(described)
'''


async def test_a_reloaded_tool_is_offered_with_its_new_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a reload of the plugin that registers a tool, requests carry the new spec."""
    monkeypatch.syspath_prepend(str(tmp_path))
    source = tmp_path / "described_tool_plugin.py"
    source.write_text(TOOL_MODULE.format(description="Version one."), encoding="utf-8")
    module = importlib.import_module("described_tool_plugin")
    model = _ToolsSeen()
    async with ag.open_runtime(model=model) as root:
        await root.plugin(module)
        agent = (await root.agents.create(tools=["described"])).agent
        await _turn(agent)
        source.write_text(TOOL_MODULE.format(description="Version two."), encoding="utf-8")
        await root.reload(module)
        await _turn(agent)
    assert model.offered == [[("described", "Version one.")], [("described", "Version two.")]]


# -- tools with a ready JSON schema, and tools private to one agent ------------------------------

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


async def _echo_arguments(ctx: ToolContext, arguments: Any) -> str:
    await trio.lowlevel.checkpoint()
    return repr(arguments)


def test_a_schema_tool_tells_the_model_its_schema_as_is() -> None:
    """``schema=`` is what the model sees (a copy: changing it changes nothing registered)."""
    remote = Tool("search", "Search.", None, _echo_arguments, schema=SCHEMA)
    spec = remote.spec()
    assert spec == ToolSpec("search", "Search.", SCHEMA)
    spec.parameters["properties"]["q"]["type"] = "integer"
    assert remote.spec().parameters["properties"]["q"]["type"] == "string"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schema": {"type": "string"}}, r"^a tool's schema must be a JSON schema of an object"),
        ({"schema": SCHEMA, "params": BashArgs}, r"^a tool takes either params .* or a JSON"),
    ],
)
def test_a_bad_schema_tool_is_refused(kwargs: dict[str, Any], message: str) -> None:
    """A schema that is not an object's, or a schema with params: refused when made."""
    params = kwargs.pop("params", None)
    with pytest.raises(TypeError, match=message):
        Tool("search", "Search.", params, _echo_arguments, **kwargs)


async def test_a_schema_tool_gets_the_arguments_as_a_dict() -> None:
    """The model's JSON object reaches the function as a dict; a non-object is refused."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(Tool("search", "Search.", None, _echo_arguments, schema=SCHEMA))
        assert (await tools.invoke("search", {"q": "trio"})).content == "{'q': 'trio'}"
        refused = await tools.invoke("search", ["trio"])  # type: ignore[arg-type]
        assert (refused.is_error, refused.started) == (True, False)
        assert "the arguments must be a JSON object" in refused.content


async def test_a_private_tool_is_seen_and_called_by_its_agent_only() -> None:
    """``register(tool, agent=ID)``: that agent sees and calls it, others get 'unknown tool';
    two agents may each have one of the same name; a shared name is refused."""
    async with open_root() as root:
        tools = await _registry(root)
        tools.register(bash)
        first = Tool("mine", "Mine.", None, _echo_arguments, schema=SCHEMA)
        second = Tool("mine", "Also mine.", None, _echo_arguments, schema=SCHEMA)
        entry = tools.register(first, agent="a")
        tools.register(second, agent="b")
        assert tools.names() == ("bash",)
        assert tools.names(agent="a") == ("bash", "mine")
        assert tools.get("mine", agent="b") is second
        assert [s.description for s in tools.specs(agent="a")][-1] == "Mine."
        assert not (await tools.invoke("mine", {"q": "x"}, ag.Caller(agent_id="a"))).is_error
        refused = await tools.invoke("mine", {"q": "x"}, ag.Caller(agent_id="c"))
        assert refused.content.startswith("unknown tool 'mine'")
        with pytest.raises(ToolNameInUseError, match=r"^tool 'mine' is already registered"):
            tools.register(first, agent="a")
        with pytest.raises(ToolNameInUseError, match=r"^tool 'mine' is already registered"):
            tools.register(Tool("mine", "Shared.", None, _echo_arguments, schema=SCHEMA))
        with pytest.raises(ToolNameInUseError, match=r"^tool 'bash' is already registered"):
            tools.register(bash, agent="a")
        await entry.close()
        assert tools.names(agent="a") == ("bash",)
        assert tools.names(agent="b") == ("bash", "mine")
