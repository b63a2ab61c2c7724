"""A resumed agent is the same agent (issue 10): its definition is recorded in its session."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import Tools
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    SystemText,
    TextDelta,
    ToolCallRequested,
)
from trio_agents.session import (
    AgentConfigured,
    JsonlStore,
    MemoryStore,
    SessionInfo,
    StopReason,
    TurnEnded,
)


async def noop(call: ag.ToolContext, params: None) -> str:
    return "done"


TOOLS = Tools(
    ag.Tool("read", "Read.", None, noop),
    ag.Tool("write", "Write.", None, noop),
    ag.Tool("delete", "Delete.", None, noop),
)


@attrs.define
class Recorder:
    """A model that records each request; it calls ``read`` while ``loop`` is set, else says ok."""

    name: str = "recorder"
    context_window: int | None = None
    loop: bool = False
    requests: list[ModelRequest] = attrs.Factory(list)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        if self.loop:
            yield ToolCallRequested(f"c{len(self.requests)}", "read", {})
        else:
            yield TextDelta("ok")
        yield Finished(FinishReason.STOP)


def configs(records: tuple[object, ...]) -> list[AgentConfigured]:
    return [r for r in records if isinstance(r, AgentConfigured)]


async def test_a_resumed_agent_keeps_instructions_tools_and_step_limit() -> None:
    """create(instructions, tools, max_steps), dispose, resume() with no arguments: the first
    request after resume carries the system text and only the allowed tools, and the step
    limit still ends a turn that loops."""
    store = MemoryStore()
    model = Recorder()
    async with ag.open_runtime(store=store, model=model) as root:
        await root.plugin(TOOLS)
        first = await root.agents.create(
            session_id="a", instructions="Be brief.", tools=["read", "write"], max_steps=3
        )
        first.agent.prompt("hello")
        await first.agent.when_idle()
        await first.dispose()
        model.requests.clear()

        again = (await root.agents.resume("a")).agent
        assert again.config == first.agent.config
        again.prompt("and again")
        await again.when_idle()
        request = model.requests[0]
        assert request.messages[0] == SystemText("Be brief.")
        assert sorted(t.name for t in request.tools) == ["read", "write"]

        model.loop = True
        model.requests.clear()
        again.prompt("loop")
        await again.when_idle()
        assert len(model.requests) == 3
        end = [r for r in again.session.records if isinstance(r, TurnEnded)][-1]
        assert end.stop_reason is StopReason.MAX_STEPS
        assert len(configs(again.session.records)) == 1  # nothing changed, nothing recorded


async def test_a_value_given_to_resume_overrides_and_is_recorded() -> None:
    """resume(instructions=...) replaces the stored value and records it; the next plain
    resume keeps the new value, and the rest of the definition is unchanged."""
    async with ag.open_runtime() as root:
        first = await root.agents.create(session_id="a", instructions="v1", max_steps=7)
        await first.dispose()
        second = await root.agents.resume("a", instructions="v2")
        assert (second.agent.instructions, second.agent.max_steps) == ("v2", 7)
        await second.dispose()
        third = (await root.agents.resume("a")).agent
        assert (third.instructions, third.max_steps) == ("v2", 7)
        assert [c.instructions for c in configs(third.session.records)] == ["v1", "v2"]


async def test_a_model_spec_is_restored_and_a_model_object_is_recorded_by_name(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A spec string comes back on resume (echo?delay=3 waits 3 s again); a model object is
    recorded by its name only, and a resume given model=None uses the runtime's default."""
    async with ag.open_runtime(model="echo") as root:
        spec = await root.agents.create(session_id="s", model="echo?delay=3")
        await spec.dispose()
        resumed = (await root.agents.resume("s")).agent
        assert resumed.config.model == "echo?delay=3"
        start = trio.current_time()
        resumed.prompt("slow")
        await resumed.when_idle()
        assert trio.current_time() - start >= 3

        obj = await root.agents.create(session_id="o", model=ScriptedModel.echo(delay=9.0))
        [record] = configs(obj.agent.session.records)
        assert (record.model, record.model_name) == (None, obj.agent.model.name)
        assert record.model_object
        await obj.dispose()
        default = (await root.agents.resume("o", model=None)).agent
        assert default.model is root.models.default


async def test_a_session_stored_before_definitions_resumes_with_the_defaults(
    tmp_path: Path,
) -> None:
    """A format-1 file with no agent_configured record still loads; the agent gets the
    defaults, and nothing is recorded until a value is given."""
    lines = [
        {"format": "trio-agents-session", "version": 1, "session_id": "old"},
        {"type": "turn_started", "seq": 0, "turn_id": "t-1"},
        {"type": "user_message", "seq": 1, "message_id": "m-1", "content": "hi", "turn_id": "t-1"},
        {"type": "turn_ended", "seq": 2, "turn_id": "t-1", "stop_reason": "completed"},
    ]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        agent = (await root.agents.resume("old")).agent
        assert agent.config == ag.AgentConfig(model_name=agent.model.name)
        assert agent.instructions is None


async def test_a_declared_agent_resumes_with_the_definition_the_file_gives_now() -> None:
    """Run a declared agent twice: the second run's instructions and tools win and are
    recorded (the stored session is the same one)."""
    store = MemoryStore()
    v1 = ag.DeclaredAgent(id="cfg", instructions="v1", tools=[])
    async with ag.open_runtime(store=store, agents=[v1]) as root:
        agent = root.agents.get("cfg")
        assert agent is not None
        assert agent.config.tools == ()
        agent.prompt("remember me")
        await agent.when_idle()
    v2 = ag.DeclaredAgent(id="cfg", instructions="v2", tools=["read"])
    async with ag.open_runtime(store=store, agents=[v2]) as root:
        agent = root.agents.get("cfg")
        assert agent is not None
        assert (agent.instructions, agent.config.tools) == ("v2", ("read",))
        assert [c.instructions for c in configs(agent.session.records)] == ["v1", "v2"]


async def test_the_working_directory_is_recorded_absolute(tmp_path: Path) -> None:
    """cwd is stored absolute and comes back on resume."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create(session_id="w", cwd=tmp_path / "x" / "..")
        assert handle.agent.cwd == str(tmp_path)  # pytest's tmp_path is absolute
        await handle.dispose()
        assert (await root.agents.resume("w")).agent.cwd == str(
            tmp_path
        )  # pytest's tmp_path is absolute


async def test_bad_definitions_are_refused_before_anything_is_made() -> None:
    """A bad max_steps or tools value is a clear error and creates nothing."""
    async with ag.open_runtime() as root:
        with pytest.raises(ValueError, match=r"^max_steps is the most model requests"):
            await root.agents.create(max_steps=0)
        with pytest.raises(TypeError, match=r"^tools is a collection of tool names"):
            await root.agents.create(tools="bash")
        assert root.agents.list() == ()
        assert root.sessions.live() == ()


async def test_an_agent_definition_is_not_in_the_model_history() -> None:
    """The recorded definition is bookkeeping: the model sees the system text, not the record."""
    model = Recorder()
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create(instructions="sys")).agent
        agent.prompt("hi")
        await agent.when_idle()
        assert [type(m).__name__ for m in model.requests[0].messages] == ["SystemText", "UserText"]


@pytest.mark.parametrize("backend", ["memory", "jsonl"])
async def test_the_store_lists_each_sessions_latest_cwd(tmp_path: Path, backend: str) -> None:
    """SessionInfo.cwd is the cwd of the latest definition: live, stored, and after a resume
    that moved the agent; a session created without one lists None."""
    store = MemoryStore() if backend == "memory" else JsonlStore(tmp_path / "s")
    first, second = tmp_path / "one", tmp_path / "two"
    async with ag.open_runtime(store=store) as root:
        moved = await root.agents.create(session_id="moved", cwd=first)
        await root.agents.create(session_id="plain")

        def cwds(infos: list[SessionInfo]) -> dict[str, str | None]:
            return {i.id: i.cwd for i in infos}

        assert cwds(await root.sessions.list()) == {"moved": str(first), "plain": None}
        await moved.dispose()
        assert cwds(await root.sessions.list()) == {"moved": str(first), "plain": None}
        again = await root.agents.resume("moved", cwd=second)
        assert cwds(await root.sessions.list())["moved"] == str(second)
        await again.dispose()
        assert cwds(await root.sessions.list())["moved"] == str(second)
