"""The handle a plugin receives: ``ctx``.

Rules:
- Every method that adds something adds it to *this context's* fiber, as one entry of its stack.
- ``ctx.<service>`` is strict: the fiber (or an ancestor) must declare the service in
  ``inject``, and the call must come from a task of that fiber's subtree. ``ctx.get(name)`` is
  the lookup that needs neither and returns ``None`` when the service is absent.
- Both take a typed :class:`ServiceKey` too: ``ctx.service(AGENTS)`` is ``ctx.agents`` and
  ``ctx.get(AGENTS)`` is ``ctx.get("agents")``, typed ``AgentRegistry`` and
  ``AgentRegistry | None`` instead of ``Any``.
- :func:`current_context` names the fiber whose task is running (listeners run in the
  emitter's task, so there it is the emitter's fiber).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeVar, final, overload

import attrs

from ._bus import Listener
from ._errors import ServiceAccessError
from ._service_key import ServiceKey, service_name
from ._stack import Entry, OwnedStack

if TYPE_CHECKING:
    from ._fiber import Fiber
    from ._snapshot import FiberSnapshot

T = TypeVar("T")

_CURRENT: contextvars.ContextVar[Context] = contextvars.ContextVar("trio_agents_context")


def current_context() -> Context:
    """The context of the fiber whose task is running.

    Raises:
        RuntimeError: outside every fiber (and outside ``open_runtime``).
    """
    try:
        return _CURRENT.get()
    except LookupError:
        raise RuntimeError(
            "no trio_agents fiber is running in this task; call this inside "
            "'async with ta.open_runtime()' or a plugin's apply"
        ) from None


@final
@attrs.define(eq=False, repr=False)
class Context:
    """A fiber's view of the runtime. Plugins receive one in ``apply(ctx, config)``."""

    _fiber: Fiber
    # Where what is added through this context goes: a section of the fiber's stack (see
    # section()), or the fiber's own stack.
    _section: OwnedStack | None = None

    @property
    def fiber(self) -> Fiber:
        """The fiber this context adds things to."""
        return self._fiber

    # -- ownership ---------------------------------------------------------------------------

    async def plugin(self, plugin: object, config: object = None) -> Fiber:
        """Apply ``plugin`` in a new child fiber and return it.

        The fiber is ``active`` on return, or ``pending`` if a service it injects is missing.

        Raises:
            PluginError: ``plugin`` does not have the plugin shape.
            ConfigError: ``config`` does not structure into ``plugin.Config``.
            Exception: whatever ``apply`` raised (what it entered was unwound first).
        """
        return await self._fiber.runtime._spawn(self._fiber, plugin, config, self._section)

    async def child(self, name: str) -> Context:
        """A new, empty child fiber named ``name``, active; its context.

        What is added to it is owned by it and unwinds when it is disposed (its ``fiber``),
        or with this fiber, as any child fiber does. Its tasks are its own: a service this
        fiber declared is reachable from them.
        """
        holder = _Child(name)
        await self.plugin(holder)
        assert holder.ctx is not None  # apply ran: a plugin with no inject never waits
        return holder.ctx

    def section(self, name: str) -> Context:
        """A new section of this fiber's stack, named ``name``: its context.

        The section is one entry of the stack, pushed now. What is added through the context
        it returns (cleanups, effects, tasks, child fibers, services, listeners) goes on the
        section's own stack, and unwinds, last in first out, when the section's entry does:
        after everything pushed here later, before everything pushed earlier, and whenever
        it was added. It is the fiber's own: its tasks run in the fiber's nursery, a task that
        fails fails the fiber, and it costs no task, nursery or cancel scope, unlike
        :meth:`child`. Once the section unwinds it takes nothing more
        (:class:`FiberClosedError`).
        """
        fiber = self._fiber
        stack = OwnedStack()
        fiber._push(
            Entry("section", _unwind_section, (stack, name, fiber), about=name, unwinding=True),
            self._section,
        )
        return Context(fiber, stack)

    async def effect(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter ``cm`` in the fiber's task and own it; it exits when the fiber unloads.

        Returns:
            What ``cm.__aenter__`` returned.

        Raises:
            FiberClosedError: the fiber is unloading (or otherwise not open).
        """
        return await self._fiber._effect(cm, self._section)

    def defer(self, fn: Callable[..., Awaitable[object]], *args: object) -> Entry:
        """Own an async cleanup: ``await fn(*args)`` runs when the fiber unloads.

        Returns the :class:`Entry`, whose ``close()`` runs it early and ``discard()`` forgets it.
        """
        return self._fiber._push(Entry("defer", fn, args, about=fn), self._section)

    def start_soon(
        self, fn: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> Entry:
        """Run ``fn(*args)`` as a background task owned by the fiber.

        Its exit cancels the task with :class:`DisposedCancel` and awaits it. A task that raises
        fails the fiber (logged, :class:`FiberFailed`), it does not crash the runtime.
        """
        name = name or _name(fn)
        return self._fiber._own_task(fn, args, name, self).start_soon(name)

    async def start(self, fn: Callable[..., Awaitable[object]], *args: object) -> Any:
        """Like :meth:`trio.Nursery.start`: run ``fn(*args, task_status=...)`` in the fiber and
        return the value it passes to ``task_status.started()``.

        An exception raised before ``started`` goes to the caller.
        """
        name = _name(fn)
        return await self._fiber._own_task(fn, args, name, self).start(name)

    # -- services ------------------------------------------------------------------------------

    @overload
    def provide(self, name: ServiceKey[T], service: T) -> Entry: ...
    @overload
    def provide(self, name: str, service: object) -> Entry: ...
    def provide(self, name: ServiceKey[Any] | str, service: object) -> Entry:
        """Publish ``service`` under ``name`` (a name or a :class:`ServiceKey`) for as long as
        the fiber is loaded. With a key, the type checker checks that ``service`` is its type.

        When it leaves, the fibers that inject it are unloaded back to ``pending`` first.

        Raises:
            ServiceConflictError: the name is taken, or collides with a Context attribute.
        """
        return self._fiber.runtime._provide(self._fiber, service_name(name), service, self._section)

    @overload
    def get(self, name: ServiceKey[T]) -> T | None: ...
    @overload
    def get(self, name: str) -> Any: ...
    def get(self, name: ServiceKey[Any] | str) -> Any:
        """The service ``name``, or ``None``: works from any task and needs no declaration.

        With a :class:`ServiceKey` the result is typed ``T | None``; with a name, ``Any``.
        """
        return self._fiber.runtime._lookup(service_name(name))

    def service(self, key: ServiceKey[T]) -> T:
        """The service of ``key``, typed: the same strict access as ``ctx.<name>``.

        Raises:
            ServiceAccessError: the fiber did not declare the service in ``inject``, the call
                comes from a foreign fiber's task, or the service is not provided.
        """
        found: T = self._strict(key.name)
        return found

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._strict(name)

    def _strict(self, name: str) -> Any:
        fiber = self._fiber
        if not fiber._declares(name):
            raise ServiceAccessError(
                f"plugin {fiber.name!r} did not declare {name!r} in inject; add it, "
                f"or use ctx.get({name!r}) from foreign fibers"
            )
        running = _CURRENT.get(None)
        if running is None or not running._fiber._within(fiber):
            where = f"fiber {running._fiber.id}" if running is not None else "a task of no fiber"
            raise ServiceAccessError(
                f"ctx.{name} of fiber {fiber.id} was used from {where}; services are bound "
                f"to the declaring fiber's tasks, use ctx.get({name!r}) from foreign fibers"
            )
        service = fiber.runtime._lookup(name)
        if service is None:
            raise ServiceAccessError(
                f"service {name!r} is not provided; apply a plugin that provides it first"
            )
        return service

    # -- events --------------------------------------------------------------------------------

    def on(self, event_type: type[T], listener: Callable[[T], object]) -> Entry:
        """Call ``listener(event)`` for every emitted ``event_type`` while the fiber is loaded."""
        return self._fiber.runtime._listen(self._fiber, event_type, listener, self._section)

    def emit(self, event: object) -> None:
        """Call the sync listeners of ``event`` in order; their failures are contained."""
        self._fiber.runtime.bus.emit(event)

    def listens(self, event_type: type) -> bool:
        """Whether an ``event_type`` emitted now would reach a listener: an emitter that
        builds an event per record or per chunk of output may skip building it otherwise."""
        return self._fiber.runtime.bus.listens(event_type)

    def call_listener(
        self, listener: Callable[[T], object], event: T, *, async_error: str | None = None
    ) -> None:
        """Call a listener a service keeps itself the way :meth:`emit` calls one.

        A failure is logged and reported as :class:`ListenerFailed` (never raised); an async
        listener is not run and fails with a ``TypeError`` saying ``async_error``.
        """
        entry = Listener(type(event), listener)
        self._fiber.runtime.bus.call(entry, event, async_error)

    async def emit_serial(self, event: object) -> None:
        """Await the listeners of ``event`` one after another (failures contained)."""
        await self._fiber.runtime.bus.emit_serial(event)

    async def emit_concurrent(self, event: object) -> None:
        """Run the listeners of ``event`` all at once and await them (failures contained)."""
        await self._fiber.runtime.bus.emit_concurrent(event)

    def snapshot(self) -> FiberSnapshot:
        """The live ownership tree of this context's fiber (see :meth:`Fiber.snapshot`);
        the root context's is the whole runtime's."""
        return self._fiber.snapshot()

    # -- development ----------------------------------------------------------------------------

    async def reload(self, target: object) -> tuple[Fiber, ...]:
        """Re-import the module of ``target`` and replace the live fibers of its plugins.

        Args:
            target: a plugin object, the module that defines it, or a fiber of it (also one
                an earlier reload replaced). Each names the plugin's origin (module name and
                top-level attribute, recorded when it was applied), so the reference first
                applied keeps reloading the live version any number of times. A module
                replaces all of its plugins.

        Returns:
            The new fibers.

        Raises:
            ReloadError: the new code failed to import (nothing was replaced) or to apply
                (the old plugin is running again); or ``target`` is not defined at the top
                level of a module.
        """
        return await self._fiber.runtime._reload(target)

    def __repr__(self) -> str:
        return f"<Context of {self._fiber!r}>"


async def _unwind_section(
    stack: OwnedStack,
    name: str,
    fiber: Fiber,
    _type: type[BaseException] | None,
    unwinding: BaseException | None,
    _traceback: object,
) -> None:
    """The exit of a section: it takes no more entries, and unwinds its own (its exits see
    what unwinds the stack the section is on)."""
    stack.closed = True
    errors = await stack.unwind(unwinding)
    if errors:
        raise BaseExceptionGroup(f"teardown of section {name!r} of fiber {fiber.id} failed", errors)


@final
@attrs.define(eq=False, repr=False)
class _Child:
    """The plugin of :meth:`Context.child`: it only keeps its context."""

    name: str
    ctx: Context | None = None

    async def apply(self, ctx: Context, config: None) -> None:
        self.ctx = ctx


def _name(fn: object) -> str:
    return str(getattr(fn, "__qualname__", fn))
