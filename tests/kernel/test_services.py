"""Services: provider/consumer lifecycle, strict ``ctx.<service>`` access, ``ctx.get``."""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
import trio.testing

from tests.helpers.support import P, state_of
from trio_agents.kernel import Context, FiberState, ListenerFailed, open_root
from trio_agents.kernel._errors import ServiceAccessError, ServiceConflictError


@attrs.frozen
class Ping:
    """A test event."""


def provider(value: object, name: str = "prov") -> P:
    async def apply(ctx: Context, config: None) -> None:
        ctx.provide("svc", value)

    return P(name, apply)


async def test_consumer_goes_pending_active_pending_active_as_provider_comes_and_goes() -> None:
    """A consumer waits for its service, unloads when it leaves, and applies again on return."""
    log: list[str] = []

    async def consume(ctx: Context, config: None) -> None:
        log.append(f"apply with {ctx.svc}")

        @asynccontextmanager
        async def uses_service_in_teardown() -> AsyncIterator[None]:
            yield
            # The service stays readable while its dependents unwind.
            log.append(f"teardown with {ctx.svc}")

        await ctx.effect(uses_service_in_teardown())

    async with open_root() as root:
        consumer = await root.plugin(P("consumer", consume, inject=("svc",)))
        assert state_of(consumer) is FiberState.PENDING
        assert root.get("svc") is None
        first = await root.plugin(provider("v1", "prov1"))
        await trio.testing.wait_all_tasks_blocked()
        assert state_of(consumer) is FiberState.ACTIVE
        await first.dispose()
        assert state_of(consumer) is FiberState.PENDING
        assert root.get("svc") is None
        assert root.fiber.runtime.services() == {}
        await root.plugin(provider("v2", "prov2"))
        await trio.testing.wait_all_tasks_blocked()
        assert state_of(consumer) is FiberState.ACTIVE
        assert root.fiber.runtime.services() == {"svc": "v2"}
        await consumer.dispose()
        assert state_of(consumer) is FiberState.DISPOSED
    assert log == ["apply with v1", "teardown with v1", "apply with v2", "teardown with v2"]


async def test_consumer_applied_after_its_provider_is_active_at_once() -> None:
    """With the service present, ctx.plugin() returns the consumer active."""

    async def consume(ctx: Context, config: None) -> None:
        assert ctx.svc == "here"

    async with open_root() as root:
        await root.plugin(provider("here"))
        consumer = await root.plugin(P("consumer", consume, inject=("svc",)))
        assert state_of(consumer) is FiberState.ACTIVE


async def test_pending_fiber_can_be_disposed() -> None:
    """A pending fiber disposes straight to disposed without ever applying."""
    applied: list[str] = []

    async def consume(ctx: Context, config: None) -> None:
        applied.append("applied")

    async with open_root() as root:
        consumer = await root.plugin(P("consumer", consume, inject=("svc",)))
        await consumer.dispose()
        assert state_of(consumer) is FiberState.DISPOSED
        await root.plugin(provider("late"))
        await trio.testing.wait_all_tasks_blocked()
    assert applied == []


async def test_service_access_without_inject_names_the_fix() -> None:
    """ctx.svc in a fiber that did not declare it raises ServiceAccessError naming the fix."""
    errors: list[ServiceAccessError] = []

    async def apply(ctx: Context, config: None) -> None:
        with pytest.raises(ServiceAccessError) as info:
            ctx.svc  # noqa: B018 - the attribute access is the test
        errors.append(info.value)
        assert not hasattr(ctx, "svc")
        assert ctx.get("svc") == "value"

    async with open_root() as root:
        await root.plugin(provider("value"))
        await root.plugin(P("undeclared", apply))
    assert str(errors[0]) == (
        "plugin 'undeclared' did not declare 'svc' in inject; add it, "
        "or use ctx.get('svc') from foreign fibers"
    )
    assert isinstance(errors[0], AttributeError)


async def test_child_of_a_declaring_fiber_may_use_the_service() -> None:
    """A declaration covers the fiber's subtree: children use ctx.svc without their own."""
    seen: list[object] = []

    async def child(ctx: Context, config: None) -> None:
        seen.append(ctx.svc)

    async def parent(ctx: Context, config: None) -> None:
        await ctx.plugin(P("child", child))

    async with open_root() as root:
        await root.plugin(provider("shared"))
        await root.plugin(P("parent", parent, inject=("svc",)))
    assert seen == ["shared"]


@pytest.mark.listener_failures
async def test_service_access_from_a_foreign_fibers_task_raises_but_get_works() -> None:
    """A listener run by another fiber's emit cannot use ctx.svc; ctx.get works there."""
    got: list[object] = []
    failures: list[ListenerFailed] = []
    emitters: list[Context] = []

    async def owner(ctx: Context, config: None) -> None:
        def listener(event: Ping) -> None:
            got.append(ctx.get("svc"))
            ctx.svc  # noqa: B018 - raises: this runs in the emitter's task

        ctx.on(Ping, listener)

    async def emitter(ctx: Context, config: None) -> None:
        emitters.append(ctx)
        ctx.emit(Ping())  # from the emitter fiber's own (apply) task

    async with open_root() as root:
        root.on(ListenerFailed, failures.append)
        await root.plugin(provider("svc-value"))
        owning = await root.plugin(P("owner", owner, inject=("svc",)))
        await root.plugin(P("emitter", emitter))
    assert got == ["svc-value"]
    (failure,) = failures
    assert isinstance(failure.error, ServiceAccessError)
    assert str(failure.error) == (
        f"ctx.svc of fiber {owning.id} was used from fiber {emitters[0].fiber.id}; services are "
        f"bound to the declaring fiber's tasks, use ctx.get('svc') from foreign fibers"
    )


async def test_service_access_from_a_task_of_no_fiber_raises() -> None:
    """ctx.svc from a task outside every fiber says so."""
    seen: list[str] = []
    contexts: list[Context] = []

    async def owner(ctx: Context, config: None) -> None:
        contexts.append(ctx)

    async def outsider() -> None:
        try:
            contexts[0].svc  # noqa: B018 - the attribute access is the test
        except ServiceAccessError as exc:
            seen.append(str(exc))

    async with open_root() as root:
        await root.plugin(provider(1))
        await root.plugin(P("owner", owner, inject=("svc",)))
        trio.lowlevel.spawn_system_task(outsider, context=contextvars.Context())
        await trio.testing.wait_all_tasks_blocked()
    assert len(seen) == 1
    assert seen[0].startswith("ctx.svc of fiber owner#")
    assert "was used from a task of no fiber;" in seen[0]


async def test_root_context_may_use_any_service() -> None:
    """The application's root ctx needs no declaration; a missing service says so."""
    async with open_root() as root:
        with pytest.raises(
            ServiceAccessError,
            match=r"^service 'svc' is not provided; apply a plugin that provides it first$",
        ):
            root.svc  # noqa: B018 - the attribute access is the test
        await root.plugin(provider("for-root"))
        assert root.svc == "for-root"
        with pytest.raises(AttributeError, match=r"^_private$"):
            root._private  # noqa: B018 - the attribute access is the test


async def test_provide_refuses_taken_names_attributes_and_non_identifiers() -> None:
    """ServiceConflictError for a taken name, a Context attribute, or a non-identifier."""
    async with open_root() as root:
        prov = await root.plugin(provider("x"))
        with pytest.raises(
            ServiceConflictError,
            match=rf"^service 'svc' is already provided by fiber {prov.id}; "
            r"dispose that fiber first$",
        ):
            root.provide("svc", "y")
        with pytest.raises(
            ServiceConflictError,
            match=r"^service name 'plugin' collides with the Context attribute ctx\.plugin; "
            r"choose another name$",
        ):
            root.provide("plugin", "y")
        with pytest.raises(
            ServiceConflictError,
            match=r"^service names are identifiers \(so ctx\.a-b works\); got 'a-b'$",
        ):
            root.provide("a-b", "y")
        entry = root.provide("other", "z")
        assert root.get("other") == "z"
        await entry.close()
        assert root.get("other") is None


async def test_dependent_teardown_failure_surfaces_from_the_provider() -> None:
    """If a dependent fails to unwind when its service leaves, the provider's dispose raises."""

    @asynccontextmanager
    async def bad() -> AsyncIterator[None]:
        yield
        raise OSError("flush failed")

    async def consume(ctx: Context, config: None) -> None:
        await ctx.effect(bad())

    async with open_root() as root:
        prov = await root.plugin(provider("v"))
        consumer = await root.plugin(P("consumer", consume, inject=("svc",)))
        with pytest.raises(ExceptionGroup, match=r"^teardown of fiber prov#\d+ failed") as info:
            await prov.dispose()
        assert info.group_contains(OSError, match=r"^flush failed$", depth=2)
        assert state_of(consumer) is FiberState.PENDING
