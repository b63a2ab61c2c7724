"""Handles, co-ownership and the load-bearing teardown order (DESIGN.md §5)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import Tools
from trio_agents.cancel import CancelCause, DisposedCancel
from trio_agents.kernel import Context
from trio_agents.model import ScriptedModel
from trio_agents.session import (
    JsonlStore,
    SessionDisposed,
    SessionFlushed,
    StopReason,
    TurnEnded,
    TurnStarted,
)


def stored_turn_ends(root_dir: Path, session_id: str) -> list[str]:
    lines = (root_dir / f"{session_id}.jsonl").read_text().splitlines()
    return [line for line in lines if '"turn_ended"' in line]


async def agent_mid_turn(root: Context) -> ag.Agent:
    """A new agent whose turn on the prompt "work" waits for a 10 s model."""
    agent: ag.Agent = (await root.agents.create(model=ScriptedModel.echo(delay=10.0))).agent
    agent.prompt("work")
    await trio.testing.wait_all_tasks_blocked()
    return agent


async def test_teardown_order_loop_then_scope_then_registry_then_session(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """dispose(): loop stopped → scope unwound → AgentDisposed → flush → SessionDisposed."""
    log: list[str] = []
    async with ag.open_runtime(
        store=JsonlStore(tmp_path), model=ScriptedModel.echo(delay=10.0)
    ) as root:
        handle = await root.agents.create()
        agent = handle.agent

        async def scope_exit() -> None:
            log.append(f"scope (done={agent.done})")

        root.agents.scope_of(agent).defer(scope_exit)
        root.on(ag.AgentDisposed, lambda e: log.append("AgentDisposed"))
        root.on(SessionFlushed, lambda e: log.append("SessionFlushed"))
        root.on(SessionDisposed, lambda e: log.append("SessionDisposed"))
        agent.prompt("hello")
        await trio.testing.wait_all_tasks_blocked()
        await handle.dispose()
        assert log.index("scope (done=True)") < log.index("AgentDisposed")
        assert log.index("AgentDisposed") < log.index("SessionDisposed")
        assert "SessionFlushed" in log[log.index("AgentDisposed") :]
        assert root.agents.get(agent.id) is None
    [ended] = stored_turn_ends(tmp_path, agent.id)
    assert '"cancelled"' in ended


async def test_every_record_is_durable_before_the_agents_scope_unwinds(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """When the agent's scope (child agents, jobs, tools) starts to unwind, what the agent
    recorded outside a turn (a queued message) is on disk already, not only after it."""
    seen: list[list[str]] = []
    store = JsonlStore(tmp_path, flush_interval=3600)
    async with ag.open_runtime(store=store) as root:
        handle = await root.agents.create(model=ScriptedModel.echo(delay=10.0))
        agent = handle.agent

        async def scope_exit() -> None:
            path = tmp_path / f"{agent.id}.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            seen.append([line for line in lines if "queued" in line])

        root.agents.scope_of(agent).defer(scope_exit)
        agent.inject("queued")  # the next step's lane: it does not wake the idle agent
        await trio.testing.wait_all_tasks_blocked()
        await handle.dispose()
    assert len(seen) == 1
    assert len(seen[0]) == 1


async def test_closing_turn_is_durable_after_owner_fiber_unload(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Unloading the fiber that created the agent disposes it with TurnEnded on disk."""
    made: list[ag.Agent] = []

    class Owner:
        name = "owner"
        inject = ("agents",)

        async def apply(self, ctx: Context, config: None) -> None:
            handle = await ctx.agents.create(model=ScriptedModel.echo(delay=10.0))
            handle.agent.prompt("work")
            made.append(handle.agent)

    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        fiber = await root.plugin(Owner())
        await trio.testing.wait_all_tasks_blocked()
        await fiber.dispose()
        assert root.agents.list() == ()
    [ended] = stored_turn_ends(tmp_path, made[0].id)
    assert "disposed_cancel" in ended


async def test_closing_turn_is_durable_after_factory_unload(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Unloading the AgentLoop (the factory provider) disposes every agent it made."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        agent = await agent_mid_turn(root)
        [loop_fiber] = [f for f in root.fiber.children if f.name == "agent-loop"]
        await loop_fiber.dispose()
        assert agent.done
    [ended] = stored_turn_ends(tmp_path, agent.id)
    assert '"cancelled"' in ended
    assert "disposed_cancel" in ended


async def test_runtime_exit_closes_running_turn_durably(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Leaving open_runtime mid-turn still writes the closing TurnEnded."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        agent = await agent_mid_turn(root)
    assert len(stored_turn_ends(tmp_path, agent.id)) == 1


async def test_concurrent_dispose_callers_join_one_teardown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two dispose() callers both return after the one teardown completed."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create()
        disposed: list[object] = []
        root.on(ag.AgentDisposed, disposed.append)
        returned: list[bool] = []

        async def dispose() -> None:
            await handle.dispose()
            returned.append(handle.agent.status is ag.AgentStatus.DISPOSED)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(dispose)
            nursery.start_soon(dispose)
        assert returned == [True, True]
        assert len(disposed) == 1


async def test_duplicate_live_id_is_refused() -> None:
    """A second live agent with the same id is refused with AgentIdInUseError."""
    async with ag.open_runtime() as root:
        await root.agents.create(session_id="a1")
        with pytest.raises(ag.AgentIdInUseError, match=r"^agent id 'a1' is in use"):
            await root.agents.create(session_id="a1")


async def test_concurrent_creations_with_one_id_have_one_winner() -> None:
    """Two concurrent creations with one id: one wins, the loser rolls back completely."""
    async with ag.open_runtime() as root:
        created: list[str] = []
        disposed: list[str] = []
        root.on(ag.AgentCreated, lambda e: created.append(e.agent_id))
        root.on(ag.AgentDisposed, lambda e: disposed.append(e.agent_id))
        outcomes: list[object] = []

        async def create() -> None:
            try:
                outcomes.append(await root.agents.create(session_id="same"))
            except ag.AgentIdInUseError as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(create)
            nursery.start_soon(create)
        handles = [o for o in outcomes if isinstance(o, ag.AgentHandle)]
        assert len(handles) == 1
        assert len([o for o in outcomes if isinstance(o, ag.AgentIdInUseError)]) == 1
        assert [a.id for a in root.agents.list()] == ["same"]
        await handles[0].dispose()
        assert created == disposed == ["same"]


async def test_id_is_reusable_right_after_dispose(autojump_clock: trio.testing.MockClock) -> None:
    """Once the exact registry entry detached, the id can be live again (by resuming it)."""
    async with ag.open_runtime() as root:
        first = await root.agents.create(session_id="again")
        await first.dispose()
        second = await root.agents.resume("again")
        assert second.agent is not first.agent
        assert root.agents.get("again") is second.agent


async def test_create_never_replaces_a_stored_session(tmp_path: Path) -> None:
    """create() with the id of a stored session is refused, and the stored history stays."""
    from trio_agents.session import SessionExistsError, UserMessage

    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        first = await root.agents.create(session_id="kept")
        first.agent.prompt("remember me")
        await first.agent.when_idle()
        await first.dispose()
        with pytest.raises(SessionExistsError, match=r"^session 'kept' is already stored; resume"):
            await root.agents.create(session_id="kept")
        assert root.agents.list() == ()
        resumed = (await root.agents.resume("kept")).agent
        assert [r.content for r in resumed.session.records if isinstance(r, UserMessage)] == [
            "remember me"
        ]


async def test_a_generated_id_that_is_stored_is_refused_by_the_enter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """create() without an id does not look the fresh id up (48 random bits); the store's
    enter, the authoritative check, still refuses one that is stored: the creation fails,
    nothing is left of it, and the stored history stays."""
    import trio_agents.session._store as store_module
    from trio_agents.session import SessionExistsError, UserMessage

    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        first = await root.agents.create(session_id="s-000000000001")
        first.agent.prompt("remember me")
        await first.agent.when_idle()
        await first.dispose()
        monkeypatch.setattr(store_module, "new_session_id", lambda: "s-000000000001")
        with pytest.raises(SessionExistsError, match=r"^session 's-000000000001' is already"):
            await root.agents.create()
        assert root.agents.list() == ()
        assert [f.name for f in root.fiber.runtime.fibers if f.name.startswith("agent:")] == []
        resumed = (await root.agents.resume("s-000000000001")).agent
        assert [r.content for r in resumed.session.records if isinstance(r, UserMessage)] == [
            "remember me"
        ]


async def test_declared_agent_with_a_stored_id_is_resumed(tmp_path: Path) -> None:
    """A declared agent whose session is stored comes back with its history on restart."""
    from trio_agents.session import UserMessage

    declared = [ag.DeclaredAgent(id="cfg")]
    async with ag.open_runtime(store=JsonlStore(tmp_path), agents=declared) as root:
        agent = root.agents.get("cfg")
        assert agent is not None
        agent.prompt("first run")
        await agent.when_idle()
    async with ag.open_runtime(store=JsonlStore(tmp_path), agents=declared) as root:
        agent = root.agents.get("cfg")
        assert agent is not None
        assert [r.content for r in agent.session.records if isinstance(r, UserMessage)] == [
            "first run"
        ]


async def test_dispose_during_a_cancelled_turns_unwinding_records_disposed_cause(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A user cancel still unwinding when disposal starts is classified as DisposedCancel."""
    import attrs

    from trio_agents.model import CallTool

    @attrs.frozen
    class NoParams:
        pass

    async def slow_cleanup(call: ag.ToolContext, params: NoParams) -> str:
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(1)

    async with ag.open_runtime(model=ScriptedModel([[CallTool("slow")]])) as root:
        await root.plugin(Tools(ag.Tool("slow", "Cleans up slowly.", NoParams, slow_cleanup)))
        handle = await root.agents.create()
        handle.agent.prompt("x")
        await trio.testing.wait_all_tasks_blocked()
        handle.agent.cancel()
        await handle.dispose()
        ends = [r for r in handle.agent.session.records if isinstance(r, TurnEnded)]
        starts = [r for r in handle.agent.session.records if isinstance(r, TurnStarted)]
        assert len(ends) == len(starts) == 1
        assert ends[0].stop_reason is StopReason.CANCELLED
        assert ends[0].cause == DisposedCancel()


async def test_an_idle_agent_is_one_fiber_with_one_task() -> None:
    """The agent's scope is a section of its fiber, not a fiber of its own: an idle agent
    holds one fiber (its task) and the loop task, nothing more."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create()
        await trio.testing.wait_all_tasks_blocked()
        (fiber,) = [f for f in root.fiber.runtime.fibers if f.name == f"agent:{handle.agent.id}"]
        assert fiber.children == ()
        nursery = fiber._nursery
        assert nursery is not None
        assert [t.name for t in nursery.child_tasks] == [f"agent {handle.agent.id} loop"]
        assert "section agent-scope" in fiber.statistics().entries
        await handle.dispose()


async def test_what_the_scope_takes_while_the_loop_stops_unwinds_after_the_loop() -> None:
    log: list[str] = []

    class LateDriver(ag.AgentDriver):
        def __init__(self, built: ag.Built[ag.Agent]) -> None:
            self.agent, self.inner = built.agent, built.driver

        async def run(self) -> None:
            await self.inner.run()

        async def stop(self) -> None:
            agent_registry.scope_of(self.agent).defer(self._late)
            await self.inner.stop()
            log.append(f"loop stopped, done={self.agent.done}")

        def adopted(self) -> None:
            self.inner.adopted()

        def detached(self) -> None:
            self.inner.detached()

        def lose(self, cause: CancelCause) -> None:
            self.inner.lose(cause)

        async def _late(self) -> None:
            log.append("late entry unwound")

    class Late(ag.DefaultAgentFactory):
        def build(self, request: ag.AgentRequest[ag.Agent]) -> ag.Built[ag.Agent]:
            built = super().build(request)
            return ag.Built(built.agent, LateDriver(built))

    async with ag.open_runtime(factory=Late()) as root:
        agent_registry = root.agents
        handle = await root.agents.create()
        await handle.dispose()
    assert log == ["loop stopped, done=True", "late entry unwound"]
