"""A fiber: one plugin application in its own trio task, owning one LIFO stack.

Rules:
- Each fiber runs in one task, started in its parent's nursery. That task runs ``apply``,
  enters every effect and exits every entry, so task-bound context managers (nurseries, cancel
  scopes) are legal effects. An effect asked for from another task is handed to the fiber's
  task and entered there. Its ``__aenter__`` is not cancelled by ``dispose()`` (a scope around
  it would break effects that open a nursery), so an effect must not block forever on entry.
- The fiber's nursery is the bottom of its stack: background tasks and child fibers live in
  it, and each of them is also an entry, so they unwind in reverse order of set-up with the
  rest.
- Teardown is shielded: an outer cancellation cannot cut it short.
- ``dispose`` is memoized: every caller joins one teardown and returns when it is complete.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, TypeVar, final

import attrs
import trio

from .._base import Signal, Wake
from ..cancel import CauseScope, DisposedCancel, forget_inherited_scopes
from ._context import _CURRENT, Context
from ._errors import FiberClosedError
from ._events import FiberFailed
from ._plugin import PluginSpec
from ._snapshot import FiberSnapshot, snapshot_of
from ._stack import Entry, OwnedStack
from ._states import FiberState, Halt, check_transition, end_state, halt_with

if TYPE_CHECKING:
    from ._runtime import Runtime

log = logging.getLogger("trio_agents")

T = TypeVar("T")


@attrs.frozen
class FiberStatistics:
    """A snapshot of a fiber, for tests and debugging."""

    id: str
    state: FiberState
    entries: tuple[str, ...]
    children: int


@final
@attrs.define(eq=False, repr=False)
class _EffectRequest:
    """An effect asked for from a task other than the fiber's own."""

    cm: AbstractAsyncContextManager[Any]
    section: OwnedStack | None
    done: Signal = attrs.field(factory=Signal, init=False)
    value: Any = attrs.field(default=None, init=False)
    error: BaseException | None = attrs.field(default=None, init=False)


@final
@attrs.define(eq=False, repr=False)
class Fiber:
    """One application of a plugin: a node of the ownership tree.

    Fibers are made by :meth:`Context.plugin`; never construct one directly.
    """

    runtime: Runtime
    spec: PluginSpec
    _config: object
    _raw_config: object
    parent: Fiber | None
    id: str = attrs.field(init=False)
    _context: Context | None = attrs.field(init=False)
    _state: FiberState = attrs.field(default=FiberState.PENDING, init=False)
    _stack: OwnedStack | None = attrs.field(default=None, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _task: trio.lowlevel.Task | None = attrs.field(default=None, init=False)
    _load_scope: CauseScope | None = attrs.field(default=None, init=False)
    # Trick: a list, not a deque: it is empty for most of a fiber's life, and an empty deque
    # is 704 B more per idle agent (python -m benchmarks --only memory).
    _requests: list[_EffectRequest] = attrs.field(factory=list, init=False)
    _wake: Wake = attrs.field(factory=Wake, init=False)
    # The one pending request (see Halt): what ends the application, the strongest kept.
    _halt: Halt | None = attrs.field(default=None, init=False)
    # Why the fiber fails (with Halt.FAIL): apply's error, else its first task's.
    _failure: BaseException | None = attrs.field(default=None, init=False)
    # nursery.start()'s status, until the fiber reports it started (see _report, a trick).
    _status: trio.TaskStatus[None] | None = attrs.field(default=None, init=False)
    # Why the public dispose() refuses (see guard()), or None.
    _guard: str | Callable[[Fiber], str] | None = attrs.field(default=None, init=False)
    # Set by the owner of the root before it disposes it: what unwinds the application.
    _unwinding: BaseException | None = attrs.field(default=None, init=False)
    _application_ended: Signal = attrs.field(factory=Signal, init=False)
    # The failures of the last application's exits; of the fiber's teardown (_errors).
    _application_errors: Sequence[BaseException] = attrs.field(default=(), init=False)
    _errors: Sequence[BaseException] = attrs.field(default=(), init=False)
    _done: Signal = attrs.field(factory=Signal, init=False)
    _entry: Entry | None = attrs.field(default=None, init=False)
    _children: dict[Fiber, None] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        self.id = f"{self.spec.name}#{self.runtime._next_id()}"
        self._context = Context(self)

    # -- public surface -------------------------------------------------------------------

    @property
    def context(self) -> Context:
        """The fiber's own context: what its ``apply`` received.

        Once the fiber is done (disposed or failed), an equivalent new context on each read,
        which refuses what a done fiber refuses.
        """
        context = self._context
        # Trick: a done fiber drops its context (and its task and entry), which all refer back
        # to it: a fiber nobody holds is freed at once, not by the cyclic garbage collector
        # (pinned by tests/kernel/test_fiber.py::
        # test_a_disposed_fiber_is_freed_without_the_collector).
        return context if context is not None else Context(self)

    @property
    def name(self) -> str:
        """The plugin's name."""
        return self.spec.name

    @property
    def plugin(self) -> object:
        """The plugin object (or module) this fiber applies."""
        return self.spec.plugin

    @property
    def state(self) -> FiberState:
        """The current :class:`FiberState`."""
        return self._state

    @property
    def exception(self) -> BaseException | None:
        """Why the fiber failed, if it did."""
        return self._failure if self._state is FiberState.FAILED else None

    @property
    def children(self) -> tuple[Fiber, ...]:
        """Live child fibers, oldest first."""
        return tuple(self._children)

    def statistics(self) -> FiberStatistics:
        """A frozen snapshot of this fiber."""
        return FiberStatistics(
            id=self.id,
            state=self._state,
            entries=self._stack.labels() if self._stack is not None else (),
            children=len(self._children),
        )

    def snapshot(self) -> FiberSnapshot:
        """The live tree of this fiber, as plain data: its entries in stack order (teardown
        takes them newest first), its child fibers nested in their entries, and what its
        plugin and services describe of themselves (see :class:`Describer`)."""
        return snapshot_of(self)

    async def dispose(self) -> None:
        """Tear the fiber down and return when the teardown is complete.

        Memoized: concurrent and repeated callers join one teardown.

        Raises:
            ExceptionGroup: one or more exits failed (every other entry still unwound).
            RuntimeError: called from the fiber's own task, which would wait for itself; or
                the fiber is guarded (see :meth:`guard`): only its disposer tears it down.
        """
        guard = self._guard
        if guard is not None:
            refusal = guard if isinstance(guard, str) else guard(self)
            raise RuntimeError(f"fiber {self.id} cannot be disposed from the fiber tree: {refusal}")
        await self._dispose()

    def guard(self, refusal: str | Callable[[Fiber], str]) -> Callable[[], Awaitable[None]]:
        """Make :meth:`dispose` refuse (saying ``refusal``); return the one disposer.

        For a fiber whose teardown is a capability (an agent's, which its handle holds):
        whoever reaches the fiber through the public tree (``runtime.fibers``,
        ``Fiber.children``) cannot dispose it. Its parent's teardown still does.

        ``refusal`` is the reason, or a function of the fiber that says it, called only when
        a dispose is refused (one shared function holds no string per fiber).

        Raises:
            RuntimeError: the fiber is guarded already (its disposer has a holder).
        """
        if self._guard is not None:
            raise RuntimeError(f"fiber {self.id} is guarded already; its disposer has a holder")
        self._guard = refusal
        return self._dispose

    async def _dispose(self) -> None:
        if trio.lowlevel.current_task() is self._task and not self._done.is_set():
            raise RuntimeError(
                f"fiber {self.id} cannot await its own disposal from its own task; "
                f"call dispose() from another task, e.g. one started with ctx.start_soon"
            )
        if not self._done.is_set():
            self._ask(Halt.DISPOSE)
            if self._load_scope is not None:
                self._load_scope.cancel(DisposedCancel())
            await self._done.wait()
        else:
            await trio.lowlevel.checkpoint()
        if self._errors:
            raise BaseExceptionGroup(f"teardown of fiber {self.id} failed", list(self._errors))

    def __repr__(self) -> str:
        return f"<Fiber {self.id} {self._state.value}>"

    def _declares(self, service: str) -> bool:
        # The root context belongs to the application that opened the runtime: it may use
        # every service. Other fibers use what they or their ancestors declared.
        if self.parent is None:
            return True
        fiber: Fiber | None = self
        while fiber is not None:
            if service in fiber.spec.inject:
                return True
            fiber = fiber.parent
        return False

    def _within(self, ancestor: Fiber) -> bool:
        fiber: Fiber | None = self
        while fiber is not None:
            if fiber is ancestor:
                return True
            fiber = fiber.parent
        return False

    # -- entries ---------------------------------------------------------------------------

    def _check_open(
        self, what: str, section: OwnedStack | None = None
    ) -> tuple[OwnedStack, trio.Nursery]:
        """The stack ``what`` goes on (``section``, else the fiber's own) and the nursery.

        A section takes entries until it starts to unwind, also while the fiber unloads: what
        is added to it then (by the exits above it) still unwinds in its place.
        """
        if section is not None and not section.closed and self._nursery is not None:
            return section, self._nursery
        if not self._state.is_open or self._stack is None or self._nursery is None:
            raise FiberClosedError(
                f"fiber {self.id} is {self._state.value}; it cannot take {what} any more "
                f"(add it to a fiber that is loading or active)"
            )
        if section is None:
            return self._stack, self._nursery
        raise FiberClosedError(
            f"the section of fiber {self.id} that {what} was added to is unwinding; it "
            f"cannot take it any more (add it to a section or fiber that is open)"
        )

    def _push(self, entry: Entry, section: OwnedStack | None = None) -> Entry:
        stack, _ = self._check_open(entry.label, section)
        return stack.push(entry)

    async def _effect(
        self, cm: AbstractAsyncContextManager[T], section: OwnedStack | None = None
    ) -> T:
        if not hasattr(type(cm), "__aenter__") or not hasattr(type(cm), "__aexit__"):
            raise TypeError(
                f"ctx.effect() takes an async context manager; got {type(cm).__name__} "
                f"(did you forget to call it?)"
            )
        self._check_open(f"the effect {type(cm).__name__}", section)
        if trio.lowlevel.current_task() is self._task:
            return await self._enter(cm, section)
        if not self._state.is_open:
            # The fiber's task serves requests only while the fiber is open (a section still
            # takes entries while it unloads, from the exits that run in that task).
            raise FiberClosedError(
                f"fiber {self.id} is {self._state.value}; the effect {type(cm).__name__} can "
                f"only be entered from its own task now (add it to a fiber that is active)"
            )
        request = _EffectRequest(cm, section)
        self._requests.append(request)
        self._poke()
        await request.done.wait()
        if request.error is not None:
            raise request.error
        return request.value  # type: ignore[no-any-return]

    async def _enter(
        self, cm: AbstractAsyncContextManager[T], section: OwnedStack | None = None
    ) -> T:
        kind = type(cm)
        value = await kind.__aenter__(cm)
        self._push(
            Entry("effect", kind.__aexit__, (cm,), about=kind.__name__, unwinding=True), section
        )
        return value

    def _own_task(
        self,
        fn: Callable[..., Awaitable[object]],
        args: tuple[object, ...],
        name: object,
        context: Context,
    ) -> _OwnedTask:
        """A task the fiber owns, its entry pushed where ``context`` adds things; not started."""
        stack, nursery = self._check_open(f"the task {name}", context._section)
        task = _OwnedTask(fn, args, context, nursery)
        task.entry = stack.push(Entry("task", task.stop, about=name))
        return task

    def _task_failed(self, exc: BaseException) -> None:
        log.error("a background task of fiber %s failed", self.id, exc_info=exc)
        if self._failure is None:
            self._failure = exc
        self._ask(Halt.FAIL)

    # -- the fiber's task ------------------------------------------------------------------

    def _poke(self) -> None:
        self._wake.set()

    def _ask(self, halt: Halt) -> None:
        """Ask the fiber's task to end the application (the stronger request stands)."""
        self._halt = halt_with(self._halt, halt)
        self._poke()

    def _to(self, new: FiberState) -> None:
        self._state = check_transition(self._state, new)

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The fiber's task: wait while a service is missing, apply, until a final state."""
        self._task = trio.lowlevel.current_task()
        _CURRENT.set(self.context)
        forget_inherited_scopes()
        self._status = task_status
        del task_status  # reported once, then dropped (see _report)
        try:
            # Invariant: a final state ends the loop even without a dispose() call; an
            # application cut short by an outer cancellation ends disposed, and must not
            # be applied again.
            while self._halt is not Halt.DISPOSE and not self._state.is_final:
                self._wake = Wake()
                if self.runtime._missing(self.spec.inject):
                    if self._state is not FiberState.PENDING:
                        self._to(FiberState.PENDING)
                    self._report()
                    await self._wake.wait()
                    continue
                await self._application()
        finally:
            if not self._state.is_final:
                if self._state in (FiberState.LOADING, FiberState.ACTIVE):
                    self._to(FiberState.UNLOADING)
                self._to(FiberState.DISPOSED)
            self._refuse_requests()
            self.runtime._forget(self)
            if self._entry is not None:
                self._entry.discard()
            if self.parent is not None:
                self.parent._children.pop(self, None)
            # The references back to this fiber from what it holds (see `context`).
            self._context = self._entry = self._task = None
            self._done.set()
        self._report()

    async def _application(self) -> None:
        """One application: apply, serve effect requests while active, unwind, settle."""
        self._to(FiberState.LOADING)
        self._application_ended = Signal()
        stack = self._stack = OwnedStack()
        errors: list[BaseException] = []
        applied = Signal()
        # What tears the application down from outside: trio's Cancelled of an outer
        # cancellation, or what the root's owner hands over (see open_root).
        outer: BaseException | None = None
        try:
            # Invariant: this task enters and exits every entry; the nursery is below all of
            # them, so shielding its cancel scope protects the whole unwind (and the tasks
            # the unwind stops one by one) from an outer cancellation.
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._load_scope = CauseScope()
                nursery.start_soon(self._apply, self._load_scope, applied)
                try:
                    # One loop for both phases: enter the effects other tasks ask for, until
                    # the fiber is asked to halt; when ``apply`` returns, the fiber is active.
                    # Trick: the loop is in this frame, not a helper's: an idle fiber holds
                    # one frame less, 200 B per idle agent (python -m benchmarks --only memory).
                    loading = True
                    while True:
                        self._wake = Wake()
                        if self._requests:
                            await self._enter_requested()
                            continue
                        if self._halt is not None:
                            break
                        if loading and applied.is_set():
                            loading = False
                            if self._state is FiberState.LOADING:
                                self._activate()
                            continue
                        await self._wake.wait()
                except BaseException as exc:
                    outer = exc
                    raise
                finally:
                    errors = await self._unwind(stack, applied, outer)
                    del outer  # an exception held by its own traceback's frame is a cycle
        finally:
            self._settle(errors)

    async def _unwind(
        self, stack: OwnedStack, applied: Signal, outer: BaseException | None
    ) -> list[BaseException]:
        """Unwind the application's stack, shielded; return the failures of its exits."""
        assert self._nursery is not None
        self._nursery.cancel_scope.shield = True
        load_scope, self._load_scope = self._load_scope, None
        self._to(FiberState.UNLOADING)
        if load_scope is not None and not applied.is_set():
            load_scope.cancel(DisposedCancel())
            await applied.wait()
        self._refuse_requests()
        # Invariant: an effect's exit sees what unwinds the fiber: its failure first (the
        # state it ends in), else an outer cancellation, else what the owner handed over;
        # None on a clean unload.
        unwinding = self._failure
        if unwinding is None:
            unwinding = outer if outer is not None else self._unwinding
        errors = await stack.unwind(unwinding)
        self._unwinding = None
        self._nursery = None
        self._stack = None
        return errors

    def _settle(self, errors: list[BaseException]) -> None:
        """Take the end state the pending request picks (see :func:`end_state`)."""
        self._application_errors = errors
        end = end_state(self._halt)
        if end is FiberState.PENDING:
            self._halt = None  # the request is served: a provider's return applies it again
        else:
            self._errors = errors
        self._to(end)
        if end is FiberState.FAILED:
            assert self._failure is not None  # Halt.FAIL comes with it
            # One report per failure, as trio's nursery.start() re-raises what the started
            # task raised and logs nothing: the creator still waiting in ctx.plugin() (the
            # status not yet reported) is handed it (Runtime._spawn); else no one is, and
            # the log is where it goes.
            handed = self._status is not None and self._status is not trio.TASK_STATUS_IGNORED
            self._log_failure(logging.DEBUG if handed else logging.ERROR)
            self.runtime.bus.emit(
                FiberFailed(fiber_id=self.id, plugin=self.name, error=self._failure)
            )
        self._application_ended.set()

    def _log_failure(self, level: int) -> None:
        """Log the failure the fiber ended with, at ``level``."""
        log.log(level, "fiber %s failed", self.id, exc_info=self._failure)

    async def _apply(self, scope: CauseScope, applied: Signal) -> None:
        _CURRENT.set(self.context)
        forget_inherited_scopes()
        activated = False
        try:
            if self._halt is not None or self._state is not FiberState.LOADING:
                # Disposed (or its task cancelled) before it began: nothing is applied (its
                # first steps would only meet a fiber that unloads already), nothing undone.
                return
            with scope:
                await self.spec.apply(self.context, self._config)
            if (
                not scope.cancelled_caught
                and self._state is FiberState.LOADING
                and not self._requests
                and self._halt is None
            ):
                # What the fiber's loop would do next, done here: the creator resumes in
                # the scheduler's next pass, not in the one after the loop took the news
                # (one task step of six per plugin + dispose; pinned by tests/kernel/test_fiber.py::
                # test_a_quick_apply_activates_without_waking_the_fiber_task).
                self._activate()
                activated = True
        except Exception as exc:
            # The fiber's failure, over a task's that came first: ctx.plugin() raises it.
            self._failure = exc
            self._halt = halt_with(self._halt, Halt.FAIL)
        finally:
            applied.set()
            if not activated:
                # The loop has news to act on (a failure, a cancel, a request or a halt).
                # After an activation it has none: it reads ``applied`` when it next wakes.
                self._poke()

    def _activate(self) -> None:
        """The application is done: the fiber is active (its load scope is not kept)."""
        self._load_scope = None
        self._to(FiberState.ACTIVE)
        self._report()

    def _report(self) -> None:
        """Tell ``nursery.start()`` the fiber started, once.

        Trick: the status is dropped when used: a status kept keeps trio's temporary nursery
        of ``nursery.start()`` alive with its cancel status, 1,160 B per idle agent (python -m
        benchmarks --only memory).
        """
        status, self._status = self._status, None
        if status is not None:
            status.started()

    async def _enter_requested(self) -> None:
        """Enter the oldest effect another task asked for; hand it its value or error."""
        request = self._requests.pop(0)
        try:
            request.value = await self._enter(request.cm, request.section)
        except BaseException as exc:
            request.error = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            request.done.set()

    def _refuse_requests(self) -> None:
        while self._requests:
            request = self._requests.pop(0)
            request.error = FiberClosedError(
                f"fiber {self.id} is {self._state.value}; the effect "
                f"{type(request.cm).__name__} was not entered"
            )
            request.done.set()

    async def _reset_to_pending(self) -> list[BaseException]:
        """Unwind the current application because a required service is leaving."""
        if self._state in (FiberState.LOADING, FiberState.ACTIVE):
            self._ask(Halt.RESET)
            if self._load_scope is not None:
                self._load_scope.cancel(DisposedCancel())
        if self._state in (FiberState.LOADING, FiberState.ACTIVE, FiberState.UNLOADING):
            await self._application_ended.wait()
            return list(self._application_errors)
        return []


@final
@attrs.define(eq=False, repr=False)
class _OwnedTask:
    """A background task a fiber owns (``ctx.start_soon``, ``ctx.start``), and its exit.

    Its entry's exit, :meth:`stop`, cancels it with :class:`DisposedCancel` and waits for it;
    what it raises while being stopped is that teardown's failure (``stop`` raises it), what
    it raises otherwise fails the fiber.
    """

    fn: Callable[..., Awaitable[object]]
    args: tuple[object, ...]
    #: The context it was started through: its fiber, and the section its entry is on.
    context: Context
    #: The fiber's nursery, which it runs in.
    nursery: trio.Nursery
    scope: CauseScope = attrs.field(factory=CauseScope, init=False)
    done: Signal = attrs.field(factory=Signal, init=False)
    #: Raised while being stopped: the failure of the teardown that stopped it.
    failure: BaseException | None = attrs.field(default=None, init=False)
    #: Its entry on the stack, until the task ends (no cycle once it ended).
    entry: Entry | None = attrs.field(default=None, init=False)

    def start_soon(self, name: object) -> Entry:
        """Start the task (named ``name``); return its entry."""
        entry = self.entry
        assert entry is not None  # pushed by Fiber._own_task
        self.nursery.start_soon(self.run, name=name)
        return entry

    async def start(self, name: object) -> Any:
        """Start the task and return what it passes to ``task_status.started()``."""
        return await self.nursery.start(self.run, name=name)

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        """The task: ``fn(*args)`` (with ``task_status`` if started by ``ctx.start``)."""
        _CURRENT.set(self.context)
        forget_inherited_scopes()
        status = None if task_status is trio.TASK_STATUS_IGNORED else _Status(task_status)
        try:
            with self.scope:
                if status is None:
                    await self.fn(*self.args)
                else:
                    await self.fn(*self.args, task_status=status)
        except Exception as exc:
            if status is not None and not status.reported:
                raise
            if self.scope.cancel_called:
                self.failure = exc
            else:
                self.context.fiber._task_failed(exc)
        finally:
            entry, self.entry = self.entry, None
            if entry is not None:
                entry.discard()
            self.done.set()

    async def stop(self) -> None:
        """Cancel the task and wait for it; raise what it raised meanwhile."""
        self.scope.cancel(DisposedCancel())
        await self.done.wait()
        if self.failure is not None:
            raise self.failure


@final
@attrs.define(eq=False, repr=False)
class _Status:
    """The ``task_status`` handed to a task started with ``ctx.start``."""

    _status: trio.TaskStatus[Any]
    reported: bool = attrs.field(default=False, init=False)

    def started(self, value: object = None) -> None:
        self.reported = True
        self._status.started(value)
