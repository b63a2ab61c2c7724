"""The one LIFO stack: teardown order, memoized dispose, failing exits, refused entries."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from tests.helpers.support import P, rec
from trio_agents.cancel import DisposedCancel, current_cause
from trio_agents.kernel import Context, Entry, Fiber, FiberClosedError, FiberState, open_root
from trio_agents.kernel._stack import OwnedStack


async def forever(log: list[str], name: str) -> None:
    log.append(f"start {name}")
    try:
        await trio.sleep_forever()
    finally:
        log.append(f"stop {name} {current_cause()!r}")


async def test_teardown_is_reverse_of_setup_across_effects_children_and_tasks() -> None:
    """Effects, background tasks and child fibers unwind in exactly reverse set-up order."""
    log: list[str] = []

    async def child(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "child-effect"))

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "e1"))
        ctx.start_soon(forever, log, "t1")
        await ctx.plugin(P("child", child))
        await ctx.effect(rec(log, "e2"))
        ctx.start_soon(forever, log, "t2")
        await ctx.effect(rec(log, "e3"))

    async with open_root() as root:
        fiber = await root.plugin(P("parent", apply))
        await trio.testing.wait_all_tasks_blocked()
        labels = fiber.statistics().entries
        assert [label.split()[0] for label in labels] == [
            "effect",
            "task",
            "fiber",
            "effect",
            "task",
            "effect",
        ]
        log.clear()
        await fiber.dispose()
        assert fiber.state is FiberState.DISPOSED
    assert log == [
        "exit e3",
        "stop t2 DisposedCancel()",
        "exit e2",
        "exit child-effect",
        "stop t1 DisposedCancel()",
        "exit e1",
    ]


async def test_root_exit_unwinds_every_fiber_in_reverse_order() -> None:
    """Leaving open_root disposes the whole tree, newest fiber first."""
    log: list[str] = []

    def named(name: str) -> P:
        async def apply(ctx: Context, config: None) -> None:
            await ctx.effect(rec(log, name))

        return P(name, apply)

    async with open_root() as root:
        a = await root.plugin(named("a"))
        b = await root.plugin(named("b"))
    assert log == ["enter a", "enter b", "exit b", "exit a"]
    assert (a.state, b.state) == (FiberState.DISPOSED, FiberState.DISPOSED)
    assert root.fiber.state is FiberState.DISPOSED


async def test_concurrent_dispose_callers_join_one_teardown() -> None:
    """Two dispose() callers both return only after the single teardown completed."""
    release = trio.Event()
    exits: list[str] = []
    returned: list[str] = []

    @asynccontextmanager
    async def slow_exit() -> AsyncIterator[None]:
        yield
        await release.wait()
        exits.append("exit")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(slow_exit())

    async with open_root() as root:
        fiber = await root.plugin(P("slow", apply))

        async def disposer(who: str) -> None:
            await fiber.dispose()
            returned.append(who)
            assert exits == ["exit"]
            assert fiber.state is FiberState.DISPOSED

        async with trio.open_nursery() as nursery:
            nursery.start_soon(disposer, "a")
            nursery.start_soon(disposer, "b")
            await trio.testing.wait_all_tasks_blocked()
            assert returned == []
            assert fiber.state is FiberState.UNLOADING
            release.set()
        assert sorted(returned) == ["a", "b"]
        await fiber.dispose()  # a repeated call after completion returns at once
    assert exits == ["exit"]


async def test_failing_exit_still_unwinds_every_entry_and_raises_group() -> None:
    """A failing exit is reported as an ExceptionGroup after the rest of the stack unwound."""
    log: list[str] = []

    @asynccontextmanager
    async def bad() -> AsyncIterator[None]:
        yield
        raise ValueError("boom")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "e1"))
        await ctx.effect(bad())
        await ctx.effect(rec(log, "e3"))

    async with open_root() as root:
        fiber = await root.plugin(P("bad", apply))
        with pytest.raises(ExceptionGroup, match=r"^teardown of fiber bad#\d+ failed") as info:
            await fiber.dispose()
        assert info.group_contains(ValueError, match=r"^boom$")
        assert log == ["enter e1", "enter e3", "exit e3", "exit e1"]
        # Repeated callers see the same failure: it is never swallowed.
        with pytest.raises(ExceptionGroup, match=r"^teardown of fiber bad#\d+ failed"):
            await fiber.dispose()


async def test_failing_exit_of_a_child_surfaces_from_the_root() -> None:
    """A child's failing exit reaches whoever tears the tree down, nested in groups."""

    @asynccontextmanager
    async def bad() -> AsyncIterator[None]:
        yield
        raise KeyError("child exit")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(bad())

    with pytest.raises(ExceptionGroup, match=r"^teardown of fiber root#\d+ failed") as info:
        async with open_root() as root:
            await root.plugin(P("kid", apply))
    assert info.group_contains(KeyError, depth=2)


async def test_body_error_and_teardown_error_are_both_reported() -> None:
    """If the runtime body raises and teardown fails, both come out together."""

    @asynccontextmanager
    async def bad() -> AsyncIterator[None]:
        yield
        raise KeyError("teardown")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(bad())

    async def run() -> None:
        async with open_root() as root:
            await root.plugin(P("kid", apply))
            raise RuntimeError("body")

    with pytest.raises(
        BaseExceptionGroup, match=r"^the runtime's body raised, and its teardown failed too"
    ) as info:
        await run()
    assert info.group_contains(RuntimeError, match=r"^body$")
    assert info.group_contains(KeyError, depth=3)


async def test_entries_are_refused_on_an_unloading_fiber() -> None:
    """While a fiber unwinds, every kind of new entry raises FiberClosedError."""
    refused: list[str] = []

    async def noop(ctx: Context, config: None) -> None:
        pass

    async def apply(ctx: Context, config: None) -> None:
        @asynccontextmanager
        async def tries_to_add() -> AsyncIterator[None]:
            yield
            assert ctx.fiber.state is FiberState.UNLOADING
            attempts: list[Callable[[], Awaitable[object]]] = [
                lambda: ctx.effect(rec([], "late")),
                lambda: ctx.plugin(P("late-child", noop)),
            ]
            for attempt in attempts:
                with pytest.raises(FiberClosedError) as info:
                    await attempt()
                refused.append(str(info.value))
            sync_attempts: list[Callable[[], object]] = [
                lambda: ctx.start_soon(trio.sleep_forever),
                lambda: ctx.provide("late", object()),
                lambda: ctx.on(int, print),
                lambda: ctx.defer(trio.sleep, 0),
            ]
            for sync_attempt in sync_attempts:
                with pytest.raises(FiberClosedError) as info:
                    sync_attempt()
                refused.append(str(info.value))

        await ctx.effect(tries_to_add())

    async with open_root() as root:
        fiber = await root.plugin(P("closing", apply))
        await fiber.dispose()
    assert len(refused) == 6
    for message in refused:
        assert re.fullmatch(
            r"fiber closing#\d+ is unloading; it cannot take .+ any more "
            r"\(add it to a fiber that is loading or active\)",
            message,
        ), message
    assert "the effect _AsyncGeneratorContextManager" in refused[0]
    assert "the task" in refused[2]


async def test_effect_on_a_disposed_fiber_is_refused_with_its_state() -> None:
    """After disposal, ctx.effect() names the disposed state."""
    contexts: list[Context] = []

    async def apply(ctx: Context, config: None) -> None:
        contexts.append(ctx)

    async with open_root() as root:
        fiber = await root.plugin(P("gone", apply))
        await fiber.dispose()
        with pytest.raises(
            FiberClosedError,
            match=r"^fiber gone#\d+ is disposed; it cannot take the effect "
            r"_AsyncGeneratorContextManager any more",
        ):
            await contexts[0].effect(rec([], "x"))
        assert isinstance(FiberClosedError("x"), trio.ClosedResourceError)


async def test_defer_runs_its_cleanup_in_order_and_close_runs_it_early() -> None:
    """ctx.defer is an entry like any other; Entry.close runs it once, ahead of teardown."""
    log: list[str] = []
    entries: list[Entry] = []

    async def note(what: str) -> None:
        log.append(what)

    async def apply(ctx: Context, config: None) -> None:
        ctx.defer(note, "first")
        entries.append(ctx.defer(note, "early"))
        ctx.defer(note, "last")

    async with open_root() as root:
        fiber = await root.plugin(P("defers", apply))
        entry = entries[0]
        assert entry.owned
        await entry.close()
        assert not entries[0].owned
        assert log == ["early"]
        await entries[0].close()  # a second close joins the first run: no second exit
        assert "owned=False" in repr(entries[0])
        await fiber.dispose()
    assert log == ["early", "last", "first"]


async def test_discarded_entry_never_runs_its_exit() -> None:
    """Entry.discard forgets the entry: teardown does not run it."""
    log: list[str] = []

    async def note(what: str) -> None:
        log.append(what)

    async def apply(ctx: Context, config: None) -> None:
        ctx.defer(note, "kept")
        ctx.defer(note, "forgotten").discard()

    async with open_root() as root:
        fiber = await root.plugin(P("discards", apply))
        assert len(fiber.statistics().entries) == 1
        await fiber.dispose()
    assert log == ["kept"]


async def test_concurrent_entry_closers_join_one_exit() -> None:
    """Two tasks closing one entry run its exit once; both return after it finished."""
    release = trio.Event()
    runs: list[str] = []

    async def exit_() -> None:
        runs.append("run")
        await release.wait()

    stack = OwnedStack()
    entry = stack.push(Entry("slow", exit_))
    finished: list[str] = []

    async def closer(who: str) -> None:
        await entry.close()
        finished.append(who)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(closer, "a")
        nursery.start_soon(closer, "b")
        await trio.testing.wait_all_tasks_blocked()
        assert (runs, finished) == (["run"], [])
        release.set()
    assert (runs, sorted(finished)) == (["run"], ["a", "b"])
    assert len(stack) == 0


async def test_owned_stack_unwind_collects_failures_in_order() -> None:
    """OwnedStack.unwind runs every exit, newest first, and returns the failures in order."""
    log: list[str] = []

    def exit_(name: str, fail: bool) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            log.append(name)
            if fail:
                raise ValueError(name)

        return run

    stack = OwnedStack()
    for name, fail in (("a", True), ("b", False), ("c", True)):
        stack.push(Entry(name, exit_(name, fail)))
    assert stack.labels() == ("a", "b", "c")
    errors = await stack.unwind()
    assert log == ["c", "b", "a"]
    assert [str(e) for e in errors] == ["c", "a"]
    assert stack.labels() == ()


async def test_dispose_from_the_fibers_own_task_is_refused() -> None:
    """A fiber's task awaiting its own disposal would deadlock, so it raises RuntimeError."""
    seen: list[str] = []
    fibers: list[Fiber] = []

    @asynccontextmanager
    async def self_dispose() -> AsyncIterator[None]:
        yield
        # This exit runs in the fiber's own task, while the fiber is unloading.
        try:
            await fibers[0].dispose()
        except RuntimeError as exc:
            seen.append(str(exc))

    async def apply(ctx: Context, config: None) -> None:
        fibers.append(ctx.fiber)
        await ctx.effect(self_dispose())

    async with open_root() as root:
        fiber = await root.plugin(P("selfish", apply))
        await fiber.dispose()
    assert len(seen) == 1
    assert re.fullmatch(
        r"fiber selfish#\d+ cannot await its own disposal from its own task; call dispose\(\) "
        r"from another task, e\.g\. one started with ctx\.start_soon",
        seen[0],
    )


async def test_background_task_may_dispose_its_own_fiber() -> None:
    """A task that disposes its own fiber is cancelled by that teardown; nothing deadlocks."""
    log: list[str] = []

    async def suicide(ctx: Context) -> None:
        try:
            await ctx.fiber.dispose()
        finally:
            log.append(f"task ended {current_cause()!r}")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "e"))
        ctx.start_soon(suicide, ctx)

    async with open_root() as root:
        fiber = await root.plugin(P("suicidal", apply))
        await trio.testing.wait_all_tasks_blocked()
        assert fiber.state is FiberState.DISPOSED
    assert log == ["enter e", "task ended DisposedCancel()", "exit e"]
    assert DisposedCancel() == DisposedCancel()


async def test_body_error_comes_out_of_open_root_unwrapped() -> None:
    """An exception raised in the runtime's body is what ``async with open_root()`` raises."""
    log: list[str] = []

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "e"))

    async def run() -> None:
        async with open_root() as root:
            await root.plugin(P("p", apply))
            raise ValueError("body failed")

    with pytest.raises(ValueError, match=r"^body failed$"):
        await run()
    assert log == ["enter e", "exit e"]


async def test_outer_cancellation_of_the_body_still_unwinds_everything() -> None:
    """Cancelling around open_root cancels the body and tasks; the shielded teardown completes.

    The task may see trio's own cancellation (no typed cause) or the teardown's DisposedCancel,
    whichever trio delivers first; either way it stops before the older effect exits.
    """
    log: list[str] = []

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(rec(log, "e"))
        ctx.start_soon(forever, log, "t")

    with trio.CancelScope() as outer:
        async with open_root() as root:
            await root.plugin(P("p", apply))
            await trio.testing.wait_all_tasks_blocked()
            outer.cancel()
            await trio.sleep_forever()
    assert outer.cancelled_caught
    assert log[:2] == ["enter e", "start t"]
    assert log[2] in {"stop t None", "stop t DisposedCancel()"}
    assert log[3:] == ["exit e"]


async def test_cancelled_first_closer_still_completes_the_exit() -> None:
    """A closer cancelled mid-exit does not cut the exit short; a joiner returns after it."""
    release = trio.Event()
    log: list[str] = []

    async def exit_() -> None:
        log.append("exit started")
        await release.wait()
        log.append("exit finished")

    entry = OwnedStack().push(Entry("slow", exit_))

    async def first(scope: trio.CancelScope) -> None:
        with scope:
            await entry.close()
        log.append("first closer left")

    async def joiner() -> None:
        await entry.close()
        log.append("joiner returned")

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(first, scope)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(joiner)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["exit started"]
        release.set()
    assert log[:2] == ["exit started", "exit finished"]
    assert set(log[2:]) == {"joiner returned", "first closer left"}
