"""Fiber life: states, failed apply, task-bound effects, background tasks, dispose during apply."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from tests.helpers.support import P, rec, state_of
from trio_agents._base import InvalidTransitionError
from trio_agents.cancel import CancelCause, DisposedCancel, current_cause
from trio_agents.kernel import (
    Context,
    Fiber,
    FiberClosedError,
    FiberFailed,
    FiberState,
    FiberStatistics,
    open_root,
)
from trio_agents.kernel._context import current_context
from trio_agents.kernel._states import TRANSITIONS, check_transition


async def test_fiber_goes_loading_active_unloading_disposed() -> None:
    """A fiber is loading during apply, active after, unloading while it unwinds, then disposed."""
    seen: list[FiberState] = []

    async def apply(ctx: Context, config: None) -> None:
        seen.append(ctx.fiber.state)

        @asynccontextmanager
        async def watch() -> AsyncIterator[None]:
            yield
            seen.append(ctx.fiber.state)

        await ctx.effect(watch())

    async with open_root() as root:
        fiber = await root.plugin(P("life", apply))
        seen.append(fiber.state)
        await fiber.dispose()
        seen.append(fiber.state)
        assert fiber not in root.fiber.runtime.fibers
    assert seen == [
        FiberState.LOADING,
        FiberState.ACTIVE,
        FiberState.UNLOADING,
        FiberState.DISPOSED,
    ]


async def test_failed_apply_unwinds_what_it_entered_and_plugin_raises_it() -> None:
    """If apply raises, its entries unwind, the fiber is failed and ctx.plugin() raises."""
    log: list[str] = []
    fibers: list[Fiber] = []
    failures: list[FiberFailed] = []

    async def task() -> None:
        try:
            await trio.sleep_forever()
        finally:
            log.append("task stopped")

    async def apply(ctx: Context, config: None) -> None:
        fibers.append(ctx.fiber)
        await ctx.effect(rec(log, "e1"))
        ctx.start_soon(task)
        await ctx.effect(rec(log, "e2"))
        raise ValueError("bad apply")

    async with open_root() as root:
        root.on(FiberFailed, failures.append)
        with pytest.raises(ValueError, match=r"^bad apply$"):
            await root.plugin(P("broken", apply))
        (fiber,) = fibers
        assert fiber.state is FiberState.FAILED
        assert isinstance(fiber.exception, ValueError)
        assert fiber not in root.fiber.children
        await fiber.dispose()  # disposing a failed fiber is a no-op
    assert log == ["enter e1", "enter e2", "exit e2", "task stopped", "exit e1"]
    assert [(f.plugin, type(f.error)) for f in failures] == [("broken", ValueError)]


def _failure_logs(caplog: pytest.LogCaptureFixture, name: str) -> list[int]:
    """The levels of the "fiber NAME#N failed" records."""
    return [
        r.levelno
        for r in caplog.records
        if r.name == "trio_agents"
        and r.getMessage().startswith(f"fiber {name}#")
        and r.getMessage().endswith(" failed")
    ]


async def test_a_failed_apply_handed_to_its_creator_is_not_logged_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """ctx.plugin() raises the failure: one report, the creator's (the log has it at DEBUG)."""

    async def apply(ctx: Context, config: None) -> None:
        raise ValueError("bad apply")

    with caplog.at_level(logging.DEBUG, "trio_agents"):
        async with open_root() as root:
            with pytest.raises(ValueError, match=r"^bad apply$"):
                await root.plugin(P("handed", apply))
    assert _failure_logs(caplog, "handed") == [logging.DEBUG]


async def test_a_failure_no_one_is_handed_is_logged_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pending fiber's later apply and an active fiber's task fail with no caller: the log."""
    go = trio.Event()

    async def later(ctx: Context, config: None) -> None:
        raise ValueError("bad later apply")

    async def crash() -> None:
        await go.wait()
        raise RuntimeError("task crashed")

    async def active(ctx: Context, config: None) -> None:
        ctx.start_soon(crash)

    async def provide(ctx: Context, config: None) -> None:
        ctx.provide("svc", 1)

    with caplog.at_level(logging.DEBUG, "trio_agents"):
        async with open_root() as root:
            pending = await root.plugin(P("later", later, inject=("svc",)))
            assert state_of(pending) is FiberState.PENDING
            await root.plugin(P("provider", provide))
            crashing = await root.plugin(P("active", active))
            go.set()
            await trio.testing.wait_all_tasks_blocked()
            assert pending.state is FiberState.FAILED
            assert crashing.state is FiberState.FAILED
    assert _failure_logs(caplog, "later") == [logging.ERROR]
    assert _failure_logs(caplog, "active") == [logging.ERROR]


async def test_a_failure_its_cancelled_creator_cannot_take_is_logged_as_an_error(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    """A creator cancelled while apply fails sees Cancelled; the failure goes to the log."""

    async def apply(ctx: Context, config: None) -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("failed while cancelled")

    with caplog.at_level(logging.DEBUG, "trio_agents"):
        async with open_root() as root:
            with trio.move_on_after(1) as scope:
                await root.plugin(P("orphaned", apply))
            assert scope.cancelled_caught
    # At DEBUG when the fiber settled (its creator still waited), at ERROR when it could not
    # take it.
    assert _failure_logs(caplog, "orphaned") == [logging.DEBUG, logging.ERROR]


async def test_failed_apply_with_a_failing_exit_raises_both() -> None:
    """A failed apply whose unwinding also fails raises an ExceptionGroup of both."""

    @asynccontextmanager
    async def bad() -> AsyncIterator[None]:
        try:
            yield
        finally:
            raise KeyError("exit")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(bad())
        raise ValueError("apply")

    async with open_root() as root:
        with pytest.raises(
            ExceptionGroup,
            match=r"^plugin 'doubly' failed to apply, and unwinding it failed too",
        ) as info:
            await root.plugin(P("doubly", apply))
    assert info.group_contains(ValueError, match=r"^apply$")
    assert info.group_contains(KeyError)


async def test_task_bound_effects_work_from_apply_and_from_background_tasks() -> None:
    """Effects that open a nursery or a cancel scope are entered and exited in the fiber's task."""
    log: list[str] = []
    ready = trio.Event()

    @asynccontextmanager
    async def with_nursery(name: str) -> AsyncIterator[trio.Nursery]:
        async with trio.open_nursery() as nursery:

            async def worker() -> None:
                log.append(f"{name} worker running")
                try:
                    await trio.sleep_forever()
                finally:
                    log.append(f"{name} worker stopped")

            nursery.start_soon(worker)
            try:
                yield nursery
            finally:
                nursery.cancel_scope.cancel()

    @asynccontextmanager
    async def with_scope() -> AsyncIterator[trio.CancelScope]:
        with trio.CancelScope() as scope:
            yield scope
        log.append("scope exited")

    # Invariant: the task only records what it saw, and sets ``ready`` however it ends; the
    # test asserts after. An assert (or a failed effect) in the task would otherwise leave
    # ``ready`` unset and hang the test instead of failing it.
    seen: list[object] = []

    async def background(ctx: Context) -> None:
        try:
            seen.append(trio.lowlevel.current_task() is ctx.fiber._task)
            seen.append(type(await ctx.effect(with_nursery("bg"))))
            seen.append(type(await ctx.effect(with_scope())))
        finally:
            ready.set()
        await trio.sleep_forever()

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(with_nursery("apply"))
        ctx.start_soon(background, ctx)

    async with open_root() as root:
        fiber = await root.plugin(P("bound", apply))
        await ready.wait()
        assert seen == [False, trio.Nursery, trio.CancelScope]
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(log) == ["apply worker running", "bg worker running"]
        log.clear()
        await fiber.dispose()
    # The task's entry is newer than apply's nursery, so it stops before that nursery exits;
    # the task's own effects are newer still (requested after it started) and exit first.
    assert log == [
        "scope exited",
        "bg worker stopped",
        "apply worker stopped",
    ]


async def test_effect_whose_enter_fails_raises_in_the_requesting_task() -> None:
    """A forwarded effect that fails to enter raises in its requester and owns nothing."""
    seen: list[str] = []

    class Refuses:
        async def __aenter__(self) -> None:
            raise OSError("no")

        async def __aexit__(self, *exc_info: object) -> None:
            raise AssertionError("never entered, so never exited")  # pragma: no cover

    async def background(ctx: Context) -> None:
        try:
            await ctx.effect(Refuses())
        except OSError as exc:
            seen.append(str(exc))

    async def apply(ctx: Context, config: None) -> None:
        ctx.start_soon(background, ctx)

    async with open_root() as root:
        fiber = await root.plugin(P("refusing", apply))
        await trio.testing.wait_all_tasks_blocked()
        assert seen == ["no"]
        assert fiber.state is FiberState.ACTIVE
        assert fiber.statistics().entries == ()


async def test_effect_rejects_objects_that_are_not_async_context_managers() -> None:
    """ctx.effect(x) with a non-CM says what it takes and hints at a missing call."""
    async with open_root() as root:
        with pytest.raises(
            TypeError,
            match=r"^ctx\.effect\(\) takes an async context manager; got function "
            r"\(did you forget to call it\?\)$",
        ):
            await root.effect(rec)  # type: ignore[arg-type]


async def test_dispose_while_apply_hangs_interrupts_apply_with_disposed_cancel() -> None:
    """Disposing a loading fiber cancels apply with DisposedCancel, readable in apply."""
    log: list[str] = []
    causes: list[CancelCause | None] = []
    reasons: list[str | None] = []
    fibers: list[Fiber] = []
    results: list[Fiber] = []

    async def apply(ctx: Context, config: None) -> None:
        fibers.append(ctx.fiber)
        await ctx.effect(rec(log, "e"))
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            causes.append(current_cause())
            reasons.append(exc.reason)
            raise

    async with open_root() as root:

        async def applier() -> None:
            results.append(await root.plugin(P("hangs", apply)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(applier)
            await trio.testing.wait_all_tasks_blocked()
            (fiber,) = fibers
            assert state_of(fiber) is FiberState.LOADING
            await fiber.dispose()
            assert state_of(fiber) is FiberState.DISPOSED
    assert causes == [DisposedCancel()]
    assert reasons == ["DisposedCancel()"]
    assert log == ["enter e", "exit e"]
    assert results == fibers


async def test_dispose_racing_the_spawn_still_cancels_apply_with_its_cause() -> None:
    """A dispose issued as soon as the fiber exists: apply never runs, or sees DisposedCancel.

    Which one depends on whether the fiber's task started before the dispose (trio's choice).
    """
    ran: list[CancelCause | None] = []

    async def apply(ctx: Context, config: None) -> None:
        try:
            await trio.sleep_forever()
        finally:
            ran.append(current_cause())

    async def parent(ctx: Context, config: None) -> None:
        runtime = ctx.fiber.runtime

        async def dispose_child_soon() -> None:
            while not any(f.name == "child" for f in runtime.fibers):
                await trio.lowlevel.checkpoint()
            (child,) = (f for f in runtime.fibers if f.name == "child")
            await child.dispose()

        ctx.start_soon(dispose_child_soon)
        child = await ctx.plugin(P("child", apply))
        assert child.state is FiberState.DISPOSED

    async with open_root() as root:
        await root.plugin(P("parent", parent))
    assert ran in ([], [DisposedCancel()])


async def test_background_task_failure_fails_only_its_fiber() -> None:
    """A raising background task fails its fiber (FiberFailed); the runtime keeps running."""
    log: list[str] = []
    failures: list[FiberFailed] = []
    go = trio.Event()

    async def crash() -> None:
        await go.wait()
        raise RuntimeError("task crashed")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "e"))
        ctx.start_soon(crash)

    async def healthy(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "healthy"))

    async with open_root() as root:
        root.on(FiberFailed, failures.append)
        fiber = await root.plugin(P("crashy", apply))
        other = await root.plugin(P("healthy", healthy))
        go.set()
        await trio.testing.wait_all_tasks_blocked()
        assert fiber.state is FiberState.FAILED
        assert str(fiber.exception) == "task crashed"
        assert other.state is FiberState.ACTIVE
        assert root.fiber.state is FiberState.ACTIVE
        assert [f.fiber_id for f in failures] == [fiber.id]
        again = await root.plugin(P("healthy2", healthy))
        assert again.state is FiberState.ACTIVE
    assert log[:3] == ["enter e", "enter healthy", "exit e"]


async def test_task_failure_while_loading_fails_the_fiber_and_plugin_raises() -> None:
    """A background task that raises while apply still runs fails the load."""

    async def crash() -> None:
        raise LookupError("early crash")

    async def apply(ctx: Context, config: None) -> None:
        ctx.start_soon(crash)
        await trio.sleep_forever()

    async with open_root() as root:
        with pytest.raises(LookupError, match=r"^early crash$"):
            await root.plugin(P("early", apply))


async def test_task_failing_while_being_stopped_is_a_teardown_error() -> None:
    """A task that raises on its cancellation makes dispose() raise; the fiber is disposed."""

    async def stubborn() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise RuntimeError("refusing to stop")

    async def apply(ctx: Context, config: None) -> None:
        ctx.start_soon(stubborn)

    async with open_root() as root:
        fiber = await root.plugin(P("stubborn", apply))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(ExceptionGroup, match=r"^teardown of fiber stubborn#\d+") as info:
            await fiber.dispose()
        assert info.group_contains(RuntimeError, match=r"^refusing to stop$")
        assert fiber.state is FiberState.DISPOSED


async def test_finished_task_leaves_the_stack() -> None:
    """A background task that returns drops its entry: short tasks do not accumulate."""

    async def quick() -> None:
        await trio.lowlevel.checkpoint()

    async def apply(ctx: Context, config: None) -> None:
        for _ in range(3):
            ctx.start_soon(quick)
        assert len(ctx.fiber.statistics().entries) == 3

    async with open_root() as root:
        fiber = await root.plugin(P("quick", apply))
        await trio.testing.wait_all_tasks_blocked()
        assert fiber.statistics() == FiberStatistics(
            id=fiber.id, state=FiberState.ACTIVE, entries=(), children=0
        )


async def test_start_returns_the_started_value_and_raises_early_failures() -> None:
    """ctx.start behaves like nursery.start: started(value) returns it, early errors propagate."""
    values: list[object] = []

    async def server(port: int, *, task_status: Any) -> None:
        task_status.started(port + 1)
        await trio.sleep_forever()

    async def broken(*, task_status: Any) -> None:
        raise ConnectionError("cannot bind")

    async def apply(ctx: Context, config: None) -> None:
        values.append(await ctx.start(server, 8000))
        with pytest.raises(ConnectionError, match=r"^cannot bind$"):
            await ctx.start(broken)

    async with open_root() as root:
        fiber = await root.plugin(P("server", apply))
        assert values == [8001]
        assert fiber.statistics().entries == (f"task {server.__qualname__}",)
        assert fiber.state is FiberState.ACTIVE


async def test_started_task_failing_later_fails_the_fiber() -> None:
    """A task started with ctx.start that raises after started() fails its fiber."""
    go = trio.Event()

    async def server(*, task_status: Any) -> None:
        task_status.started()
        await go.wait()
        raise RuntimeError("later")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.start(server)

    async with open_root() as root:
        fiber = await root.plugin(P("later", apply))
        go.set()
        await trio.testing.wait_all_tasks_blocked()
        assert fiber.state is FiberState.FAILED


async def test_child_fibers_are_listed_and_leave_when_disposed() -> None:
    """fiber.children lists live children oldest first; a disposed child leaves the list."""

    async def noop(ctx: Context, config: None) -> None:
        pass

    async with open_root() as root:
        a = await root.plugin(P("a", noop))
        b = await root.plugin(P("b", noop))
        assert root.fiber.children == (a, b)
        assert (a.name, a.parent, a.plugin.name) == ("a", root.fiber, "a")  # type: ignore[attr-defined]
        await a.dispose()
        assert list(root.fiber.children) == [b]
        assert repr(b) == f"<Fiber {b.id} active>"
        assert repr(b.context) == f"<Context of <Fiber {b.id} active>>"


async def test_current_context_names_the_running_fiber() -> None:
    """current_context() is the fiber whose task runs; outside every fiber it raises."""
    seen: list[Context] = []

    async def apply(ctx: Context, config: None) -> None:
        seen.append(current_context())

    async with open_root() as root:
        assert current_context() is root
        fiber = await root.plugin(P("who", apply))
        assert seen == [fiber.context]
    with pytest.raises(RuntimeError, match=r"^no trio_agents fiber is running in this task"):
        current_context()


def test_transition_table_refuses_illegal_moves_and_keeps_state() -> None:
    """check_transition allows exactly the table's moves and names the legal ones."""
    for old, legal in TRANSITIONS.items():
        for new in FiberState:
            if new in legal:
                assert check_transition(old, new) is new
            else:
                with pytest.raises(InvalidTransitionError, match=r"^a fiber cannot go from "):
                    check_transition(old, new)
    with pytest.raises(
        InvalidTransitionError,
        match=r"^a fiber cannot go from 'disposed' to 'active'; legal next states: none \(final\)$",
    ):
        check_transition(FiberState.DISPOSED, FiberState.ACTIVE)
    assert {s for s in FiberState if s.is_final} == {FiberState.DISPOSED, FiberState.FAILED}
    assert {s for s in FiberState if s.is_open} == {FiberState.LOADING, FiberState.ACTIVE}


async def test_cancelling_the_caller_of_plugin_disposes_the_loading_fiber() -> None:
    """ctx.plugin() cancelled from outside while apply runs unwinds the half-loaded fiber."""
    log: list[str] = []
    fibers: list[Fiber] = []

    async def apply(ctx: Context, config: None) -> None:
        fibers.append(ctx.fiber)
        await ctx.effect(rec(log, "e"))
        await trio.sleep_forever()

    async with open_root() as root:
        with trio.CancelScope() as scope:

            async def cancel_soon() -> None:
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_soon)
                await root.plugin(P("interrupted", apply))
        assert scope.cancelled_caught
        assert fibers[0].state is FiberState.DISPOSED
    assert log == ["enter e", "exit e"]
    with pytest.raises(FiberClosedError):
        await fibers[0].context.effect(rec(log, "late"))


def test_the_agent_status_table_uses_the_same_check_and_wording() -> None:
    """One StateTable checks fibers and agents: the refusal names the legal next states."""
    from trio_agents.agent._status import AgentStatus, check_status

    with pytest.raises(
        InvalidTransitionError,
        match=r"^an agent cannot go from 'disposing' to 'idle'; legal next states: \['disposed'\]$",
    ):
        check_status(AgentStatus.DISPOSING, AgentStatus.IDLE)


async def test_a_child_context_owns_its_entries_and_unwinds_in_its_parents_order() -> None:
    """ctx.child() is an empty active child fiber: disposing it unwinds only its entries, and
    a child still live unwinds with its parent, in the reverse order of set-up."""
    log: list[str] = []

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "before"))
        gone = await ctx.child("gone")
        await gone.effect(rec(log, "gone"))
        kept = await ctx.child("kept")
        await kept.effect(rec(log, "kept"))
        await ctx.effect(rec(log, "after"))
        assert (kept.fiber.name, state_of(kept.fiber)) == ("kept", FiberState.ACTIVE)
        assert kept.fiber.parent is ctx.fiber
        await gone.fiber.dispose()
        log.append("gone disposed")

    async with open_root() as root:
        fiber = await root.plugin(P("owner", apply))
        await fiber.dispose()
    assert log == [
        "enter before",
        "enter gone",
        "enter kept",
        "enter after",
        "exit gone",
        "gone disposed",
        "exit after",
        "exit kept",
        "exit before",
    ]


async def test_a_disposed_fiber_is_freed_without_the_collector() -> None:
    """A done fiber drops what refers back to it (its context, task and stack entry): one
    nobody holds is freed by reference counting, and a late reader of ``fiber.context`` gets
    a context that refuses what the done fiber refuses."""
    import gc
    import weakref

    async def nothing() -> None:
        await trio.lowlevel.checkpoint()

    async def apply(ctx: Context, config: None) -> None:
        ctx.defer(nothing)
        ctx.start_soon(trio.sleep_forever)

    async with open_root() as root:
        gc.collect()
        gc.disable()
        try:
            fiber = await root.plugin(P("short", apply))
            context = fiber.context
            assert fiber.context is context  # one context while the fiber lives
            await fiber.dispose()
            late = fiber.context
            assert late.fiber is fiber
            with pytest.raises(FiberClosedError):
                late.defer(nothing)
            ref = weakref.ref(fiber)
            del fiber, context, late
            assert ref() is None
        finally:
            gc.enable()


async def test_a_guarded_fiber_is_disposed_only_by_its_disposer_or_its_parent() -> None:
    """After guard(), dispose() refuses with the reason; the disposer and the parent's
    teardown still tear the fiber down; a second guard is refused."""
    log: list[str] = []

    def guarded(name: str) -> P:
        async def apply(ctx: Context, config: None) -> None:
            await ctx.effect(rec(log, name))

        return P(name, apply)

    async with open_root() as root:
        first = await root.plugin(guarded("first"))
        disposer = first.guard("ask its owner")
        with pytest.raises(RuntimeError, match=r"^fiber first#\d+ is guarded already; "):
            first.guard("again")
        with pytest.raises(
            RuntimeError,
            match=r"^fiber first#\d+ cannot be disposed from the fiber tree: ask its owner$",
        ):
            await first.dispose()
        assert first.state is FiberState.ACTIVE
        await disposer()
        assert state_of(first) is FiberState.DISPOSED
        second = await root.plugin(guarded("second"))
        second.guard("ask its owner")
    assert second.state is FiberState.DISPOSED
    assert log == ["enter first", "exit first", "enter second", "exit second"]


async def test_a_guard_given_a_function_says_what_it_makes_of_the_fiber() -> None:
    """guard(fn) calls fn with the fiber only when a dispose is refused, and says its text."""
    asked: list[str] = []

    def refusal(fiber: Fiber) -> str:
        asked.append(fiber.name)
        return f"ask the owner of {fiber.name}"

    async def apply(ctx: Context, config: None) -> None:
        pass

    async with open_root() as root:
        fiber = await root.plugin(P("held", apply))
        disposer = fiber.guard(refusal)
        assert asked == []
        with pytest.raises(
            RuntimeError,
            match=r"^fiber held#\d+ cannot be disposed from the fiber tree: ask the owner of held$",
        ):
            await fiber.dispose()
        assert asked == ["held"]
        await disposer()


async def test_a_quick_apply_activates_without_waking_the_fiber_task() -> None:
    """An apply that returns activates the fiber itself: the fiber's task steps once (to
    start), so ctx.plugin() returns a scheduler pass earlier than if the task took the news."""
    steps: list[str] = []

    class Steps(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            steps.append(task.name)

    async def apply(ctx: Context, config: None) -> None:
        await trio.lowlevel.checkpoint()

    async with open_root() as root:
        instrument = Steps()
        trio.lowlevel.add_instrument(instrument)
        try:
            fiber = await root.plugin(P("quick", apply))
        finally:
            trio.lowlevel.remove_instrument(instrument)
        assert fiber.state is FiberState.ACTIVE
        assert steps.count(f"fiber {fiber.id}") == 1
