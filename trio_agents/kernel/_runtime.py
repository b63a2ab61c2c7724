"""The runtime: the fiber tree's registries (fibers, services, the event bus) and its root.

Rules:
- Services are published by a fiber's ``provide`` entry and removed when that entry exits.
  Before a service is removed, every fiber that injects it unwinds back to ``pending`` (newest
  first); the service stays readable during their teardown, but no fiber starts with it.
- A pending fiber is woken whenever a service appears and applies when none is missing.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, final

import attrs
import trio

from ._bus import EventBus, Listener
from ._context import _CURRENT, Context
from ._errors import ServiceConflictError
from ._fiber import Fiber
from ._plugin import PluginSpec
from ._reload import reload
from ._stack import Entry, OwnedStack
from ._states import FiberState

log = logging.getLogger("trio_agents")


@final
@attrs.define(eq=False, repr=False)
class _Service:
    value: object
    provider: Fiber
    leaving: bool = False


@final
@attrs.define(eq=False, repr=False)
class Runtime:
    """Registries shared by every fiber of one tree. Reached as ``ctx.fiber.runtime``."""

    bus: EventBus = attrs.field(factory=EventBus, init=False)
    _ids: Iterator[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    # Invariant: insertion order is creation order; only fibers that are not final. The value
    # is when the fiber was made, on trio's clock (a snapshot's running_for), kept in the
    # entry the fiber has here anyway rather than in a slot of its own: the float is the whole
    # cost, about 40 B per idle agent (python -m benchmarks --only memory).
    _fibers: dict[Fiber, float] = attrs.field(factory=dict, init=False)
    _services: dict[str, _Service] = attrs.field(factory=dict, init=False)

    def _next_id(self) -> int:
        return next(self._ids)

    async def _reload(self, target: object) -> tuple[Fiber, ...]:
        # Here, not in Context: _reload needs _fiber, which needs _context.
        return await reload(self, target)

    @property
    def fibers(self) -> tuple[Fiber, ...]:
        """Every fiber that is not yet disposed or failed, oldest first."""
        return tuple(self._fibers)

    def services(self) -> dict[str, object]:
        """A snapshot of the published services by name."""
        return {name: s.value for name, s in self._services.items() if not s.leaving}

    # -- fibers ---------------------------------------------------------------------------------

    async def _spawn(
        self, parent: Fiber, plugin: object, config: object, section: OwnedStack | None = None
    ) -> Fiber:
        spec = PluginSpec.of(plugin)
        structured = spec.structure(config)
        fiber = Fiber(self, spec, structured, config, parent)
        _, nursery = parent._check_open(f"the child fiber {fiber.id}", section)
        fiber._entry = parent._push(Entry("fiber", fiber._dispose, about=fiber.id), section)
        parent._children[fiber] = None
        self._fibers[fiber] = trio.current_time()
        await nursery.start(fiber._run, name=f"fiber {fiber.id}")
        # A caller cancelled while the fiber loaded sees Cancelled (trio's checkpoint rule), not
        # a fiber that the same cancellation already unwound.
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            if fiber.state is FiberState.FAILED:
                # Its failure was to be handed over here (Fiber._settle did not log it).
                fiber._log_failure(logging.ERROR)
            raise
        if fiber.state is FiberState.FAILED:
            failure = fiber._failure
            assert failure is not None
            if fiber._errors:
                raise BaseExceptionGroup(
                    f"plugin {spec.name!r} failed to apply, and unwinding it failed too",
                    [failure, *fiber._errors],
                )
            raise failure
        return fiber

    def _forget(self, fiber: Fiber) -> None:
        self._fibers.pop(fiber, None)

    def _missing(self, names: tuple[str, ...]) -> list[str]:
        services = self._services
        return [n for n in names if n not in services or services[n].leaving]

    # -- services -------------------------------------------------------------------------------

    def _lookup(self, name: str) -> Any:
        service = self._services.get(name)
        return None if service is None else service.value

    def _provide(
        self, fiber: Fiber, name: str, value: object, section: OwnedStack | None = None
    ) -> Entry:
        if not name.isidentifier():
            raise ServiceConflictError(
                f"service names are identifiers (so ctx.{name} works); got {name!r}"
            )
        if hasattr(Context, name):
            raise ServiceConflictError(
                f"service name {name!r} collides with the Context attribute ctx.{name}; "
                f"choose another name"
            )
        existing = self._services.get(name)
        if existing is not None:
            raise ServiceConflictError(
                f"service {name!r} is already provided by fiber {existing.provider.id}; "
                f"dispose that fiber first"
            )
        fiber._check_open(f"the service {name!r}", section)
        service = _Service(value, fiber)
        entry = fiber._push(Entry("service", self._withdraw, (name, service), about=name), section)
        self._services[name] = service
        for other in self._fibers:
            if other.state is FiberState.PENDING:
                other._poke()
        return entry

    async def _withdraw(self, name: str, service: _Service) -> None:
        service.leaving = True
        dependents = [
            f for f in reversed(self._fibers) if name in f.spec.inject and f is not service.provider
        ]
        errors: list[BaseException] = []
        try:
            for dependent in dependents:
                errors.extend(await dependent._reset_to_pending())
        finally:
            if self._services.get(name) is service:
                del self._services[name]
        if errors:
            raise BaseExceptionGroup(
                f"fibers that inject {name!r} failed to unload when it left", errors
            )

    # -- events ---------------------------------------------------------------------------------

    def _listen(
        self,
        fiber: Fiber,
        event_type: type,
        fn: Callable[[Any], object],
        section: OwnedStack | None = None,
    ) -> Entry:
        fiber._check_open(f"a listener for {getattr(event_type, '__name__', event_type)}", section)
        listener = self.bus.add(event_type, fn)
        return fiber._push(
            Entry("listener", self._unlisten, (listener,), about=event_type.__name__), section
        )

    async def _unlisten(self, listener: Listener) -> None:
        self.bus.remove(listener)


@final
class _Root:
    """The plugin of the root fiber: it does nothing; the application owns it."""

    name = "root"

    async def apply(self, ctx: Context, config: None) -> None:
        pass


@asynccontextmanager
async def open_root() -> AsyncIterator[Context]:
    """Open a bare runtime (no core plugins) and yield its root :class:`Context`.

    Leaving the block disposes the root fiber: everything unwinds in reverse order of set-up,
    shielded from outer cancellation.
    """
    runtime = Runtime()
    root = Fiber(runtime, PluginSpec.of(_Root()), None, None, None)
    runtime._fibers[root] = trio.current_time()
    error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(root._run, name="fiber root")
            token = _CURRENT.set(root.context)
            body_error: BaseException | None = None
            try:
                yield root.context
            except BaseException as exc:
                body_error = exc
                # The body is the root's application: its effects see what it raised.
                root._unwinding = exc
                raise
            finally:
                _CURRENT.reset(token)
                with trio.CancelScope(shield=True):
                    try:
                        await root.dispose()
                    except BaseException as teardown:
                        if body_error is None:
                            raise
                        raise BaseExceptionGroup(
                            "the runtime's body raised, and its teardown failed too",
                            [body_error, teardown],
                        ) from None
    except BaseExceptionGroup as group:
        # Invariant: the root fiber's task never raises, so the nursery's group holds exactly
        # the one error of the body (or of the teardown). Unwrap it, so that the caller of
        # ``async with open_root()`` sees what its body raised, not trio's nursery wrapper.
        if len(group.exceptions) != 1:
            raise
        error = group.exceptions[0]
    if error is not None:
        # Raised outside the except block, so the nursery's group does not become its context.
        raise error
