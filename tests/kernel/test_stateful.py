"""Random lifecycles of the kernel, checked after every step (a hypothesis state machine).

How trio is driven: a :class:`~hypothesis.stateful.RuleBasedStateMachine` is synchronous and
each rule is one step, but a trio runtime must live across steps. So each machine run starts one
``trio.run`` in a helper thread (it opens the runtime and waits), and every rule and invariant
hands an async function to that loop with :func:`trio.from_thread.run` and blocks until it
returns. A step is deterministic: it runs the operation, then waits with
:func:`trio.testing.wait_all_tasks_blocked` until every task is blocked, and only then checks.
If the operation itself has not finished by then, nothing can ever finish it (no time passes
in these plugins), so the step reports a deadlock instead of hanging. This keeps hypothesis's
rule selection, bundles and shrinking, with no sleeps and no event-loop nesting.

Invariants after every step:
- every entry (effect, background task, child fiber) exits exactly once, and in reverse order of
  entry within its fiber, except a child that the machine disposed directly (it leaves early);
- a fiber that is not loading or active has nothing entered any more;
- no fiber is loading or active under a parent that is not;
- no background task of a fiber that is not loading or active is still running;
- a consumer's teardown could still use the service it injects.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import trio
import trio.testing
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

from tests.helpers import budget
from tests.helpers.strategies import EFFECT, TASK, Shape, shapes
from trio_agents.kernel import Context, Fiber, FiberClosedError, FiberState, open_root

T = TypeVar("T")


@attrs.define
class Ledger:
    """What every fiber has entered and not yet exited; violations found on the way."""

    open: dict[str, list[str]] = attrs.Factory(dict)
    early: set[str] = attrs.Factory(set)
    exited: set[str] = attrs.Factory(set)
    running: dict[str, Fiber] = attrs.Factory(dict)
    fibers: dict[str, Fiber] = attrs.Factory(dict)
    item_of: dict[str, tuple[str, str]] = attrs.Factory(dict)
    violations: list[str] = attrs.Factory(list)
    _ids: itertools.count[int] = attrs.Factory(itertools.count)

    def live(self) -> list[Fiber]:
        """The fibers seen so far that are not final."""
        return [f for f in self.fibers.values() if not f.state.is_final]

    def label(self, kind: str) -> str:
        return f"{kind}{next(self._ids)}"

    def enter(self, fiber_id: str, item: str) -> None:
        self.open.setdefault(fiber_id, []).append(item)

    def exit(self, fiber_id: str, item: str) -> None:
        stack = self.open.get(fiber_id, [])
        if item in self.exited or item not in stack:
            self.violations.append(f"{item} of {fiber_id} exited twice or without entering")
        elif stack[-1] != item and item not in self.early:
            self.violations.append(f"{item} of {fiber_id} exited before {stack[-1]} (not LIFO)")
        else:
            stack.remove(item)
            self.exited.add(item)


ParentItem = tuple[str, str] | None


def make_plugin(
    ledger: Ledger,
    shape: Shape,
    parent_item: ParentItem,
    *,
    name: str = "gen",
    consumer: bool = False,
) -> Any:
    """A plugin whose apply runs ``shape``; a consumer also injects and uses ``svc``.

    ``parent_item`` is the fiber's item in its parent's ledger; the fiber's first entry exits
    it, last of all. Consumers pass None: they may apply many times (or never), while their
    one entry in the parent lasts until they are disposed.
    """

    @asynccontextmanager
    async def effect(ctx: Context, item: str) -> AsyncIterator[None]:
        ledger.enter(ctx.fiber.id, item)
        try:
            yield
        finally:
            if consumer and ctx.get("svc") is None:
                ledger.violations.append(f"{ctx.fiber.id} lost its service before teardown")
            ledger.exit(ctx.fiber.id, item)

    @asynccontextmanager
    async def bottom(ctx: Context) -> AsyncIterator[None]:
        if parent_item is not None:
            ledger.item_of[ctx.fiber.id] = parent_item
        yield
        if parent_item is not None:
            ledger.exit(*parent_item)

    async def task(fiber: Fiber, item: str) -> None:
        ledger.running[item] = fiber
        try:
            await trio.sleep_forever()
        finally:
            del ledger.running[item]
            ledger.exit(fiber.id, item)

    @attrs.define
    class Generated:
        name: str
        inject: tuple[str, ...]

        async def apply(self, ctx: Context, config: None) -> None:
            ledger.fibers[ctx.fiber.id] = ctx.fiber
            await ctx.effect(bottom(ctx))
            if consumer:
                assert ctx.svc is not None
            for action in shape:
                if action == EFFECT:
                    await ctx.effect(effect(ctx, ledger.label("e")))
                elif action == TASK:
                    item = ledger.label("t")
                    ledger.enter(ctx.fiber.id, item)
                    ctx.start_soon(task, ctx.fiber, item)
                else:
                    child_shape: Shape = action[1]  # type: ignore[assignment]
                    await spawn(ledger, ctx, child_shape)

    return Generated(name, ("svc",) if consumer else ())


async def spawn(ledger: Ledger, parent: Context, shape: Shape, *, consumer: bool = False) -> Fiber:
    """Apply a generated plugin under ``parent``, entering its fiber in the parent's ledger."""
    if consumer:
        fiber = await parent.plugin(make_plugin(ledger, shape, None, consumer=True))
        ledger.fibers[fiber.id] = fiber
        return fiber
    item = ledger.label("f")
    ledger.enter(parent.fiber.id, item)
    try:
        return await parent.plugin(make_plugin(ledger, shape, (parent.fiber.id, item)))
    except BaseException:
        ledger.open[parent.fiber.id].remove(item)
        raise


class TrioThread:
    """One trio run in a helper thread, with the runtime open, driven step by step."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._target, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _target(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported by close()
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with open_root() as root:
            self.root = root
            self._ready.set()
            await self._stop.wait()

    def step(self, fn: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            results: list[T] = []
            async with trio.open_nursery() as nursery:

                async def go() -> None:
                    results.append(await fn())

                nursery.start_soon(go)
                await trio.testing.wait_all_tasks_blocked()
                if not results:
                    nursery.cancel_scope.cancel()
                    raise AssertionError("the step deadlocked: every task is blocked")
            return results[0]

        return trio.from_thread.run(run, trio_token=self.token)

    def close(self) -> None:
        trio.from_thread.run_sync(self._stop.set, trio_token=self.token)
        self._thread.join()
        if self._error is not None:
            raise self._error


class KernelMachine(RuleBasedStateMachine):
    """Applies, disposes and re-provides at random; checks ownership after every step."""

    fibers = Bundle("fibers")

    def __init__(self) -> None:
        super().__init__()
        self.ledger = Ledger()
        self.loop = TrioThread()
        self.provider: Fiber | None = None

    def _parent(self, parent: Fiber | None) -> Context:
        return self.loop.root if parent is None else parent.context

    def _apply(self, parent: Fiber | None, shape: Shape, consumer: bool) -> Fiber | None:
        ctx = self._parent(parent)
        was_open = ctx.fiber.state.is_open

        async def go() -> Fiber | None:
            try:
                return await spawn(self.ledger, ctx, shape, consumer=consumer)
            except FiberClosedError:
                assert not was_open, "an open fiber refused a child"
                return None

        fiber = self.loop.step(go)
        assert (fiber is not None) == was_open
        return fiber

    @rule(target=fibers, parent=st.none() | fibers, shape=shapes)
    def apply(self, parent: Fiber | None, shape: Shape) -> Fiber | None:
        return self._apply(parent, shape, consumer=False)

    @rule(target=fibers, parent=st.none() | fibers, shape=shapes)
    def apply_consumer(self, parent: Fiber | None, shape: Shape) -> Fiber | None:
        fiber = self._apply(parent, shape, consumer=True)
        if fiber is not None:
            expected = FiberState.ACTIVE if self.provider is not None else FiberState.PENDING
            assert fiber.state is expected
        return fiber

    @precondition(lambda self: self.provider is None)
    @rule()
    def add_provider(self) -> None:
        ledger = self.ledger

        @attrs.define
        class Provider:
            name: str = "provider"

            async def apply(self, ctx: Context, config: None) -> None:
                ledger.fibers[ctx.fiber.id] = ctx.fiber
                ctx.provide("svc", object())

        self.provider = self.loop.step(lambda: self.loop.root.plugin(Provider()))

    @precondition(lambda self: self.provider is not None)
    @rule()
    def remove_provider(self) -> None:
        provider, self.provider = self.provider, None
        assert provider is not None
        self.loop.step(provider.dispose)
        assert not any(
            f.state is FiberState.ACTIVE and "svc" in f.spec.inject for f in self.ledger.live()
        )

    @rule(fiber=fibers)
    def dispose(self, fiber: Fiber | None) -> None:
        if fiber is None:
            return
        item = self.ledger.item_of.get(fiber.id)
        if item is not None:
            self.ledger.early.add(item[1])
        self.loop.step(fiber.dispose)
        assert fiber.state is FiberState.DISPOSED

    @invariant()
    def ownership_holds(self) -> None:
        # Safe to read from this thread: every step returns only once all trio tasks blocked.
        ledger = self.ledger
        assert not ledger.violations, ledger.violations
        for fiber in list(ledger.fibers.values()):
            if not fiber.state.is_open:
                assert ledger.open.get(fiber.id, []) == [], (fiber, ledger.open[fiber.id])
            elif fiber.parent is not None:
                assert fiber.parent.state.is_open, f"{fiber} is open under {fiber.parent}"
        for item, fiber in ledger.running.items():
            assert fiber.state.is_open, f"task {item} still runs in {fiber}"

    def teardown(self) -> None:
        self.loop.close()
        assert not self.ledger.violations, self.ledger.violations
        assert all(stack == [] for stack in self.ledger.open.values()), self.ledger.open
        assert self.ledger.running == {}


KernelMachine.TestCase.settings = settings(
    max_examples=budget.examples(40, 200),
    stateful_step_count=budget.count(15, 40),
    deadline=None,
)
test_kernel_lifecycle = KernelMachine.TestCase
