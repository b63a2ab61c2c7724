"""The Agent seam (#16 item 7): another factory's agents sit behind ``ctx.agents`` with the
same ownership rules as the default ones: published, looked up, co-owned, disposed."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.paths import TYPING
from tests.helpers.support import P
from trio_agents.acp import AcpBridge
from trio_agents.acp._framing import LineFramer, encode_frame
from trio_agents.cancel import UserCancel
from trio_agents.kernel import Context
from trio_agents.session import (
    AssistantMessage,
    MemoryStore,
    SessionCreated,
    SessionDisposed,
    SessionExistsError,
)


def _load_echo_agents() -> ModuleType:
    # Loaded by path: tests/typing is named after what it checks, not an importable package.
    path = TYPING / "echo_agents.py"
    spec = importlib.util.spec_from_file_location("echo_agents", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


echo = _load_echo_agents()


def events_of(root: Context) -> list[str]:
    """Collect the names of the lifecycle events, with the ids they concern."""
    seen: list[str] = []

    def record(event: Any) -> None:
        seen.append(f"{type(event).__name__} {event.session_id}")

    for kind in (ag.AgentCreated, ag.AgentDisposed, SessionCreated, SessionDisposed):
        root.on(kind, record)
    return seen


def answers(agent: Any) -> list[str]:
    return [r.content for r in agent.session.records if isinstance(r, AssistantMessage)]


async def test_the_default_factory_builds_todays_agent() -> None:
    """Without a factory the registry builds Agent, through DefaultAgentFactory."""
    async with ag.open_runtime() as root:
        assert isinstance(root.agents.factory, ag.DefaultAgentFactory)
        handle = await root.agents.create()
        assert type(handle.agent) is ag.Agent
        assert isinstance(handle.agent, ag.AgentLike)


async def test_another_factory_builds_the_agents_seen_through_ctx_agents() -> None:
    """create() returns the factory's agent; get() and list() find that very object."""
    factory = echo.EchoFactory()
    async with ag.open_runtime(factory=factory) as root:
        assert root.agents.factory is factory
        handle = await root.agents.create(session_id="e1")
        agent = handle.agent
        assert isinstance(agent, echo.EchoAgent)
        assert root.agents.get("e1") is agent
        assert root.agents.list() == (agent,)
        await trio.testing.wait_all_tasks_blocked()
        assert factory.log == ["build e1", "adopted e1", "run e1"]


async def test_a_prompted_echo_agent_answers_in_its_session() -> None:
    """Each prompt is answered with its own text, recorded in the agent's session."""
    async with ag.open_runtime(factory=echo.EchoFactory()) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("hello")
        agent.prompt("again")
        await agent.when_idle()
        assert answers(agent) == ["hello", "again"]
        assert agent.status is ag.AgentStatus.IDLE


async def test_cancel_clears_what_is_queued_and_a_later_prompt_runs() -> None:
    """cancel() before the loop claims anything: nothing runs; the next prompt does."""
    async with ag.open_runtime(factory=echo.EchoFactory()) as root:
        agent = (await root.agents.create()).agent
        requested: list[ag.AgentCancelRequested] = []
        root.on(ag.AgentCancelRequested, requested.append)
        agent.prompt("never")
        agent.prompt("never either")
        assert agent.cancel(UserCancel()) is True
        await agent.when_idle()
        assert agent.answers == []
        assert agent.cancel() is False
        assert requested == [ag.AgentCancelRequested(agent_id=agent.id, cause=UserCancel())]
        agent.prompt("after")
        await agent.when_idle()
        assert agent.answers == ["after"]


async def test_dispose_runs_the_factory_teardown_in_order_and_is_memoized() -> None:
    """stop awaits the loop's exit, then the registry detaches, then the session goes."""
    factory = echo.EchoFactory()
    async with ag.open_runtime(factory=factory) as root:
        seen = events_of(root)
        handle = await root.agents.create(session_id="e1")
        root.on(ag.AgentDisposed, lambda event: factory.log.append("AgentDisposed"))
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(handle.dispose)
        assert factory.log[3:] == ["stop e1", "run exited e1", "detached e1", "AgentDisposed"]
        assert handle.agent.status is ag.AgentStatus.DISPOSED
        assert root.agents.list() == ()
        assert seen == [
            "SessionCreated e1",
            "AgentCreated e1",
            "AgentDisposed e1",
            "SessionDisposed e1",
        ]
        await handle.dispose()
        assert seen[-1] == "SessionDisposed e1"


async def test_the_calling_fiber_co_owns_an_echo_agent() -> None:
    """Unloading the creating plugin disposes its echo agent (and its registry entry)."""
    factory = echo.EchoFactory()
    async with ag.open_runtime(factory=factory) as root:
        handles: list[ag.AgentHandle[Any]] = []

        async def create(ctx: Context, config: None) -> None:
            handles.append(await ctx.agents.create(session_id="owned"))

        fiber = await root.plugin(P("creator", create, inject=("agents",)))
        assert root.agents.get("owned") is handles[0].agent
        await fiber.dispose()
        assert root.agents.get("owned") is None
        assert "detached owned" in factory.log


async def test_the_agent_loop_unload_disposes_every_echo_agent() -> None:
    """The provider's unload reaches the same teardown: stop, then detach, each agent."""
    factory = echo.EchoFactory()
    async with ag.open_runtime(factory=factory) as root:
        first = await root.agents.create(session_id="a")
        await root.agents.create(session_id="b")
        [loop] = [f for f in root.fiber.children if f.name == "agent-loop"]
        await loop.dispose()
        assert {"detached a", "detached b"} <= set(factory.log)
        assert first.agent.status is ag.AgentStatus.DISPOSED
        with pytest.raises(ag.AgentClosedError):
            first.agent.prompt("late")


async def test_a_child_echo_agent_lives_in_its_parents_scope() -> None:
    """parent= works for any factory: the parent's teardown stops and detaches the child
    first, after the parent's own loop stopped, before the parent leaves the registry."""
    factory = echo.EchoFactory()
    async with ag.open_runtime(factory=factory) as root:
        parent = await root.agents.create(session_id="p")
        child = await root.agents.create(session_id="c", parent=parent.agent)
        assert child.agent.parent is parent.agent
        assert child.agent.session.records[0].parent_id == "p"
        await trio.testing.wait_all_tasks_blocked()
        del factory.log[:]
        await parent.dispose()
        assert factory.log == [
            "stop p",
            "run exited p",
            "stop c",
            "run exited c",
            "detached c",
            "detached p",
        ]
        assert root.agents.list() == ()


async def test_a_disposed_echo_agent_is_resumed_through_its_factory() -> None:
    """The id is reusable once detached: the stored session resumes as an echo agent."""
    store = MemoryStore()
    factory = echo.EchoFactory()
    async with ag.open_runtime(store=store, factory=factory) as root:
        handle = await root.agents.create(session_id="e1")
        handle.agent.prompt("kept")
        await handle.agent.when_idle()
        await handle.dispose()
        with pytest.raises(SessionExistsError):
            await root.agents.create(session_id="e1")
        resumed = await root.agents.resume("e1")
        assert isinstance(resumed.agent, echo.EchoAgent)
        assert answers(resumed.agent) == ["kept"]
        assert factory.log.count("build e1") == 2


@attrs.define
class Broken(ag.AgentFactory[Any]):
    """A factory whose build fails, or returns something that is not an agent."""

    result: object = None

    def build(self, request: ag.AgentRequest[Any]) -> Any:
        if self.result is None:
            raise RuntimeError("no agent today")
        return self.result


@pytest.mark.parametrize(
    ("result", "error", "message"),
    [
        (None, RuntimeError, r"^no agent today$"),
        (
            "not an agent",
            TypeError,
            r"^Broken\(result='not an agent'\)\.build\(\) returned 'not an agent', which is not "
            r"a Built agent of session 'e1'; return Built\(agent, driver\) with an AgentLike on "
            r"request\.session$",
        ),
    ],
)
async def test_a_failed_build_rolls_the_creation_back(
    result: object, error: type[Exception], message: str
) -> None:
    """Nothing is left of a creation whose factory failed: no entry, no event, no session."""
    async with ag.open_runtime(factory=Broken(result)) as root:
        seen = events_of(root)
        with pytest.raises(error, match=message):
            await root.agents.create(session_id="e1")
        await trio.testing.wait_all_tasks_blocked()
        assert root.agents.list() == ()
        assert seen == []
        assert not await root.sessions.is_stored("e1")


async def test_a_user_plugin_reaches_echo_agents_through_a_typed_key() -> None:
    """The mypy-checked plugin of tests/typing runs against a runtime with the echo factory."""
    plugin = echo.TypedEchoPlugin()
    async with ag.open_runtime(factory=echo.EchoFactory()) as root:
        await root.plugin(plugin)
    assert plugin.answers == ["typed"]


async def test_an_acp_client_talks_to_an_echo_agent_through_the_bridge() -> None:
    """The ACP bridge needs only AgentLike: session/new builds an echo agent, a prompt is
    answered with its text and end_turn, and the client's disconnect disposes it."""
    factory = echo.EchoFactory()
    async with ag.open_runtime(factory=factory) as root:
        ours, theirs = trio.testing.memory_stream_pair()
        await root.plugin(AcpBridge(ours))
        framer, frames = LineFramer(), list[dict[str, Any]]()

        async def call(request_id: int, method: str, params: object) -> Any:
            frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            await theirs.send_all(encode_frame(frame))
            while True:
                while not frames:
                    for line in framer.feed(await theirs.receive_some()):
                        assert isinstance(line, bytes)
                        frames.append(json.loads(line))
                message = frames.pop(0)
                if message.get("id") == request_id:
                    return message["result"]
                updates.append(message["params"]["update"])

        updates: list[dict[str, Any]] = []
        await call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session_id = (await call(2, "session/new", {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        assert isinstance(root.agents.get(session_id), echo.EchoAgent)
        prompt = [{"type": "text", "text": "over acp"}]
        answer = await call(3, "session/prompt", {"sessionId": session_id, "prompt": prompt})
        assert answer == {"stopReason": "end_turn"}
        assert {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "over acp"},
        } in updates
        await theirs.send_stream.aclose()
        await trio.testing.wait_all_tasks_blocked()
        assert root.agents.list() == ()
        assert f"detached {session_id}" in factory.log
