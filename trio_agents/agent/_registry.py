"""The ``agents`` service: create, resume, look up; each agent hosted in a fiber of its own.

Rules (teardown order, which falls out of the agent fiber's LIFO stack):
- set-up: enter the session (its exit flushes and detaches it, ``SessionDisposed``) → attach to
  the registry (its exit detaches, ``AgentDisposed``) → open the agent's scope, a child fiber
  for child agents, background jobs and per-agent tools → start the loop → register the
  graceful stop.
- teardown, the reverse: stop the loop and await ``agent.done`` and its flush → unwind the
  scope → detach from the registry → flush and detach the session.
- Co-owners: the agent fiber is a child of the ``AgentLoop`` fiber (the factory); the calling
  fiber holds an entry that disposes it. Every path joins the fiber's memoized teardown, and
  the path that did not run removes its entry.
- Live ids are unique. ``SessionStore.enter`` is the authoritative check: of two concurrent
  creations with one id, the loser fails inside its fiber's apply, which unwinds everything it
  entered (no ``AgentCreated`` was emitted for it).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING, final

from ..kernel import Context, Entry, Fiber, current_context
from ..model import Model
from ..session import Session, SessionExistsError, SessionIdInUseError, SessionStore
from ._agent import Agent
from ._errors import AgentIdInUseError
from ._events import AgentCreated, AgentDisposed
from ._handle import AgentHandle

if TYPE_CHECKING:
    from ._models import ModelCatalog
    from ._tools import ToolRegistry

__all__ = ["AgentRegistry"]


@final
class _Scope:
    """The agent's scope fiber: what the agent owns beyond its loop lands here."""

    name = "agent-scope"

    def __init__(self) -> None:
        self.ctx: Context | None = None

    async def apply(self, ctx: Context, config: None) -> None:
        self.ctx = ctx


@final
class _Hosted:
    """The plugin of one agent's fiber."""

    def __init__(
        self,
        registry: AgentRegistry,
        session: Session,
        make: Callable[[], Agent],
    ) -> None:
        self.name = f"agent:{session.id}"
        self.registry = registry
        self.session = session
        self.make = make
        self.agent: Agent | None = None
        self.scope: _Scope | None = None
        self.entered = False

    async def apply(self, ctx: Context, config: None) -> None:
        registry, store, session = self.registry, self.registry.store, self.session
        try:
            store.enter(session)
        except SessionIdInUseError:
            raise AgentIdInUseError(_in_use(session.id)) from None
        self.entered = True
        ctx.defer(store.detach, session)
        store.announce(session)
        agent = self.make()
        self.agent = agent
        registry._attach(agent)
        ctx.defer(registry._detach, agent)
        self.scope = _Scope()
        await ctx.plugin(self.scope)
        ctx.start_soon(agent._loop, name=f"agent {agent.id} loop")
        ctx.defer(agent._shutdown)


@final
class AgentRegistry:
    """The service ``agents`` (provided by the ``AgentLoop`` plugin)."""

    def __init__(
        self, ctx: Context, store: SessionStore, tools: ToolRegistry, models: ModelCatalog
    ) -> None:
        self._ctx = ctx
        self.store = store
        self.tools = tools
        self.models = models
        self._live: dict[str, Agent] = {}
        self._fibers: dict[Agent, Fiber] = {}
        self._co_owners: dict[Agent, Entry] = {}

    def get(self, agent_id: str) -> Agent | None:
        """The live agent with this id, or ``None``."""
        return self._live.get(agent_id)

    def list(self) -> tuple[Agent, ...]:
        """Every live agent, oldest first."""
        return tuple(self._live.values())

    async def create(
        self,
        model: Model | str | None = None,
        session_id: str | None = None,
        tools: frozenset[str] | set[str] | builtins.list[str] | None = None,
        instructions: str | None = None,
        parent: Agent | None = None,
        *,
        max_steps: int = 50,
    ) -> AgentHandle:
        """Create an agent on a new session.

        Args:
            model: a :class:`Model`, a model spec such as ``"echo?delay=1"``, or ``None`` for
                the runtime's default.
            session_id: the id (of agent and session); generated when ``None``.
            tools: the names of the tools the agent may call; ``None`` means all.
            instructions: the system prompt.
            parent: make a child agent owned by ``parent`` (``ParentCancel`` reaches it).
            max_steps: the most model requests one turn may make.

        Raises:
            AgentIdInUseError: a live agent already has ``session_id``.
            SessionExistsError: a stored session has ``session_id`` (resume it instead).
        """
        if session_id is not None and session_id in self._live:
            raise AgentIdInUseError(_in_use(session_id))
        session = self.store.prepare(session_id)
        if self.store.is_stored(session.id):
            await self.store.abandon(session)
            raise SessionExistsError(
                f"session {session.id!r} is already stored; resume it "
                f"(ctx.agents.resume({session.id!r})), or delete it first"
            )
        return await self._host(session, True, model, tools, instructions, parent, max_steps)

    async def resume(self, session_id: str, model: Model | str | None = None) -> AgentHandle:
        """Bring back a stored session as a live agent, with its history and pending inbox.

        Raises:
            AgentIdInUseError: the agent is live already.
            SessionNotFoundError: nothing is stored under ``session_id``.
        """
        if session_id in self._live:
            raise AgentIdInUseError(_in_use(session_id))
        try:
            session = await self.store.load(session_id)
        except SessionIdInUseError:
            raise AgentIdInUseError(_in_use(session_id)) from None
        return await self._host(session, False, model, None, None, None, 50)

    async def _host(
        self,
        session: Session,
        new: bool,
        model: Model | str | None,
        tools: frozenset[str] | set[str] | builtins.list[str] | None,
        instructions: str | None,
        parent: Agent | None,
        max_steps: int,
    ) -> AgentHandle:
        caller = _caller()
        resolved = self.models.resolve(model)
        tool_names = frozenset(tools) if tools is not None else None

        def make() -> Agent:
            return Agent(
                session=session,
                store=self.store,
                tools=self.tools,
                model=resolved,
                emit=self._ctx.emit,
                instructions=instructions,
                tool_names=tool_names,
                parent=parent,
                max_steps=max_steps,
            )

        hosted = _Hosted(self, session, make)
        owner = self._scope_of(parent) if parent is not None else self._ctx
        try:
            fiber = await owner.plugin(hosted)
        except BaseException:
            if new and hosted.entered:
                await self.store.abandon(session)
            raise
        agent = hosted.agent
        assert agent is not None
        self._fibers[agent] = fiber
        if parent is not None:
            parent._children[agent.id] = agent
        elif caller is not None and caller.fiber is not self._ctx.fiber:
            # The calling fiber co-owns the agent: its unload disposes it. The entry leaves
            # the caller's stack when the agent goes by any other path (see _detach).
            self._co_owners[agent] = caller.defer(fiber.dispose)
        return AgentHandle(agent, fiber.dispose)

    def _scope_of(self, agent: Agent) -> Context:
        fiber = self._fibers.get(agent)
        hosted = fiber.plugin if fiber is not None else None
        if not isinstance(hosted, _Hosted) or hosted.scope is None or hosted.scope.ctx is None:
            raise ValueError(f"agent {agent.id} is not live; a parent must be a live agent")
        return hosted.scope.ctx

    def scope_of(self, agent: Agent) -> Context:
        """The context of ``agent``'s scope: what is added to it is disposed with the agent,
        after its loop stopped (child agents, background jobs, per-agent tools)."""
        return self._scope_of(agent)

    def _attach(self, agent: Agent) -> None:
        if agent.id in self._live:
            raise AgentIdInUseError(_in_use(agent.id))
        self._live[agent.id] = agent
        self._ctx.emit(
            AgentCreated(
                agent_id=agent.id,
                session_id=agent.session.id,
                parent_id=agent.parent.id if agent.parent is not None else None,
            )
        )

    async def _detach(self, agent: Agent) -> None:
        agent._finish()
        if self._live.get(agent.id) is agent:
            del self._live[agent.id]
        self._fibers.pop(agent, None)
        co_owner = self._co_owners.pop(agent, None)
        if co_owner is not None:
            co_owner.discard()
        if agent.parent is not None:
            agent.parent._children.pop(agent.id, None)
        self._ctx.emit(AgentDisposed(agent_id=agent.id, session_id=agent.session.id))


def _caller() -> Context | None:
    try:
        return current_context()
    except RuntimeError:
        return None


def _in_use(agent_id: str) -> str:
    return f"agent id {agent_id!r} is in use by a live agent; dispose it first, or pick another id"
