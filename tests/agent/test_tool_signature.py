"""``@ta.tool`` on a plain typed signature: the schema from the annotations and the docstring,
the model's arguments checked against it, and what a tool may return."""

from __future__ import annotations

import enum
import json
from typing import Any, Literal

import attrs
import jsonschema
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agents as ta
from trio_agents.model import CallTool, ScriptedModel
from trio_agents.session import ToolCallEnded


class Unit(enum.Enum):
    LINES = "lines"
    BYTES = "bytes"


@attrs.frozen
class Range:
    start: int
    end: int | None = None


@ta.tool
async def read_file(
    ctx: ta.ToolContext, path: str, limit: int = 100, unit: Unit = Unit.LINES
) -> str:
    """Read a text file.

    Reads from the start.

    Args:
        path: the file to read, relative to the agent's cwd.
        limit: at most this many units,
            counted from the start.
        unit: what ``limit`` counts.

    Returns:
        The text.
    """
    return f"{path}:{limit}:{unit.value}:{ctx.agent is not None}"


@ta.tool(name="span", description="Measure a range.")
async def measure(span: Range, tags: list[str] | None = None) -> dict[str, Any]:
    return {"length": None if span.end is None else span.end - span.start, "tags": tags}


# -- the schema ------------------------------------------------------------------------------------


def test_name_description_and_schema_come_from_the_signature_and_docstring() -> None:
    """The docstring's text before its sections is the description; ``Args:`` documents the
    parameters (continuation lines joined); defaults are in the schema; the context is not an
    argument."""
    spec = read_file.spec()
    assert (spec.name, spec.description) == (
        "read_file",
        "Read a text file.\n\nReads from the start.",
    )
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "path": {
                "description": "the file to read, relative to the agent's cwd.",
                "type": "string",
            },
            "limit": {
                "description": "at most this many units, counted from the start.",
                "type": "integer",
                "default": 100,
            },
            "unit": {"description": "what ``limit`` counts.", "enum": ["lines", "bytes"]},
        },
        "required": ["path"],
        "additionalProperties": False,
    }  # fmt: skip


def test_a_tool_without_context_and_with_nested_types() -> None:
    """The context parameter is optional; attrs classes and optional lists nest."""
    assert (measure.name, measure.description) == ("span", "Measure a range.")
    assert measure.spec().parameters["properties"] == {
        "span": {
            "type": "object",
            "properties": {
                "start": {"type": "integer"},
                "end": {"type": ["integer", "null"], "default": None},
            },
            "required": ["start"],
            "additionalProperties": False,
        },
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "default": None},
    }  # fmt: skip


def test_signatures_that_have_no_schema_are_refused_when_the_tool_is_made() -> None:
    """Variadic parameters, positional-only ones, missing annotations and types with no JSON
    schema are a TypeError naming the parameter, at decoration time."""

    async def variadic(ctx: ta.ToolContext, *paths: str) -> str:
        return ""

    async def unannotated(ctx: ta.ToolContext, path) -> str:  # type: ignore[no-untyped-def]
        return ""

    async def opaque(ctx: ta.ToolContext, when: complex) -> str:
        return ""

    def not_async(path: str) -> str:
        return ""

    with pytest.raises(TypeError, match=r"^tool 'variadic': parameter \*paths"):
        ta.tool(variadic)
    with pytest.raises(TypeError, match=r"^tool 'unannotated': parameter 'path' has no type"):
        ta.tool(unannotated)
    with pytest.raises(TypeError, match=r"tool argument opaque\.when has type"):
        ta.tool(opaque)
    with pytest.raises(TypeError, match=r"^tool 'not_async' must be an async function"):
        ta.tool(not_async)  # type: ignore[arg-type]


def test_the_attrs_class_form_is_kept() -> None:
    """``@tool(params=Args)`` still takes the arguments as one instance."""

    @ta.tool(params=Range)
    async def clip(ctx: ta.ToolContext, args: Range) -> str:
        """Clip."""
        return str(args.start)

    assert clip.params is Range
    assert clip.spec().parameters["required"] == ["start"]


# -- calls -----------------------------------------------------------------------------------------


async def invoke(tool: ta.Tool, arguments: dict[str, Any]) -> ta.ToolResult:
    async with ta.open_runtime() as root:
        tools: ta.ToolRegistry = root.get("tools")
        tools.register(tool)
        return await tools.invoke(tool.name, arguments)


async def test_good_arguments_reach_the_function_as_keywords() -> None:
    """Values are structured to the annotated types (the enum, the default)."""
    result = await invoke(read_file, {"path": "a.txt", "unit": "bytes"})
    assert result == ta.ToolResult("a.txt:100:bytes:False")


async def test_bad_arguments_are_an_error_result_listing_every_problem() -> None:
    """A missing argument, a wrong type and an unknown key: one error result, not started."""
    result = await invoke(read_file, {"limit": "10", "colour": "red"})
    assert result.is_error
    assert not result.started
    assert result.content.startswith("invalid arguments for tool 'read_file' (")
    for part in ("path", "limit", "colour"):
        assert part in result.content


async def test_a_json_value_or_attrs_instance_returned_is_serialized() -> None:
    """A tool may return a JSON value or an attrs instance; the model reads it as JSON."""
    result = await invoke(measure, {"span": {"start": 2, "end": 7}})
    assert json.loads(result.content) == {"length": 5, "tags": None}

    @ta.tool
    async def origin() -> Range:
        """The origin."""
        return Range(0)

    assert json.loads((await invoke(origin, {})).content) == {"start": 0, "end": None}

    @ta.tool
    async def opaque() -> object:
        """Returns something JSON cannot hold."""
        return {1, 2}

    refused = await invoke(opaque, {})
    assert refused.is_error
    assert refused.content.startswith("tool 'opaque' returned set")


async def test_a_scripted_agent_calls_a_typed_tool_with_good_then_bad_arguments(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Through a real turn: the good call's answer and the bad call's error both reach the
    session (and so the model)."""
    model = ScriptedModel(
        [
            [CallTool("read_file", {"path": "x"}), CallTool("read_file", {"path": 3})],
            "done",
        ]
    )
    async with ta.open_runtime(model=model) as root:
        root.get("tools").register(read_file)
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        ended = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
    by_call = sorted(ended, key=lambda r: r.call_id)
    good, bad = by_call
    assert (good.content, good.is_error) == ("x:100:lines:True", False)
    assert bad.is_error
    assert "path" in bad.content


# -- every supported annotation: the schema accepts what it describes ------------------------------


class Mode(enum.Enum):
    A = "a"
    B = 2


ANNOTATIONS: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "str": (str, st.text()),
    "int": (int, st.integers()),
    "float": (float, st.floats(allow_nan=False, allow_infinity=False)),
    "bool": (bool, st.booleans()),
    "literal": (Literal["x", "y"], st.sampled_from(["x", "y"])),
    "enum": (Mode, st.sampled_from(list(Mode))),
    "list": (list[int], st.lists(st.integers())),
    "tuple": (tuple[str, ...], st.lists(st.text()).map(tuple)),
    "dict": (dict[str, bool], st.dictionaries(st.text(), st.booleans())),
    "optional": (int | None, st.none() | st.integers()),
    "attrs": (Range, st.builds(Range, st.integers(), st.none() | st.integers())),
    "nested": (list[Range] | None, st.none() | st.lists(st.builds(Range, st.integers()))),
}


def _to_json(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return {k: _to_json(v) for k, v in attrs.asdict(value, recurse=False).items()}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    return value


def _tool_of(annotation: Any) -> ta.Tool:
    async def probe(value: Any) -> str:
        return json.dumps({"kind": type(value).__name__, "json": _to_json(value)})

    probe.__annotations__ = {"value": annotation, "return": str}
    return ta.tool(probe)


TOOLS = {key: _tool_of(annotation) for key, (annotation, _) in ANNOTATIONS.items()}


@st.composite
def annotated_values(draw: st.DrawFn) -> tuple[str, Any]:
    key = draw(st.sampled_from(sorted(ANNOTATIONS)))
    return key, draw(ANNOTATIONS[key][1])


@settings(max_examples=200, deadline=None)
@given(annotated_values())
def test_the_schema_of_every_annotation_accepts_the_values_it_describes(
    case: tuple[str, Any],
) -> None:
    """For each supported annotation and any value of it: the value's JSON validates against
    the generated schema, and the tool receives it back as the same value, of the same type."""
    key, value = case
    tool = TOOLS[key]
    arguments = {"value": _to_json(value)}
    jsonschema.validate(arguments, tool.spec().parameters)
    result = trio.run(invoke, tool, arguments)
    assert not result.is_error, result.content
    received = json.loads(result.content)
    assert received["kind"] == type(value).__name__
    assert received["json"] == json.loads(json.dumps(_to_json(value)))
