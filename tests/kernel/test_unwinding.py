"""What an effect's exit sees: the exception unwinding its fiber, as under AsyncExitStack."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType

import attrs
import pytest
import trio
import trio.testing

from tests.helpers.support import P
from trio_agents.kernel import Context, FiberState, open_root


@attrs.define
class Db:
    """A fake database whose transactions say how they ended."""

    log: list[str] = attrs.field(factory=list)


@asynccontextmanager
async def transaction(db: Db) -> AsyncIterator[Db]:
    """The transaction effect of issue 35: commit on a clean exit, roll back on an exception."""
    db.log.append("begin")
    try:
        yield db
    except BaseException as exc:
        db.log.append(f"rollback {type(exc).__name__}")
        raise
    else:
        db.log.append("commit")


async def test_transaction_commits_on_a_clean_unload_and_rolls_back_a_failed_apply() -> None:
    """An effect's exit sees the apply's failure (roll back), or nothing on dispose (commit)."""
    clean, failed = Db(), Db()

    def writer(db: Db) -> P:
        async def apply(ctx: Context, config: None) -> None:
            tx = await ctx.effect(transaction(db))
            tx.log.append("write half done")
            if db is failed:
                raise RuntimeError("apply failed")

        return P("tx", apply)

    async with open_root() as root:
        fiber = await root.plugin(writer(clean))
        await fiber.dispose()
        with pytest.raises(RuntimeError, match=r"^apply failed$"):
            await root.plugin(writer(failed))
    assert clean.log == ["begin", "write half done", "commit"]
    assert failed.log == ["begin", "write half done", "rollback RuntimeError"]


async def test_transaction_effect_rolls_back_when_a_background_task_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A background task that raises fails the fiber; the effect's exit sees that failure."""
    db = Db()

    async def fail() -> None:
        await trio.sleep(1)
        raise ValueError("task failed")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(transaction(db))
        ctx.start_soon(fail)

    async with open_root() as root:
        fiber = await root.plugin(P("tx", apply))
        await trio.sleep(2)
        assert fiber.state is FiberState.FAILED
    assert db.log == ["begin", "rollback ValueError"]


async def test_effect_sees_trio_cancelled_when_an_outer_cancellation_tears_it_down() -> None:
    """An outer cancellation reaches the exit as trio.Cancelled, as trio's own managers expect."""
    db = Db()

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(transaction(db))

    with trio.CancelScope() as outer:
        async with open_root() as root:
            await root.plugin(P("tx", apply))
            outer.cancel()
            await trio.sleep_forever()
    assert outer.cancelled_caught
    assert db.log == ["begin", "rollback Cancelled"]


async def test_root_effect_sees_what_the_runtime_body_raised() -> None:
    """The body of open_root is the root's application: a root effect sees what it raised."""
    db = Db()

    async def run() -> None:
        async with open_root() as root:
            await root.effect(transaction(db))
            raise KeyError("body")

    with pytest.raises(KeyError, match=r"^'body'$"):
        await run()
    assert db.log == ["begin", "rollback KeyError"]


async def test_effects_in_a_section_see_the_fibers_failure() -> None:
    """A section passes what unwinds the fiber on to its own exits."""
    db = Db()

    async def apply(ctx: Context, config: None) -> None:
        await ctx.section("part").effect(transaction(db))
        raise RuntimeError("apply failed")

    async with open_root() as root:
        with pytest.raises(RuntimeError, match=r"^apply failed$"):
            await root.plugin(P("tx", apply))
    assert db.log == ["begin", "rollback RuntimeError"]


@attrs.define
class Seen:
    """An async context manager that records what its exit saw, and may fail or suppress."""

    name: str
    log: list[str]
    raises: BaseException | None = None
    suppress: bool = False

    async def __aenter__(self) -> None:
        pass

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        self.log.append(f"{self.name} saw {exc!r}")
        if self.raises is not None:
            raise self.raises
        return self.suppress


async def test_an_exit_sees_the_failure_of_the_exit_after_it() -> None:
    """As AsyncExitStack: exit N sees exit N+1's failure, chained to what unwound the fiber."""
    log: list[str] = []
    first = KeyError("exit 2")
    second = ValueError("exit 3")

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(Seen("e1", log))
        await ctx.effect(Seen("e2", log, raises=first))
        await ctx.effect(Seen("e3", log, raises=second))
        raise RuntimeError("apply")

    async with open_root() as root:
        with pytest.raises(ExceptionGroup, match=r"^plugin 'seen' failed to apply") as info:
            await root.plugin(P("seen", apply))
    assert log == [
        "e3 saw RuntimeError('apply')",
        "e2 saw ValueError('exit 3')",
        "e1 saw KeyError('exit 2')",
    ]
    assert [type(e) for e in info.value.exceptions] == [RuntimeError, ValueError, KeyError]
    assert isinstance(second.__context__, RuntimeError)
    assert first.__context__ is second


async def test_an_exit_cannot_suppress_the_fibers_failure() -> None:
    """An exit returning True suppresses nothing: the fiber fails and older exits see it."""
    log: list[str] = []

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(Seen("e1", log))
        await ctx.effect(Seen("e2", log, suppress=True))
        raise RuntimeError("apply")

    async with open_root() as root:
        with pytest.raises(RuntimeError, match=r"^apply$"):
            await root.plugin(P("suppressing", apply))
    assert log == ["e2 saw RuntimeError('apply')", "e1 saw RuntimeError('apply')"]


async def test_an_exit_cannot_suppress_another_exits_failure() -> None:
    """A suppressing exit does not swallow a later exit's failure: dispose still raises it."""
    log: list[str] = []

    async def apply(ctx: Context, config: None) -> None:
        await ctx.effect(Seen("e1", log, suppress=True))
        await ctx.effect(Seen("e2", log, raises=KeyError("exit 2")))

    async with open_root() as root:
        fiber = await root.plugin(P("suppressing", apply))
        with pytest.raises(ExceptionGroup, match=r"^teardown of fiber suppressing#\d+ failed"):
            await fiber.dispose()
    assert log == ["e2 saw None", "e1 saw KeyError('exit 2')"]


Worker = Callable[[], Awaitable[None]]


def nursery_scenario(log: list[str]) -> tuple[trio.Event, list[Worker]]:
    """Two workers in a nursery: one finishes when released, one logs a cancellation."""
    release = trio.Event()

    # Each waits a bounded time, so that a nursery exit that waits for them instead of
    # cancelling them (what the kernel did before) ends, and fails the test, not hangs it.
    async def finishes() -> None:
        with trio.move_on_after(60):
            await release.wait()
        log.append("finisher done")

    async def runs() -> None:
        try:
            with trio.move_on_after(60):
                await release.wait()
            log.append("runner done")
        except trio.Cancelled:
            log.append("runner cancelled")
            raise

    return release, [finishes, runs]


async def run_under_exit_stack(fail: bool) -> tuple[list[str], BaseException | None]:
    """The nursery scenario under contextlib.AsyncExitStack, for comparison."""
    log: list[str] = []
    release, workers = nursery_scenario(log)
    try:
        async with AsyncExitStack() as stack:
            nursery = await stack.enter_async_context(trio.open_nursery())
            for worker in workers:
                nursery.start_soon(worker)
            await trio.testing.wait_all_tasks_blocked()
            if fail:
                raise RuntimeError("body failed")
            release.set()
    except BaseException as exc:
        return log, exc
    return log, None


async def run_as_effect(fail: bool) -> tuple[list[str], BaseException | None]:
    """The nursery scenario with the nursery entered as an effect of a fiber."""
    log: list[str] = []
    release, workers = nursery_scenario(log)

    async def apply(ctx: Context, config: None) -> None:
        nursery = await ctx.effect(trio.open_nursery())
        for worker in workers:
            nursery.start_soon(worker)
        await trio.testing.wait_all_tasks_blocked()
        if fail:
            raise RuntimeError("body failed")
        release.set()

    async with open_root() as root:
        try:
            fiber = await root.plugin(P("nursery", apply))
            await fiber.dispose()
        except BaseException as exc:
            return log, exc
    return log, None


async def test_a_nursery_effect_behaves_as_under_async_exit_stack(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A nursery effect cancels its tasks when the fiber fails, and awaits them on unload."""
    with trio.fail_after(10):
        log, raised = await run_as_effect(fail=True)
        expected, group = await run_under_exit_stack(fail=True)
    assert log == expected == ["runner cancelled"]
    # AsyncExitStack raises the nursery's group around the failure; the fiber reports the
    # failure itself, once (the group adds nothing to it).
    assert isinstance(group, ExceptionGroup)
    assert group.subgroup(RuntimeError) is not None
    assert isinstance(raised, RuntimeError)
    assert re.fullmatch(r"body failed", str(raised))
    with trio.fail_after(10):
        log, raised = await run_as_effect(fail=False)
        expected, other = await run_under_exit_stack(fail=False)
    assert (raised, other) == (None, None)
    assert sorted(log) == sorted(expected) == ["finisher done", "runner done"]
