"""Typed final output (``ask(output=)``, ``create(output=)``) on the scripted model."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.paths import TYPING
from tests.helpers.support import Tools
from trio_agents.model import CallTool, Say, ScriptedModel, ToolOutput, UserText, Wait
from trio_agents.model._scripted import Reply
from trio_agents.session import (
    InboxSpliced,
    JsonlStore,
    OutputProduced,
    StopReason,
    ToolCallEnded,
    TurnEnded,
)


@attrs.frozen
class City:
    """A city and how many people live there."""

    name: str
    population: int


def scripted(*replies: Reply) -> ScriptedModel:
    return ScriptedModel(list(replies))


def answer(**arguments: Any) -> list[CallTool]:
    return [CallTool("final_answer", arguments)]


def outputs(agent: ag.Agent) -> list[OutputProduced]:
    return [r for r in agent.session.records if isinstance(r, OutputProduced)]


def ends(agent: ag.Agent) -> list[TurnEnded]:
    return [r for r in agent.session.records if isinstance(r, TurnEnded)]


async def test_an_invalid_answer_is_retried_once_and_the_value_is_typed() -> None:
    """A refused final answer is an error tool result; the corrected one comes back typed."""
    model = scripted(
        answer(name="Oslo", population="many"), answer(name="Oslo", population=717_710)
    )
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        city = await agent.ask("Biggest city of Norway?", output=City)
        assert city == City("Oslo", 717_710)
        refused, accepted = outputs(agent)
        assert refused.problems == ["expected an integer, got string 'many' @ answer.population"]
        assert accepted.problems == []
        assert accepted.answer == {"name": "Oslo", "population": 717_710}
        assert [e.stop_reason for e in ends(agent)] == [StopReason.COMPLETED]
    told = model.requests[1].messages[-1]
    assert isinstance(told, ToolOutput)
    assert told.is_error
    assert "'many' @ answer.population" in told.content


async def test_the_request_offers_the_final_answer_tool_with_the_class_schema() -> None:
    """The model gets a final_answer tool built from the attrs class, and the output spec."""
    model = scripted(answer(name="Oslo", population=1))
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        await agent.ask("?", output=City)
    request = model.requests[0]
    (spec,) = [s for s in request.tools if s.name == "final_answer"]
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    assert spec.parameters == schema
    assert spec.description.startswith("A city and how many people live there.")
    assert request.output is not None
    assert (request.output.tool, request.output.schema) == ("final_answer", schema)


async def test_a_text_answer_is_parsed_and_a_refused_one_is_told_in_a_user_message() -> None:
    """A step without tool calls answers with its text as JSON; a refusal is a user message."""
    model = scripted("It is Oslo.", '```json\n{"name": "Oslo", "population": 2}\n```')
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        assert await agent.ask("?", output=City) == City("Oslo", 2)
        refused, _ = outputs(agent)
        assert (refused.answer, refused.call_id) == ("It is Oslo.", None)
    told = model.requests[1].messages[-1]
    assert isinstance(told, UserText)
    assert told.content.startswith("Your final answer was not accepted:\n- not JSON (")


async def test_refusals_past_output_retries_raise_output_error_with_the_last_answer() -> None:
    """One refusal more than output_retries ends the turn error; ask says what and why."""
    model = scripted(answer(name="A"), answer(name="B"), answer(name="C", population=1))
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        with pytest.raises(
            ag.OutputError,
            match=r"^turn t-1 of agent s-\w+ ended error: the model's final answer was refused "
            r"2 times \(output_retries=1\); the last one: required argument missing @ "
            r"answer\.population \(the last answer: \{\"name\": \"B\"\}\)$",
        ) as caught:
            await agent.ask("?", output=City, output_retries=1)
        assert caught.value.answer == {"name": "B"}
        assert caught.value.problems == ("required argument missing @ answer.population",)
        (end,) = ends(agent)
        assert end.stop_reason is StopReason.ERROR
        assert caught.value.record == end
        assert agent.last_output(City) is None
    assert len(model.requests) == 2


async def test_the_typed_output_comes_back_on_resume(tmp_path: Path) -> None:
    """The accepted answer is recorded; a resumed agent restructures it."""
    model = scripted(answer(name="Oslo", population=3))
    async with ta.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        handle = await root.agents.create(session_id="typed")
        await handle.agent.ask("?", output=City)
        await handle.dispose()
    async with ta.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        agent = (await root.agents.resume("typed", model=model)).agent
        assert agent.last_output(City) == City("Oslo", 3)
        assert agent.output is None


async def test_create_output_makes_every_turn_answer_typed() -> None:
    """create(output=) is the agent's default: a plain prompt answers typed too."""
    model = scripted(answer(name="Oslo", population=4), answer(name="Bergen", population=5))
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create(output=City)).agent
        assert agent.output is City
        agent.prompt("first?")
        await agent.when_idle()
        assert agent.last_output(City) == City("Oslo", 4)
        assert await agent.ask("second?") == '{"name": "Bergen", "population": 5}'
        agent.output = None
        assert agent.output is None


async def test_ask_output_applies_to_its_own_message_only() -> None:
    """A prompt queued beside an ask(output=) is answered as text."""
    model = scripted("plain", answer(name="Oslo", population=6))
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("text please")
        assert await agent.ask("typed please", output=City) == City("Oslo", 6)
        assert model.requests[0].output is None
        assert "final_answer" not in [s.name for s in model.requests[0].tools]


@ag.tool
async def note(text: str) -> str:
    """Take a note."""
    return f"noted {text}"


async def test_other_calls_of_the_answering_step_still_run() -> None:
    """The step that answers may call other tools; they run and the turn completes."""
    model = scripted([CallTool("note", {"text": "x"}), *answer(name="Oslo", population=7)])
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        await root.plugin(Tools(note))
        agent = (await root.agents.create()).agent
        assert await agent.ask("?", output=City) == City("Oslo", 7)
        results = {r.name: r.content for r in agent.session.records if isinstance(r, ToolCallEnded)}
        assert results == {"note": "noted x", "final_answer": "accepted: this is your final answer"}
    assert len(model.requests) == 1


async def test_a_second_final_answer_in_one_step_is_refused_without_counting() -> None:
    """Only the first accepted answer counts; another in the same step is answered an error."""
    model = scripted([*answer(name="A", population=1), *answer(name="B", population=2)])
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        assert await agent.ask("?", output=City, output_retries=0) == City("A", 1)
        _, second = outputs(agent)
        assert second.problems == ["the final answer was already given in this step; it stands"]
        assert agent.last_output(City) == City("A", 1)


async def test_an_output_schema_is_validated_with_the_schema_itself() -> None:
    """OutputSchema: the answer is the validated JSON; problems name their path."""
    schema = ta.OutputSchema(
        {
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["tags"],
        }
    )
    model = scripted(answer(tags=["a", 2]), answer(tags=["a", "b"]))
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        assert await agent.ask("?", output=schema) == {"tags": ["a", "b"]}
        refused, _ = outputs(agent)
        assert refused.problems == ["2 is not of type 'string' @ .tags[1]"]
        assert agent.last_output(schema) == {"tags": ["a", "b"]}


def test_an_output_schema_without_jsonschema_names_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the jsonschema package an OutputSchema says what to install."""
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(ImportError, match=r"^validating output with a JSON Schema needs the"):
        ta.OutputSchema({"type": "object"})


def test_an_output_schema_that_is_not_an_object_schema_is_refused() -> None:
    """A schema must describe an object and be a valid JSON Schema."""
    with pytest.raises(ValueError, match=r'^an output schema describes a JSON object \(its "type"'):
        ta.OutputSchema({"type": "array"})
    with pytest.raises(ValueError, match=r"^not a valid JSON Schema \(.* @ properties/x/type\)$"):
        ta.OutputSchema({"type": "object", "properties": {"x": {"type": 5}}})


async def test_an_output_that_is_not_an_attrs_class_is_refused_before_queueing() -> None:
    """A wrong output= is a TypeError, and nothing is queued or recorded."""
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        agent = (await root.agents.create()).agent
        with pytest.raises(TypeError, match=r"^output is an attrs class or an OutputSchema; got"):
            await agent.ask("?", output=dict)
        with pytest.raises(ValueError, match=r"^output_retries is how many refused answers"):
            await agent.ask("?", output=City, output_retries=-1)
        assert not [r for r in agent.session.records if isinstance(r, InboxSpliced)]
        with pytest.raises(TypeError, match=r"^output is an attrs class"):
            await root.agents.create(output=int)
        assert [a.id for a in root.agents.list()] == [agent.id]


@attrs.frozen
class Opaque:
    handle: object


async def test_an_output_class_with_no_json_schema_is_refused_when_given() -> None:
    """A field type with no JSON schema is refused by ask, before anything is queued."""
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        agent = (await root.agents.create()).agent
        with pytest.raises(TypeError, match=r"^output Opaque: argument Opaque\.handle has type"):
            await agent.ask("?", output=Opaque)
        with pytest.raises(TypeError, match=r"^output Opaque: "):
            agent.output = Opaque
        assert agent.output is None
        assert agent.session.records[-1].seq == 0  # the AgentConfigured record alone


async def test_a_json_answer_that_is_not_an_object_is_refused() -> None:
    """An array where the class needs an object is a refusal with its reason."""
    model = scripted("[1, 2]", '{"name": "Oslo", "population": 8}')
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        assert await agent.ask("?", output=City) == City("Oslo", 8)
        refused, _ = outputs(agent)
        assert refused.problems == ["expected an object, got array @ answer"]


def _echo_agents() -> ModuleType:
    # Loaded by path: the directory is named after what it checks (typing), not importable.
    path = TYPING / "echo_agents.py"
    spec = importlib.util.spec_from_file_location("echo_agents_of_output", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_create_output_with_a_factory_without_typed_output_is_refused() -> None:
    """A factory whose agents have no output: create(output=) refuses and leaves no agent."""
    async with ag.open_runtime(factory=_echo_agents().EchoFactory()) as root:
        with pytest.raises(TypeError, match=r"^the runtime's agent factory builds EchoAgent"):
            await root.agents.create(output=City)
        assert root.agents.list() == ()


async def test_a_cancelled_typed_turn_is_a_turn_failure() -> None:
    """Cancelling a typed turn ends it cancelled, as any turn (no output error)."""
    model = ScriptedModel.echo(delay=5.0)
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        async with trio.open_nursery() as nursery:

            async def asking() -> None:
                with pytest.raises(ag.TurnFailedError, match=r"^turn t-1 .* ended cancelled"):
                    await agent.ask("?", output=City)

            nursery.start_soon(asking)
            await trio.testing.wait_all_tasks_blocked()
            agent.cancel()


async def test_the_typed_example_of_tests_typing_runs() -> None:
    """The file mypy checks for ask's types (tests/typing/typed_output.py) runs as written."""
    # Loaded by path: the directory is named after what it checks (typing), not importable.
    path = TYPING / "typed_output.py"
    spec = importlib.util.spec_from_file_location("typed_output", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = scripted(answer(ok=True, reason="fine"), "because")
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        assert await module.judge(agent) == (True, "fine")


async def test_a_typed_message_stays_typed_when_its_asker_stops_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelling ask's wait leaves the queued message typed: its turn still answers typed."""
    model = scripted([Wait(5), Say("first")], answer(name="Oslo", population=9))
    async with ta.open_runtime(store=ta.MemoryStore(), model=model) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("first")
        with trio.move_on_after(1):
            await agent.ask("second", output=City)
        await agent.when_idle()
        assert agent.last_output(City) == City("Oslo", 9)
    assert model.requests[1].output is not None
