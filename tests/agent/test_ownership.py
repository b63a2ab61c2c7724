"""Ownership holds when an owner goes away mid-flight (issue 9): create and resume are one
transaction, cancel reaches what it should and reports only what it did, no back doors."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import TypeVar

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.checkpoints import AtStep, cancelled_at_step
from tests.helpers.support import P
from trio_agents.cancel import CancelCause, ParentCancel, UserCancel
from trio_agents.kernel import Context, FiberClosedError, FiberFailed
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    TextDelta,
)
from trio_agents.session import (
    JsonlStore,
    MemoryStore,
    SessionAppended,
    SessionCreated,
    SessionDisposed,
    SessionInUseError,
    SessionStore,
    StopReason,
    TurnEnded,
    TurnStarted,
    register_cause,
)

STORES = ["memory", "jsonl"]


def make_store(kind: str, tmp_path: Path) -> SessionStore:
    return MemoryStore() if kind == "memory" else JsonlStore(tmp_path / "sessions")


def co_owner_entries(ctx: Context) -> list[str]:
    return [label for label in ctx.fiber.statistics().entries if label.startswith("defer")]


T = TypeVar("T")


@attrs.define
class Counted:
    """Events of one kind, by type name."""

    counts: dict[str, int] = attrs.Factory(dict)

    def __call__(self, event: object) -> None:
        name = type(event).__name__
        self.counts[name] = self.counts.get(name, 0) + 1

    def get(self, name: str) -> int:
        return self.counts.get(name, 0)


def listen_all(root: Context) -> Counted:
    counted = Counted()
    for kind in (ag.AgentCreated, ag.AgentDisposed, SessionCreated, SessionDisposed, FiberFailed):
        root.on(kind, counted)
    return counted


async def assert_nothing_left(root: Context, store: SessionStore, tmp_path: Path) -> None:
    assert root.agents.list() == ()
    assert root.agents.get("a") is None
    assert store.live() == ()
    assert not (tmp_path / "sessions" / "a.jsonl").exists()


async def assert_works(handle: ag.AgentHandle) -> None:
    agent = handle.agent
    agent.prompt("ping")
    await agent.when_idle()
    ends = [r for r in agent.session.records if isinstance(r, TurnEnded)]
    assert [e.stop_reason for e in ends][-1] is StopReason.COMPLETED


# -- create and resume are one transaction --------------------------------------------------


@pytest.mark.parametrize("kind", STORES)
async def test_create_cancelled_at_every_checkpoint_leaves_a_working_agent_or_nothing(
    kind: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancel the caller at checkpoint k = 1, 2, ... of create: it either holds a working
    handle, or nothing is left (no entry, no live session, no file, no unpaired event) and
    the id is usable again at once."""
    store = make_store(kind, tmp_path)
    async with ag.open_runtime(store=store) as root:
        events = listen_all(root)
        before = co_owner_entries(root)
        completed_at = None
        for k in range(1, 400):
            handle, cancelled, fired = await cancelled_at_step(
                k, lambda: root.agents.create(session_id="a")
            )
            if handle is None:
                assert cancelled
                await assert_nothing_left(root, store, tmp_path)
                assert co_owner_entries(root) == before
                assert events.get("AgentCreated") == events.get("AgentDisposed") == 0
                assert events.get("SessionCreated") == events.get("SessionDisposed") == 0
                assert events.get("FiberFailed") == 0  # a cancelled creation is no failure
                continue
            await assert_works(handle)
            await handle.dispose()
            assert co_owner_entries(root) == before
            if not fired:
                completed_at = k
                break
            await store.delete("a")
        assert completed_at is not None
        assert completed_at > 5  # the cancel hit real checkpoints


@pytest.mark.parametrize("kind", STORES)
async def test_resume_cancelled_at_every_checkpoint_leaves_a_working_agent_or_nothing(
    kind: str, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The same for resume: after a cancelled resume the stored session is untouched and
    resumable, nothing is live, and the caller's stack holds no entry."""
    store = make_store(kind, tmp_path)
    async with ag.open_runtime(store=store) as root:
        first = await root.agents.create(session_id="a", instructions="be brief")
        await assert_works(first)
        await first.dispose()
        stored = len((await store.load("a")).records) if kind == "memory" else None
        before = co_owner_entries(root)
        events = listen_all(root)
        for k in range(1, 400):
            handle, cancelled, fired = await cancelled_at_step(k, lambda: root.agents.resume("a"))
            if handle is None:
                assert cancelled
                assert root.agents.list() == ()
                assert store.live() == ()
                assert co_owner_entries(root) == before
                assert events.get("FiberFailed") == 0  # a cancelled resume is no failure
                continue
            assert handle.agent.instructions == "be brief"
            await assert_works(handle)
            await handle.dispose()
            if not fired:
                break
        else:
            pytest.fail("resume never completed")
        if stored is not None:
            assert len((await store.load("a")).records) > stored


async def dispose_the_factory_at_step(k: int, root_dir: Path) -> str:
    """Create an agent in one task and dispose the AgentLoop at the ``k``-th step of the run;
    check that nothing is left, and say how the create ended."""
    # The writer runs a batch only when a flush asks (never within the long interval), so
    # the steps of the run do not depend on how long a worker thread takes.
    store = JsonlStore(root_dir, flush_interval=3600)
    async with ag.open_runtime(store=store) as root:
        registry = root.agents
        [loop] = [f for f in root.fiber.children if f.name == "agent-loop"]
        before = co_owner_entries(root)
        go = trio.Event()
        result: list[object] = []

        async def creator() -> None:
            instrument = AtStep(k, go.set)
            trio.lowlevel.add_instrument(instrument)
            try:
                result.append(await registry.create(session_id="a"))
            except FiberClosedError as exc:
                result.append(exc)
            finally:
                trio.lowlevel.remove_instrument(instrument)

        async def disposer() -> None:
            await go.wait()
            await loop.dispose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(disposer)
            nursery.start_soon(creator)
            await trio.testing.wait_all_tasks_blocked()
            go.set()
        [outcome] = result
        assert registry.list() == ()
        assert store.live() == ()
        assert co_owner_entries(root) == before
        if isinstance(outcome, ag.AgentHandle):
            assert outcome.agent.done
            await outcome.dispose()  # a no-op now, and it returns
            return "created then disposed"
        assert not (root_dir / "a.jsonl").exists()
        return "refused"


async def test_a_factory_disposed_during_create_leaves_no_half_made_agent(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Dispose the AgentLoop at each checkpoint of another task's create: the create either
    hands back an agent that the loop's unload then disposed, or fails with FiberClosedError;
    nothing stays on the caller, in the registry or in the store."""
    outcomes = {await dispose_the_factory_at_step(k, tmp_path / f"s{k}") for k in range(1, 60)}
    assert outcomes == {"created then disposed", "refused"}


async def test_events_at_creation_come_in_order_and_the_agent_is_findable() -> None:
    """SessionCreated → AgentCreated → status events; a SessionCreated listener finds the
    agent in the registry."""
    async with ag.open_runtime() as root:
        log: list[str] = []

        def on_session(event: SessionCreated) -> None:
            agents = root.get("agents")
            log.append(f"session found={agents.get(event.session_id) is not None}")

        root.on(SessionCreated, on_session)
        root.on(ag.AgentCreated, lambda e: log.append("agent"))
        root.on(ag.AgentStatusChanged, lambda e: log.append(f"status {e.new.value}"))
        handle = await root.agents.create()
        handle.agent.prompt("hi")
        await handle.agent.when_idle()
        assert log[:3] == ["session found=True", "agent", "status running"]


# -- no turn without a claim ------------------------------------------------------------------


@attrs.define
class CountingModel:
    """Answers "ok" and counts the requests it was sent."""

    name: str = "counting"
    context_window: int | None = None
    requests: list[ModelRequest] = attrs.Factory(list)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        await trio.lowlevel.checkpoint()
        yield TextDelta("ok")
        yield Finished(FinishReason.STOP)


async def test_a_cancel_from_a_running_status_listener_starts_no_turn() -> None:
    """A listener of status "running" that cancels: the model is not asked, no turn is
    recorded, and the agent stays usable."""
    model = CountingModel()
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create()).agent
        cancelled: list[bool] = []

        def on_status(event: ag.AgentStatusChanged) -> None:
            if event.new is ag.AgentStatus.RUNNING and not cancelled:
                cancelled.append(agent.cancel())

        root.on(ag.AgentStatusChanged, on_status)
        agent.prompt("first")
        await agent.when_idle()
        assert cancelled == [True]
        assert model.requests == []
        assert not [r for r in agent.session.records if isinstance(r, TurnStarted)]
        agent.prompt("second")
        await agent.when_idle()
        assert len(model.requests) == 1


# -- cancel reaches children, and reports only what it did ------------------------------------


async def test_an_idle_parents_cancel_stops_its_running_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The parent has no work, its child is mid-turn: cancel() reaches the child as
    ParentCancel and returns True; with nothing anywhere it returns False."""
    async with ag.open_runtime(model=ScriptedModel.echo(delay=10.0)) as root:
        parent = (await root.agents.create(session_id="p")).agent
        child = (await root.agents.create(session_id="c", parent=parent)).agent
        requested: list[tuple[str, CancelCause]] = []
        root.on(ag.AgentCancelRequested, lambda e: requested.append((e.agent_id, e.cause)))
        child.prompt("long work")
        await trio.testing.wait_all_tasks_blocked()
        assert parent.cancel()
        await child.when_idle()
        [end] = [r for r in child.session.records if isinstance(r, TurnEnded)]
        assert end.stop_reason is StopReason.CANCELLED
        assert end.cause == ParentCancel(parent_id="p")
        assert requested == [("p", UserCancel()), ("c", ParentCancel(parent_id="p"))]
        assert not parent.cancel()
        assert len(requested) == 2


async def test_a_cancel_after_the_turn_recorded_its_end_reports_nothing() -> None:
    """A cancel in the window after TurnEnded is written returns False and emits nothing."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create()).agent
        answers: list[bool] = []
        requested: list[object] = []
        root.on(ag.AgentCancelRequested, requested.append)

        def on_append(event: SessionAppended) -> None:
            if isinstance(event.record, TurnEnded):
                answers.append(agent.cancel())

        root.on(SessionAppended, on_append)
        agent.prompt("hello")
        await agent.when_idle()
        assert answers == [False]
        assert requested == []
        [end] = [r for r in agent.session.records if isinstance(r, TurnEnded)]
        assert end.stop_reason is StopReason.COMPLETED


@attrs.frozen
class Unregistered(CancelCause):
    """A custom cause nobody registered."""


@register_cause
@attrs.frozen
class Deadline(CancelCause):
    """A custom cause registered for these tests (its tag: ``deadline``)."""

    seconds: int


async def test_an_unregistered_cause_is_refused_before_anything_changes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """cancel(Unregistered()) raises a TypeError naming the fix; the turn and the inbox are
    untouched, and the agent goes on to complete its work."""
    async with ag.open_runtime(model=ScriptedModel.echo(delay=1.0)) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("one")
        agent.prompt("two")
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(TypeError, match=r"^cancel cause Unregistered is not registered.*"):
            agent.cancel(Unregistered())
        assert len(agent.queued()) == 1
        await agent.when_idle()
        ends = [r.stop_reason for r in agent.session.records if isinstance(r, TurnEnded)]
        assert ends == [StopReason.COMPLETED, StopReason.COMPLETED]


async def test_a_registered_custom_cause_is_recorded_and_loads_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A registered cause ends the turn and survives a reload of the session."""
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store, model=ScriptedModel.echo(delay=5.0)) as root:
        handle = await root.agents.create(session_id="x")
        handle.agent.prompt("slow")
        await trio.testing.wait_all_tasks_blocked()
        assert handle.agent.cancel(Deadline(seconds=3))
        await handle.agent.when_idle()
        await handle.dispose()
        records = (await store.load("x")).records
        [end] = [r for r in records if isinstance(r, TurnEnded)]
        assert end.cause == Deadline(seconds=3)


async def test_cancel_and_discard_after_dispose_return_false() -> None:
    """Prompts still queued at dispose stay recorded for a resume; a cancel or discard of the
    disposed agent changes nothing and returns False instead of raising."""
    async with ag.open_runtime(model=ScriptedModel.echo(delay=10.0)) as root:
        handle = await root.agents.create(session_id="q")
        agent = handle.agent
        agent.prompt("running")
        await trio.testing.wait_all_tasks_blocked()
        queued = agent.prompt("queued")
        await handle.dispose()
        assert agent.cancel() is False
        assert agent.discard(queued) is False
        resumed = (await root.agents.resume("q")).agent
        assert [m.content for m in resumed.queued()] == ["queued"]


# -- the id is free when the agent is gone ------------------------------------------------------


async def test_resume_from_an_agent_disposed_listener_waits_for_the_final_flush(
    tmp_path: Path,
) -> None:
    """Woken by AgentDisposed, a resume of the same id succeeds: it waits for the draining
    session instead of refusing the id as in use. (Which of the two tasks trio runs first
    after the final flush's checkpoint varies, so the round is repeated.)"""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        handle = await root.agents.create(session_id="d")
        await assert_works(handle)
        for round_ in range(8):
            disposed = trio.Event()
            entry = root.on(ag.AgentDisposed, lambda e, ev=disposed: ev.set())  # type: ignore[misc]
            resumed: list[ag.AgentHandle] = []

            async def resume_when_gone(
                ev: trio.Event = disposed, into: list[ag.AgentHandle] = resumed
            ) -> None:
                await ev.wait()
                into.append(await root.agents.resume("d"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(resume_when_gone)
                await trio.testing.wait_all_tasks_blocked()
                handle.agent.inject(f"note {round_}")
                await handle.dispose()
            await entry.close()
            [again] = resumed
            assert again.agent is not handle.agent
            assert [m.content for m in again.agent.queued()][-1] == f"note {round_}"
            handle = again
        await assert_works(handle)


CLOSED_CALLER = (
    r"^agent '{id}' was not created: the calling fiber co-owns the agents it creates, and "
    r"fiber {fiber} is (unloading|disposed); create it from a fiber that is loading or active$"
)


async def test_a_resume_from_a_task_a_disposed_listener_started_publishes_nothing(
    tmp_path: Path,
) -> None:
    """A task spawned by an AgentDisposed listener runs in the gone agent's fiber: its resume
    is refused with a clear error before anything is published, and the id stays free."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        handle = await root.agents.create(session_id="d")
        await assert_works(handle)
        created: list[str] = []
        root.on(ag.AgentCreated, lambda e: created.append(e.agent_id))
        failures: list[BaseException] = []

        async def resume() -> None:
            try:
                await root.agents.resume("d")
            except FiberClosedError as exc:
                failures.append(exc)

        async with trio.open_nursery() as nursery:
            # The listener runs in the agent fiber's task: the task inherits its context.
            listener = root.on(ag.AgentDisposed, lambda e: nursery.start_soon(resume))
            await handle.dispose()
        await listener.close()
        [failure] = failures
        assert re.fullmatch(CLOSED_CALLER.format(id="d", fiber=r"agent:d#\d+"), str(failure))
        assert created == []
        assert root.agents.get("d") is None
        assert root.sessions.live() == ()
        again = await root.agents.resume("d")
        await assert_works(again)


async def test_a_hand_over_agent_created_in_a_deferred_teardown_publishes_nothing() -> None:
    """A plugin creating an agent from its own ctx.defer teardown is refused with a clear
    error before anything is published; the id stays free."""
    failures: list[BaseException] = []

    async def hand_over(ctx: Context) -> None:
        try:
            await ctx.agents.create(session_id="h")
        except FiberClosedError as exc:
            failures.append(exc)

    async def apply(ctx: Context, config: None) -> None:
        ctx.defer(hand_over, ctx)

    async with ag.open_runtime() as root:
        created: list[str] = []
        root.on(ag.AgentCreated, lambda e: created.append(e.agent_id))
        fiber = await root.plugin(P("handing-over", apply, inject=("agents",)))
        await fiber.dispose()
        [failure] = failures
        assert re.fullmatch(CLOSED_CALLER.format(id="h", fiber=r"handing-over#\d+"), str(failure))
        assert created == []
        assert root.agents.list() == ()
        assert root.sessions.live() == ()
        handle = await root.agents.create(session_id="h")
        await assert_works(handle)


# -- no back doors around the handle ---------------------------------------------------------------


async def test_an_observer_cannot_end_a_live_agents_session() -> None:
    """detach() or abandon() of a live agent's session is refused; the agent keeps working."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create()
        agent = handle.agent
        with pytest.raises(SessionInUseError, match=r"^session .* belongs to a live agent"):
            await root.sessions.detach(agent.session)
        with pytest.raises(SessionInUseError, match=r"^session .* belongs to a live agent"):
            await root.sessions.abandon(agent.session)
        await assert_works(handle)
        await handle.dispose()
        assert root.sessions.live() == ()


async def test_the_scope_of_an_agent_hands_out_no_fiber() -> None:
    """scope_of(agent) can own cleanups, but exposes no fiber to tear the agent down with."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create()
        scope = root.agents.scope_of(handle.agent)
        assert not hasattr(scope, "fiber")
        assert not hasattr(scope, "plugin")
        ran: list[str] = []

        async def cleanup() -> None:
            ran.append("cleanup")

        scope.defer(cleanup)
        await handle.dispose()
        assert ran == ["cleanup"]


async def test_the_fiber_tree_cannot_dispose_an_agent_only_its_handle_can() -> None:
    """An agent's fiber found through runtime.fibers or Fiber.children refuses dispose();
    the agent keeps working, and the handle still tears it down."""
    async with ag.open_runtime() as root:
        handle = await root.agents.create(session_id="a")
        child = await root.agents.create(session_id="c", parent=handle.agent)
        runtime = root.fiber.runtime
        [fiber] = [f for f in runtime.fibers if f.name == "agent:a"]
        [child_fiber] = [f for f in fiber.children if f.name == "agent:c"]
        for found, agent_id in ((fiber, "a"), (child_fiber, "c"), (fiber.context.fiber, "a")):
            with pytest.raises(
                RuntimeError,
                match=rf"^fiber agent:{agent_id}#\d+ cannot be disposed from the fiber tree: "
                rf"agent '{agent_id}' is torn down by its handle; call dispose\(\) on the "
                r"AgentHandle that create\(\) or resume\(\) returned$",
            ):
                await found.dispose()
        await assert_works(handle)
        await assert_works(child)
        await handle.dispose()
        assert root.agents.list() == ()
        assert [f.name for f in runtime.fibers if f.name.startswith("agent:")] == []
