"""The ``Agent`` seam: what ``ctx.agents`` holds (:class:`AgentLike`) and who builds it
(:class:`AgentFactory`).

Rules:
- The registry publishes, looks up and owns; a factory builds and drives. The registry never
  reaches into the agent beyond :class:`AgentLike`: every other step of an agent's life (its
  loop, its graceful stop, what it does when it is adopted by a parent or detached) is a
  method of the factory that built it.
- The lifecycle is on the factory, not on the agent, on purpose: whoever holds only the agent
  (a registry observer) must not be able to run or stop it. Tearing down is the capability of
  whoever holds the :class:`AgentHandle`.
- One factory per runtime: the service ``agent_factory`` (``open_runtime(factory=...)``),
  read once by the registry when the agent loop starts; without it the registry builds
  today's :class:`Agent` (:class:`DefaultAgentFactory`).
- The order in one agent's fiber: ``build`` (in the creating task, inside the fiber's
  ``apply``; raising rolls the creation back) → ``adopted`` (after the commit, no checkpoint
  in between) → ``run`` (a background task of the fiber) … teardown: ``stop`` (awaits
  ``run``'s exit and the agent's flushes) → the agent's scope unwinds → ``detached`` (the
  agent left the registry, just before ``AgentDisposed``).
"""

from __future__ import annotations

import abc
import functools
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, final, runtime_checkable

import attrs
from typing_extensions import TypeVar

from ..kernel import Context, ServiceKey
from ._agent import Agent
from ._keys import COMPACTION

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from ..cancel import CancelCause
    from ..model import Model
    from ..session import Session, SessionStore
    from ._approval import Approver
    from ._config import AgentConfig
    from ._inbox import MessageId
    from ._status import AgentStatus
    from ._tools import ToolRegistry

__all__ = [
    "AGENT_FACTORY",
    "AgentFactory",
    "AgentLike",
    "AgentRequest",
    "DefaultAgentFactory",
    "FactoryPlugin",
]


@runtime_checkable
class AgentLike(Protocol):
    """The interface of an agent as the registry, the ACP bridge, the shell tools and the
    command use it. :class:`Agent` is one; an agent of another :class:`AgentFactory` (another
    loop, a process, a remote agent) is another."""

    @property
    def id(self) -> str:
        """The agent's id, which is its session's id."""

    @property
    def session(self) -> Session:
        """The agent's session (entered by the registry before the agent was built)."""

    @property
    def parent(self) -> AgentLike | None:
        """The agent that owns this one, or ``None``."""

    @property
    def status(self) -> AgentStatus:
        """The current :class:`AgentStatus`."""

    def prompt(self, content: str) -> MessageId:
        """Queue ``content`` as the input of a turn of its own; never blocks."""

    def steer(self, content: str) -> MessageId:
        """Queue ``content`` for the next step of the running turn."""

    def inject(self, content: str) -> MessageId:
        """Queue ``content`` for the next step, without waking an idle agent."""

    def cancel(self, cause: CancelCause | None = None, *, keep_inbox: bool = False) -> bool:
        """The single public stop: whether it cleared or aborted anything."""

    async def when_idle(self) -> None:
        """Return when the agent is idle with nothing wakeable queued, or closed."""


A = TypeVar("A", bound=AgentLike, default=Agent)


@final
@attrs.frozen
class AgentRequest(Generic[A]):
    """Everything the registry hands a factory to build one agent.

    Attributes:
        session: the agent's session, entered (live) but not announced yet; its latest
            ``AgentConfigured`` record is ``config``.
        config: the agent's definition.
        model: the resolved model (the runtime's default when none was asked for).
        parent: the live agent that will own the new one, or ``None``.
        approver: who is asked before a call that needs approval runs, or ``None``.
        context: the context of the agent loop (the registry's fiber): ``emit`` and services.
        store: the session store (its ``flush`` is the durability checkpoint).
        tools: the tools registry.
    """

    session: Session
    config: AgentConfig
    model: Model
    parent: A | None
    approver: Approver | None
    context: Context = attrs.field(repr=False)
    store: SessionStore = attrs.field(repr=False)
    tools: ToolRegistry = attrs.field(repr=False)


class AgentFactory(abc.ABC, Generic[A]):
    """Builds and drives the agents behind ``ctx.agents`` (the Service Definition of the
    service ``agent_factory``). The registry calls these methods; nothing else should."""

    @abc.abstractmethod
    def build(self, request: AgentRequest[A]) -> A:
        """Build the agent of ``request.session``, without starting it (synchronous: the
        registry commits it with no checkpoint in between). Raising rolls the creation back."""

    @abc.abstractmethod
    async def run(self, agent: A) -> None:
        """The agent's work, from its publication until teardown: a background task of the
        agent's fiber, cancelled (with ``DisposedCancel``) after :meth:`stop` returned."""

    @abc.abstractmethod
    async def stop(self, agent: A) -> None:
        """The first step of teardown: make :meth:`run` exit and await that exit and the
        agent's last flush (quiescence, not a status flip)."""

    def adopted(self, agent: A) -> None:
        """``agent`` is committed; if it has a parent, that parent now owns it."""

    def detached(self, agent: A) -> None:
        """``agent`` left the registry; ``AgentDisposed`` follows."""

    def lost(self, agent: A, cause: CancelCause) -> None:
        """``agent``'s session can no longer be written here (``cause`` says why, e.g.
        :class:`~trio_agents.cancel.LeaseLost`): stop it at once, synchronously, so that no
        model or tool call starts from now on; its teardown follows. By default a cancel."""
        agent.cancel(cause)


_Hooks = tuple[Context, "Callable[[object], None]", "Callable[[type], bool]", "Callable[[], Any]"]


class DefaultAgentFactory(AgentFactory[Agent]):
    """Builds today's :class:`Agent`: an inbox, a model loop that runs turns, child agents.

    Subclass it to wrap those steps (log them, tag the session); a method you override
    should call the inherited one, which keeps the parent and child links in order.
    """

    #: The last context's bound ``emit``, ``listens`` and compactor lookup, shared by the
    #: agents it builds (one set per agent was 0.4 KiB of every idle agent).
    _hooks: _Hooks | None = None

    def build(self, request: AgentRequest[Agent]) -> Agent:
        context = request.context
        hooks = self._hooks
        if hooks is None or hooks[0] is not context:
            find = functools.partial(context.get, COMPACTION)
            hooks = self._hooks = (context, context.emit, context.listens, find)
        _, emit, listens, compactor = hooks
        return Agent(
            session=request.session,
            store=request.store,
            tools=request.tools,
            model=request.model,
            emit=emit,
            listens=listens,
            config=request.config,
            parent=request.parent,
            compactor=compactor,
            approver=request.approver,
        )

    def run(self, agent: Agent) -> Coroutine[Any, Any, None]:
        # The loop itself, not a coroutine that awaits it: an idle agent's task holds one
        # frame less. An override may be ``async def`` and await ``super().run(agent)``.
        return agent._loop()

    async def stop(self, agent: Agent) -> None:
        await agent._shutdown()

    def adopted(self, agent: Agent) -> None:
        if agent.parent is not None:
            agent.parent._children[agent.id] = agent

    def detached(self, agent: Agent) -> None:
        agent._finish()
        if agent.parent is not None:
            agent.parent._children.pop(agent.id, None)

    def lost(self, agent: Agent, cause: CancelCause) -> None:
        agent._lose(cause)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


#: The key of the runtime's agent factory (provided by ``open_runtime(factory=...)``).
AGENT_FACTORY: Final[ServiceKey[AgentFactory[Any]]] = ServiceKey("agent_factory")


@final
class FactoryPlugin:
    """Provides the service ``agent_factory``; applied by ``open_runtime`` before the loop."""

    name = "agent-factory"

    def __init__(self, factory: AgentFactory[Any]) -> None:
        self.factory = factory

    async def apply(self, ctx: Context, config: None) -> None:
        ctx.provide(AGENT_FACTORY, self.factory)
