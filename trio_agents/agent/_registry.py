"""The ``agents`` service: create, resume, look up; each agent hosted in a fiber of its own.

Rules (teardown order, which falls out of the agent fiber's LIFO stack):
- set-up, in the agent fiber's ``apply``: enter the session (its exit flushes and detaches it,
  ``SessionDisposed``) → attach to the registry (its exit detaches, ``AgentDisposed``) → open
  the agent's scope, a section of the agent fiber's stack for child agents, background jobs
  and per-agent tools.
- commit, in the creating task right after ``apply`` returned, with no checkpoint in between:
  announce the session (``SessionCreated``; the agent is already in the registry), publish the
  agent (``AgentCreated``), start the loop and register the graceful stop. Only a committed
  agent runs, emits events and is handed to the caller.
- teardown, the reverse: stop the loop and await ``agent.done`` and its flush → unwind the
  scope → detach from the registry → flush and detach the session.
- Rollback: a creation that fails or whose caller is cancelled before the commit disposes the
  agent fiber, and its session exit *abandons* the session instead of detaching it, so a new
  id leaves no file and no event behind and is usable again at once.
- Co-owners: the agent fiber is a child of the ``AgentLoop`` fiber (the factory); the calling
  fiber holds an entry that disposes it. Every path joins the fiber's memoized teardown, and
  the path that did not run removes its entry.
- Live ids are unique. ``SessionStore.enter`` is the authoritative check: of two concurrent
  creations with one id, the loser fails inside its fiber's apply, which unwinds everything it
  entered (no event was emitted for it).
- The session is entered with the hosted fiber as its owner: only the agent's own teardown
  can detach it, never an observer holding the bare agent.
- The registry builds nothing itself: the runtime's :class:`AgentFactory` builds each agent,
  runs and stops it (``_factory``); the registry holds agents as :class:`AgentLike` only, so
  every agent behind ``ctx.agents`` follows the rules above, whoever built it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Generic, final

import attrs
import trio
from typing_extensions import TypeVar

from ..cancel import LeaseLost
from ..kernel import (
    Context,
    Entry,
    Fiber,
    FiberClosedError,
    FiberState,
    ServiceKey,
    current_context,
)
from ..model import Model
from ..session import (
    Session,
    SessionExistsError,
    SessionIdInUseError,
    SessionLeaseLostError,
    SessionStore,
    SessionWriteError,
    SessionWriteFailed,
)
from . import _hook_calls as hook_calls
from ._agent import Agent
from ._approval import Approver
from ._budget import Budget
from ._children import close_open_children
from ._config import ALL_TOOLS, UNSET, AgentConfig, Maybe, ToolNames, Unset, latest_config
from ._definitions import TASK_TOOLS, AgentDefinition, Definitions
from ._driver import AgentDriver, Built
from ._errors import AgentIdInUseError, ModelRequiredError
from ._events import AgentCreated, AgentDisposed
from ._factory import AGENT_FACTORY, AgentFactory, AgentRequest, DefaultAgentFactory
from ._handle import AgentHandle
from ._hook_points import AGENT_DISPOSE, CHILD_END, CHILD_START
from ._hooks import HOOKS
from ._like import AgentLike
from ._output import OutputKind, OutputType, output_of
from ._snapshot import describe_agent

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from ..model import ModelCatalog
    from ._tools import ToolRegistry

log = logging.getLogger("trio_agents")

T = TypeVar("T")
A = TypeVar("A", bound=AgentLike, default=Agent)


@final
@attrs.define(eq=False, repr=False)
class AgentScope:
    """What is added here is owned by one agent and disposed with it, after its loop stopped.

    Handed out by :meth:`AgentRegistry.scope_of`. It can add entries (cleanups, effects,
    background tasks) but it does not hand out a fiber, so holding it does not allow tearing
    the agent down.
    """

    _ctx: Context

    def defer(self, fn: Callable[..., Awaitable[object]], *args: object) -> Entry:
        """Run ``await fn(*args)`` when the agent is torn down (see :meth:`Context.defer`)."""
        return self._ctx.defer(fn, *args)

    async def effect(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter ``cm`` and exit it when the agent is torn down (see :meth:`Context.effect`)."""
        return await self._ctx.effect(cm)

    def start_soon(
        self, fn: Callable[..., Awaitable[object]], *args: object, name: object = None
    ) -> Entry:
        """Run a background task that the agent's teardown cancels and awaits."""
        return self._ctx.start_soon(fn, *args, name=name)

    def __repr__(self) -> str:
        return f"<AgentScope of {self._ctx.fiber.name}>"


@final
@attrs.define(eq=False, repr=False)
class _Hosted(Generic[A]):
    """The plugin of one agent's fiber, and the transaction that creates the agent."""

    registry: AgentRegistry[A]
    session: Session
    make: Callable[[], Built[A]]
    ctx: Context | None = attrs.field(default=None, init=False)
    agent: A | None = attrs.field(default=None, init=False)
    #: Runs and stops the agent: the factory gave it to this transaction alone.
    driver: AgentDriver | None = attrs.field(default=None, init=False)
    #: The agent's scope, a section of its fiber's stack: what the agent owns beyond its
    #: loop lands here, and unwinds after the loop stopped.
    scope: Context | None = attrs.field(default=None, init=False)
    committed: bool = attrs.field(default=False, init=False)
    #: The one way to tear the agent's fiber down: its dispose() through the fiber tree
    #: refuses; the handle (and the caller's co-owner entry) hold this.
    _disposer: Callable[[], Awaitable[None]] | None = attrs.field(default=None, init=False)

    @property
    def name(self) -> str:
        """The plugin's name (read once, when its fiber is made)."""
        return f"agent:{self.session.id}"

    async def apply(self, ctx: Context, config: None) -> None:
        registry, store, session = self.registry, self.registry.store, self.session
        self.ctx = ctx
        self._disposer = ctx.fiber.guard(_refusal)
        # Owned before it is entered: the end also undoes an enter that did not complete.
        ctx.defer(self._end_session)
        try:
            await store.enter(session, owner=self)
        except SessionIdInUseError as exc:
            raise registry._in_use_error(session.id, exc) from None
        # The enter is shielded: a dispose that came meanwhile (the creator cancelled) cuts
        # the creation short here, not as a failure of the next step on a closing fiber.
        await trio.lowlevel.checkpoint_if_cancelled()
        built = self.make()
        self.make = _built  # the request it closed over is not the agent's to keep
        agent = built.agent if isinstance(built, Built) else None
        if agent is None or not _is_agent_like(agent) or agent.session is not session:
            raise TypeError(
                f"{self.registry.factory!r}.build() returned {built!r}, which is not a Built "
                f"agent of session {session.id!r}; return Built(agent, driver) with an "
                f"AgentLike on request.session"
            )
        self.agent, self.driver = agent, built.driver
        registry._attach(agent)
        ctx.defer(registry._detach, self)
        self.scope = ctx.section("agent-scope")

    def describe(self, now: float) -> object | None:
        """The agent, for a snapshot of the ownership tree (see ``_snapshot``)."""
        agent = self.agent
        return describe_agent(agent, now) if agent is not None else None

    def commit(self) -> A:
        """Publish the agent and start its loop; synchronous, so it is all or nothing.

        Raises:
            FiberClosedError: the agent's fiber was torn down before it could be published
                (its factory or its parent went away during the creation).
        """
        ctx, agent, driver = self.ctx, self.agent, self.driver
        if ctx is None or agent is None or driver is None:
            raise self._torn_down()
        if ctx.fiber.state is not FiberState.ACTIVE:
            raise self._torn_down()
        self.committed = True
        self.registry.store.announce(self.session)
        self.registry._publish(agent)
        ctx.start_soon(driver.run, name=f"agent {agent.id} loop")
        ctx.defer(driver.stop)
        return agent

    def disposer(self) -> Callable[[], Awaitable[None]]:
        """The agent fiber's disposer, while its fiber is not torn down.

        Raises:
            FiberClosedError: the agent's fiber was torn down before it could be published.
        """
        if self._disposer is None:
            raise self._torn_down()
        return self._disposer

    def _torn_down(self) -> FiberClosedError:
        return FiberClosedError(
            f"agent {self.session.id!r} was torn down before its creation completed "
            f"(its agent loop or parent was disposed meanwhile); nothing was kept"
        )

    async def roll_back(self) -> None:
        """Undo an uncommitted creation: nothing of it is left (call shielded)."""
        if self._disposer is not None:
            await self._disposer()
        await self.registry.store.abandon(self.session, owner=self)

    async def _end_session(self) -> None:
        store = self.registry.store
        try:
            if self.committed:
                await store.detach(self.session, owner=self)
            else:
                await store.abandon(self.session, owner=self)
        finally:
            # The last step of the agent's teardown: its fiber holds this plugin, so the
            # contexts of that fiber, kept here, would make a cycle the collector must free.
            self.ctx = self.scope = None
            self._disposer = None


@final
class AgentRegistry(Generic[A]):
    """The service ``agents`` (provided by the ``AgentLoop`` plugin).

    It publishes, looks up and owns the agents; the runtime's :class:`AgentFactory` builds
    them (``open_runtime(factory=...)``). ``A`` is the type of agent that factory builds:
    :class:`Agent` unless the runtime was given another factory.

    Args:
        factory: the builder of the agents; ``None`` means the service ``agent_factory``,
            else :class:`DefaultAgentFactory`.
        deps: the application's dependencies every agent's tools see as ``ctx.deps``
            unless the agent is given its own (``open_runtime(deps=...)``); held, never
            stored.
    """

    def __init__(
        self,
        ctx: Context,
        store: SessionStore,
        tools: ToolRegistry,
        models: ModelCatalog,
        factory: AgentFactory[A] | None = None,
        *,
        deps: object = None,
    ) -> None:
        self._ctx = ctx
        self.deps = deps
        self.store = store
        self.tools = tools
        self.models = models
        found: AgentFactory[Any] = factory or ctx.get(AGENT_FACTORY) or DefaultAgentFactory()
        #: The factory that builds, runs and stops this registry's agents.
        self.factory: AgentFactory[A] = found
        self._live: dict[str, A] = {}
        self._hosted: dict[AgentLike, _Hosted[A]] = {}
        self._co_owners: dict[A, Entry] = {}
        # Invariant: the agents whose AgentCreated was emitted and AgentDisposed not yet.
        self._published: set[A] = set()
        #: The agent definitions in force (``define``), that the ``task`` tool starts from.
        self.definitions = Definitions()
        ctx.on(SessionWriteFailed, self._on_write_failed)

    def get(self, agent_id: str) -> A | None:
        """The live agent with this id, or ``None``."""
        return self._live.get(agent_id)

    def list(self) -> tuple[A, ...]:
        """Every live agent, oldest first."""
        return tuple(self._live.values())

    def lead_tools(self) -> tuple[str, ...] | None:
        """The ``tools`` of an agent a front end starts for a person (``run``, ``chat``, an
        editor's session): every tool, and while agent definitions exist the task tools too
        (``None`` when there are none, so nothing is recorded that a resume would keep)."""
        if not self.definitions.list():
            return None
        return (ALL_TOOLS, *TASK_TOOLS)

    async def define(
        self,
        name: str,
        *,
        description: str,
        instructions: str | None = None,
        model: Model | str | None = None,
        tools: ToolNames = None,
        ask: ToolNames = None,
        max_steps: int = 50,
        budget: Budget | None = None,
    ) -> Entry:
        """Define a named template of child agents for as long as the calling fiber is
        loaded (see :class:`AgentDefinition` for the arguments); the ``task`` tool starts
        children from it.

        Returns:
            The calling fiber's entry; ``await entry.close()`` undefines it early.

        Raises:
            DefinitionNameInUseError: a definition of that name is in force.
            ValueError: a value is invalid (the name, ``max_steps``).
        """
        definition = AgentDefinition(
            name=name,
            description=description,
            instructions=instructions,
            model=model,
            tools=tools,
            ask=ask,
            max_steps=max_steps,
            budget=budget,
        )
        await trio.lowlevel.checkpoint()
        return self.definitions.define(definition)

    async def create(
        self,
        model: Model | str | None = None,
        session_id: str | None = None,
        tools: ToolNames = None,
        instructions: str | None = None,
        parent: A | None = None,
        *,
        max_steps: int = 50,
        cwd: str | os.PathLike[str] | None = None,
        ask: ToolNames = None,
        approver: Approver | None = None,
        deps: Maybe[object] = UNSET,
        output: OutputKind | None = None,
        budget: Budget | None = None,
    ) -> AgentHandle[A]:
        """Create an agent on a new session; its definition is recorded in the session.

        Args:
            model: a :class:`Model`, a model spec such as ``"echo?delay=1"``, or ``None`` for
                the runtime's default.
            session_id: the id (of agent and session); generated when ``None``.
            tools: the names of the tools the agent may call; ``None`` means every tool not
                marked ``explicit`` (so not ``task``), and a name ``"*"`` those same tools
                (``["*", "task"]``: all of them and ``task``).
            instructions: the system prompt.
            parent: make a child agent owned by ``parent`` (``ParentCancel`` reaches it).
            max_steps: the most model requests one turn may make.
            cwd: the working directory of the agent's shell commands (made absolute);
                ``None`` means the process's own.
            ask: the names of the tools whose calls need approval in this agent, besides the
                tools marked ``ask`` (recorded, like ``tools``).
            approver: who is asked before such a call runs (not recorded; see
                :attr:`Agent.approver`).
            deps: the application's dependencies the agent's tools see as ``ctx.deps``
                (a live object, not recorded); by default the runtime's.
            output: the typed answer of every turn (:attr:`Agent.output`, not recorded):
                an attrs class or an :class:`OutputSchema`.
            budget: what the agent and its descendants may spend (recorded; see
                :class:`Budget`); ``None``: no limit of its own (its ancestors' still count).

        Returns:
            A handle to the running agent. If the call fails or is cancelled, nothing of the
            agent is left: no registry entry, no live session, no stored file, no event.

        Raises:
            AgentIdInUseError: a live agent already has ``session_id``.
            SessionExistsError: a stored session has ``session_id`` (resume it instead).
            ModelError: the model cannot answer as configured (a missing API key).
        """
        typed = output_of(output) if output is not None else None
        config = AgentConfig().given(
            model=model,
            tools=tools,
            instructions=instructions,
            parent_id=parent.id if parent is not None else None,
            max_steps=max_steps,
            cwd=cwd,
            ask=ask,
            budget=budget,
        )
        resolved = self.models.resolve(model)
        # A str check first: an unhashable id (a list) is an invalid id, not a TypeError.
        if isinstance(session_id, str) and session_id in self._live:
            raise AgentIdInUseError(_in_use(session_id))
        session = self.store.prepare(session_id)
        # A given id is looked up now, for a clear refusal before anything is built. A fresh
        # one (48 random bits) is not: the store's enter, the authoritative check, refuses
        # it in the unlikely case it is stored, and the creation rolls back as a failure.
        if session_id is not None and await self.store.is_stored(session.id):
            await self.store.abandon(session)
            raise SessionExistsError(
                f"session {session.id!r} is already stored; resume it "
                f"(ctx.agents.resume({session.id!r})), or delete it first"
            )
        config = attrs.evolve(config, model_name=resolved.name, created_at=time.time())
        session.append(config.record())
        handle = await self._host(session, config, resolved, parent, approver, deps)
        return handle if typed is None else await _give_output(handle, typed)

    async def resume(
        self,
        session_id: str,
        model: Maybe[Model | str | None] = UNSET,
        tools: Maybe[ToolNames] = UNSET,
        instructions: Maybe[str | None] = UNSET,
        parent: Maybe[A | None] = UNSET,
        *,
        max_steps: Maybe[int] = UNSET,
        cwd: Maybe[str | os.PathLike[str] | None] = UNSET,
        ask: Maybe[ToolNames] = UNSET,
        approver: Approver | None = None,
        deps: Maybe[object] = UNSET,
        budget: Maybe[Budget | None] = UNSET,
    ) -> AgentHandle[A]:
        """Bring back a stored session as the same agent: its definition, history and inbox.

        Every keyword takes the same values as in :meth:`create`; one that is given replaces
        the stored value, and the changed definition is recorded (the next resume keeps it).
        A child agent is resumed under its parent when that parent is live. ``approver`` and
        ``deps`` are not stored: they are the resumed agent's approver (or none) and
        dependencies (or the runtime's).

        Raises:
            AgentIdInUseError: the agent is live already.
            SessionNotFoundError: nothing is stored under ``session_id``.
            ModelRequiredError: the agent was created with a model object, which its session
                cannot hold, and no ``model`` was given.
            ModelError: the model cannot answer as configured (a missing API key).
        """
        if isinstance(session_id, str) and session_id in self._live:
            raise AgentIdInUseError(_in_use(session_id))
        try:
            session = await self.store.load(session_id)
        except SessionIdInUseError as exc:
            raise self._in_use_error(session_id, exc) from None
        try:
            stored = AgentConfig.of(latest_config(session.records))
            if isinstance(parent, Unset):
                parent = self._live.get(stored.parent_id) if stored.parent_id else None
            config = stored.given(
                model=model,
                tools=tools,
                instructions=instructions,
                parent_id=parent.id if parent is not None else None,
                max_steps=max_steps,
                cwd=cwd,
                ask=ask,
                budget=budget,
            )
            if isinstance(model, Unset) and stored.model_object:
                raise ModelRequiredError(_model_required(session_id, stored.model_name))
            resolved = self.models.resolve(model if not isinstance(model, Unset) else config.model)
            config = attrs.evolve(config, model_name=resolved.name)
            if config != stored:
                session.append(config.record())
            await close_open_children(self.store, session)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self.store.abandon(session)
            raise
        return await self._host(session, config, resolved, parent, approver, deps)

    async def _host(
        self,
        session: Session,
        config: AgentConfig,
        model: Model,
        parent: A | None,
        approver: Approver | None,
        deps: Maybe[object],
    ) -> AgentHandle[A]:
        caller = _caller()
        # A child agent is owned by its parent alone: its fiber is in the parent's scope.
        # Otherwise the calling fiber co-owns the agent, so it must be able to own it: it is
        # checked now (nothing is built for a refusal), and its entry is taken before the
        # commit (nothing is published if it cannot be).
        if parent is not None or caller is None or caller.fiber is self._ctx.fiber:
            caller = None
        request = AgentRequest(
            session=session,
            config=config,
            model=model,
            parent=parent,
            approver=approver,
            context=self._ctx,
            store=self.store,
            tools=self.tools,
            deps=self.deps if isinstance(deps, Unset) else deps,
            agents=self,
            prices=self.models.prices,
        )
        hosted = _Hosted(self, session, lambda: self.factory.build(request))
        co_owner: Entry | None = None
        try:
            hooks = self._ctx.get(HOOKS)
            if parent is not None and hooks is not None and hooks.at(CHILD_START):
                await hook_calls.child_starting(hooks, parent.id, session.id)
            if caller is not None and not caller.fiber.state.is_open:
                raise FiberClosedError(_closed_caller(session.id, caller))
            owner = self._scope_of(parent) if parent is not None else self._ctx
            await owner.plugin(hosted)
            dispose = hosted.disposer()
            # Invariant: no checkpoint from here to the return, so a cancellation of the
            # caller either came before (rolled back below) or finds the agent handed over.
            if caller is not None:
                # The calling fiber co-owns the agent: its unload disposes it. The entry
                # leaves the caller's stack when the agent goes by any other path (_detach).
                try:
                    co_owner = caller.defer(dispose)
                except FiberClosedError:
                    raise FiberClosedError(_closed_caller(session.id, caller)) from None
            agent = hosted.commit()
        except BaseException:
            if co_owner is not None:
                co_owner.discard()
            with trio.CancelScope(shield=True):
                await hosted.roll_back()
            raise
        self._hosted[agent] = hosted
        if hosted.driver is not None:
            hosted.driver.adopted()
        if co_owner is not None:
            self._co_owners[agent] = co_owner
        return AgentHandle(agent, dispose)

    def _on_write_failed(self, event: SessionWriteFailed) -> None:
        """A lost lease stops the session's agent at once and disposes it (LeaseLost)."""
        error = event.error
        if not isinstance(error, SessionLeaseLostError):
            return
        agent = self._live.get(event.session_id)
        hosted = self._hosted.get(agent) if agent is not None else None
        if agent is None or hosted is None or hosted._disposer is None or hosted.driver is None:
            return
        # Invariant: synchronous, in the listener: from the moment the store knows the lease
        # is lost, the agent starts no model call and no tool call.
        hosted.driver.lose(LeaseLost(holder=error.holder))
        self._ctx.start_soon(_dispose_lost, agent.id, hosted._disposer, name=f"lost {agent.id}")

    def _in_use_error(self, session_id: str, error: SessionIdInUseError) -> AgentIdInUseError:
        if session_id in self._live or self.store.get(session_id) is not None:
            return AgentIdInUseError(_in_use(session_id))
        # Held outside this process (another worker of a shared store): the store's message
        # says by whom and until when.
        return AgentIdInUseError(
            f"agent id {session_id!r} cannot be used here: {error}", elsewhere=True
        )

    def _scope_of(self, agent: AgentLike) -> Context:
        hosted = self._hosted.get(agent)
        if hosted is None or hosted.scope is None:
            raise ValueError(f"agent {agent.id} is not live; a parent must be a live agent")
        return hosted.scope

    def scope_of(self, agent: AgentLike) -> AgentScope:
        """The scope of ``agent``: what is added to it is disposed with the agent, after its
        loop stopped (child agents, background jobs, per-agent tools).

        Raises:
            ValueError: ``agent`` is not live.
        """
        return AgentScope(self._scope_of(agent))

    def _attach(self, agent: A) -> None:
        if agent.id in self._live:
            raise AgentIdInUseError(_in_use(agent.id))
        self._live[agent.id] = agent

    def _publish(self, agent: A) -> None:
        self._published.add(agent)
        self._ctx.emit(
            AgentCreated(
                agent_id=agent.id,
                session_id=agent.session.id,
                parent_id=agent.parent.id if agent.parent is not None else None,
            )
        )

    async def _detach(self, hosted: _Hosted[A]) -> None:
        agent, driver = hosted.agent, hosted.driver
        if agent is None:
            return
        hosted.driver = None
        if driver is not None:
            driver.detached()
        self._hosted.pop(agent, None)
        if self._live.get(agent.id) is agent:
            del self._live[agent.id]
        co_owner = self._co_owners.pop(agent, None)
        if co_owner is not None:
            co_owner.discard()
        if agent in self._published:
            hooks = self._ctx.get(HOOKS)
            if hooks is not None and (hooks.at(CHILD_END) or hooks.at(AGENT_DISPOSE)):
                parent = agent.parent.id if agent.parent is not None else None
                await hook_calls.agent_gone(hooks, agent.id, parent)
            self._published.discard(agent)
            self._ctx.emit(AgentDisposed(agent_id=agent.id, session_id=agent.session.id))


#: The key of the ``agents`` service (provided by :class:`AgentLoop`).
AGENTS: Final[ServiceKey[AgentRegistry]] = ServiceKey("agents")


#: Trick: the classes whose instances passed the AgentLike check (a runtime protocol check
#: looks up every member on the instance: tens of microseconds per agent otherwise, the
#: create + dispose row of python -m benchmarks --only agents).
_AGENT_CLASSES: set[type] = set()


def _is_agent_like(agent: object) -> bool:
    cls = type(agent)
    if cls in _AGENT_CLASSES:
        return True
    if isinstance(agent, AgentLike):
        _AGENT_CLASSES.add(cls)
        return True
    return False


async def _dispose_lost(agent_id: str, dispose: Callable[[], Awaitable[None]]) -> None:
    """Dispose an agent whose session lease was lost; its last flush cannot write, as
    expected (the store reported it once already)."""
    try:
        await dispose()
    except* SessionWriteError as group:
        log.info("agent %r was disposed after its session lease was lost (%s)", agent_id, group)


def _refusal(fiber: Fiber) -> str:
    """Why an agent's fiber refuses ``dispose()``.

    Trick: made on refusal only, by one shared function (a string per agent was 168 B of
    every idle one: python -m benchmarks --only memory); its wording is pinned by
    ``tests/agent/test_ownership.py::test_the_fiber_tree_cannot_dispose_an_agent_only_its_handle_can``.
    """
    hosted = fiber.plugin
    assert isinstance(hosted, _Hosted)  # only an agent's fiber is guarded with it
    return (
        f"agent {hosted.session.id!r} is torn down by its handle; call dispose() on the "
        f"AgentHandle that create() or resume() returned"
    )


def _built() -> Any:
    raise RuntimeError("the agent of this fiber is built already")


def _caller() -> Context | None:
    try:
        return current_context()
    except RuntimeError:
        return None


def _closed_caller(agent_id: str, caller: Context) -> str:
    fiber = caller.fiber
    where = (
        f"fiber {fiber.id} is {fiber.state.value}"
        if not fiber.state.is_open
        else f"the section of fiber {fiber.id} it was called from is unwinding"
    )
    return (
        f"agent {agent_id!r} was not created: the calling fiber co-owns the agents it creates, "
        f"and {where}; create it from a fiber that is loading or active"
    )


def _model_required(agent_id: str, name: str | None) -> str:
    what = f"a model object ({name!r})" if name else "a model object"
    return (
        f"agent {agent_id!r} was created with {what}, which its session cannot hold; "
        f"pass a model to resume it: agents.resume({agent_id!r}, model=...) "
        "(model=None runs it on the runtime's default)"
    )


def _in_use(agent_id: str) -> str:
    return f"agent id {agent_id!r} is in use by a live agent; dispose it first, or pick another id"


async def _give_output(handle: AgentHandle[A], output: OutputType[Any]) -> AgentHandle[A]:
    """``handle`` with its new agent's :attr:`~Agent.output` set (``create(output=)``).

    Raises:
        TypeError: the runtime's factory builds agents without typed output; the agent is
            disposed first.
    """
    agent = handle.agent
    if not hasattr(agent, "output"):
        await handle.dispose()
        raise TypeError(
            f"the runtime's agent factory builds {type(agent).__name__} agents, which have no "
            f"typed output; create(output=) needs the default factory's Agent"
        )
    setattr(agent, "output", output.kind)  # noqa: B010 (the protocol has no output)
    return handle
