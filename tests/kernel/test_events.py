"""The event bus: contained listener failures, emit modes, listeners owned by fibers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import pytest
import trio
import trio.testing

from tests.helpers.support import P
from trio_agents.kernel import Context, Entry, ListenerFailed, open_root
from trio_agents.kernel._bus import EventBus, Listener


@attrs.frozen
class Ping:
    """A test event."""

    n: int = 0


@attrs.frozen
class SubPing(Ping):
    """A subclass of Ping."""


@pytest.mark.listener_failures
async def test_listener_failure_is_contained_and_reported() -> None:
    """A raising listener emits ListenerFailed; later listeners run; the emitter is unaffected."""
    log: list[str] = []
    failures: list[ListenerFailed] = []

    def broken(event: Ping) -> None:
        raise ValueError("listener broke")

    async with open_root() as root:
        root.on(ListenerFailed, failures.append)
        root.on(Ping, broken)
        root.on(Ping, lambda e: log.append(f"later {e.n}"))
        root.emit(Ping(1))
        log.append("emitter continued")
    assert log == ["later 1", "emitter continued"]
    (failure,) = failures
    assert failure.event == Ping(1)
    assert failure.listener.endswith("broken")
    assert str(failure.error) == "listener broke"


@pytest.mark.listener_failures
async def test_failing_listener_of_listener_failed_does_not_recurse() -> None:
    """A ListenerFailed listener that raises is only logged, never re-reported."""
    calls: list[str] = []

    def broken(event: object) -> None:
        calls.append(type(event).__name__)
        raise RuntimeError("again")

    async with open_root() as root:
        root.on(Ping, broken)
        root.on(ListenerFailed, broken)
        root.emit(Ping())
    assert calls == ["Ping", "ListenerFailed"]


@pytest.mark.listener_failures
async def test_async_listener_under_sync_emit_is_reported_not_run() -> None:
    """A coroutine listener cannot run under emit(): it is reported with the fix."""
    ran: list[str] = []
    failures: list[ListenerFailed] = []

    async def async_listener(event: Ping) -> None:
        ran.append("ran")  # pragma: no cover - never awaited

    async with open_root() as root:
        root.on(ListenerFailed, failures.append)
        root.on(Ping, async_listener)
        root.emit(Ping())
    assert ran == []
    (failure,) = failures
    assert isinstance(failure.error, TypeError)
    assert str(failure.error) == (
        f"listener {failure.listener} is async, so the synchronous emit() cannot run it; emit "
        f"Ping with 'await ctx.emit_serial(event)', or make the listener sync"
    )


@pytest.mark.listener_failures
async def test_emit_serial_awaits_listeners_one_after_another() -> None:
    """emit_serial runs each listener to completion, in registration order."""
    log: list[str] = []

    def make(name: str) -> Callable[[Ping], Awaitable[None]]:
        async def listener(event: Ping) -> None:
            log.append(f"{name} start")
            await trio.lowlevel.checkpoint()
            log.append(f"{name} end")

        return listener

    async def broken(event: Ping) -> None:
        await trio.lowlevel.checkpoint()
        raise KeyError("contained")

    async with open_root() as root:
        root.on(Ping, make("a"))
        root.on(Ping, broken)
        root.on(Ping, lambda e: log.append("sync"))
        root.on(Ping, make("b"))
        await root.emit_serial(Ping())
    assert log == ["a start", "a end", "sync", "b start", "b end"]


@pytest.mark.listener_failures
async def test_emit_concurrent_runs_all_listeners_at_once() -> None:
    """emit_concurrent runs listeners concurrently: one can wait for another."""
    released = trio.Event()
    log: list[str] = []
    failures: list[ListenerFailed] = []

    async def waiter(event: Ping) -> None:
        await released.wait()
        log.append("waiter done")

    async def releaser(event: Ping) -> None:
        released.set()
        log.append("released")

    async def broken(event: Ping) -> None:
        raise ValueError("contained too")

    async with open_root() as root:
        root.on(ListenerFailed, failures.append)
        root.on(Ping, waiter)
        root.on(Ping, broken)
        root.on(Ping, releaser)
        await root.emit_concurrent(Ping())
    assert set(log) == {"waiter done", "released"}
    assert [str(f.error) for f in failures] == ["contained too"]


async def test_cancellation_in_an_awaited_listener_propagates() -> None:
    """Cancellation is not a listener failure: it propagates out of emit_serial."""
    failures: list[ListenerFailed] = []

    async def slow(event: Ping) -> None:
        await trio.sleep_forever()

    async with open_root() as root:
        root.on(ListenerFailed, failures.append)
        root.on(Ping, slow)
        with trio.CancelScope() as scope:
            scope.cancel()
            await root.emit_serial(Ping())
        assert scope.cancelled_caught
    assert failures == []


async def test_listeners_receive_subclass_events_and_leave_with_their_fiber() -> None:
    """A listener sees subclasses of its type, and stops when its fiber is disposed."""
    log: list[object] = []

    async def apply(ctx: Context, config: None) -> None:
        ctx.on(Ping, log.append)

    async with open_root() as root:
        fiber = await root.plugin(P("listening", apply))
        root.emit(SubPing(1))
        root.emit(Ping(2))
        root.emit("not a ping")
        await fiber.dispose()
        root.emit(Ping(3))
    assert log == [SubPing(1), Ping(2)]


async def test_listener_removed_during_an_emit_is_not_called_afterwards() -> None:
    """Closing a listener's entry mid-emit skips it for the rest of that emit."""
    log: list[str] = []
    entries: list[Entry] = []

    async def first(event: Ping) -> None:
        log.append("first")
        await entries[0].close()

    async with open_root() as root:
        root.on(Ping, first)
        entries.append(root.on(Ping, lambda e: log.append("second")))
        await root.emit_serial(Ping())
        await root.emit_serial(Ping())
    assert log == ["first", "first"]


def test_bus_rejects_non_types_and_non_callables() -> None:
    """EventBus.add takes an event class and a callable."""
    bus = EventBus()
    with pytest.raises(TypeError, match=r"^ctx\.on\(\) takes an event class first; got 'Ping'$"):
        bus.add("Ping", print)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^ctx\.on\(\) takes a callable listener; got 3$"):
        bus.add(Ping, 3)  # type: ignore[arg-type]


def test_listener_removed_during_a_sync_emit_is_skipped() -> None:
    """A listener removed by an earlier listener of the same sync emit is not called."""
    log: list[str] = []
    bus = EventBus()
    later: list[Listener] = []

    def first(event: Ping) -> None:
        log.append("first")
        if later[0].active:
            bus.remove(later[0])

    bus.add(Ping, first)
    later.append(bus.add(Ping, lambda e: log.append("second")))
    bus.emit(Ping())
    bus.emit(Ping())
    assert log == ["first", "first"]


@pytest.mark.listener_failures
async def test_call_listener_contains_a_service_listener_like_emit_does() -> None:
    """A listener a service keeps itself fails as ListenerFailed, and the caller goes on."""
    failures: list[ListenerFailed] = []

    def broken(event: Ping) -> None:
        raise ValueError("boom")

    async def not_sync(event: Ping) -> None:
        raise AssertionError("never runs")  # pragma: no cover - never awaited

    async with open_root() as root:
        root.on(ListenerFailed, failures.append)
        root.call_listener(broken, Ping())
        root.call_listener(not_sync, Ping(), async_error="these listeners are sync")
    assert [(f.listener.rsplit(".", 1)[-1], str(f.error)) for f in failures] == [
        ("broken", "boom"),
        ("not_sync", "these listeners are sync"),
    ]


async def test_listens_says_whether_an_emit_would_reach_anyone() -> None:
    """``ctx.listens(cls)`` follows registration: subclasses count, a listener that left with
    its fiber does not."""

    async def apply(ctx: Context, config: None) -> None:
        ctx.on(Ping, lambda e: None)

    async with open_root() as root:
        assert not root.listens(Ping)
        fiber = await root.plugin(P("listener", apply))
        assert root.listens(Ping)
        assert root.listens(SubPing)  # a Ping listener receives SubPing events
        await fiber.dispose()
        assert not root.listens(Ping)
        entry = root.on(SubPing, lambda e: None)
        assert root.listens(SubPing)
        assert not root.listens(Ping)  # a SubPing listener does not receive plain Pings
        await entry.close()
        assert not root.listens(SubPing)
