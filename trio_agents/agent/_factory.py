"""The ``Agent`` seam: who builds the agents behind ``ctx.agents`` (:class:`AgentFactory`).

Rules:
- The registry publishes, looks up and owns; a factory builds. ``build`` returns the agent
  with its :class:`AgentDriver` (:mod:`._driver`): the registry keeps the driver and hands out
  the agent, so whoever holds only the agent (a registry observer, a tool) cannot run or stop
  it. Tearing down is the capability of whoever holds the :class:`AgentHandle`.
- One factory per runtime: the service ``agent_factory`` (``open_runtime(factory=...)``),
  read once by the registry when the agent loop starts; without it the registry builds
  today's :class:`Agent` (:class:`DefaultAgentFactory`).
- ``build`` runs in the creating task, inside the agent fiber's ``apply``, synchronously (the
  registry commits with no checkpoint in between); raising rolls the creation back.
"""

from __future__ import annotations

import abc
import functools
from typing import TYPE_CHECKING, Any, Final, Generic, final

import attrs
from typing_extensions import TypeVar

from ..kernel import Context, ServiceKey
from ..model import DEFAULT_PRICES, PriceTable
from ._agent import Agent, new_agent
from ._compaction import COMPACTION
from ._driver import Built
from ._hooks import HOOKS
from ._like import AgentLike

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..model import Model
    from ..session import Session, SessionStore
    from ._approval import Approver
    from ._caller import ChildAgents
    from ._config import AgentConfig
    from ._tools import ToolRegistry


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
        deps: the application's dependencies the agent's tools see as ``ctx.deps``.
        agents: the registry asking (what the agent's tools start children through).
        prices: the runtime's price table (what each request of the agent costs).
    """

    session: Session
    config: AgentConfig
    model: Model
    parent: A | None
    approver: Approver | None
    context: Context = attrs.field(repr=False)
    store: SessionStore = attrs.field(repr=False)
    tools: ToolRegistry = attrs.field(repr=False)
    deps: object = attrs.field(default=None, repr=False)
    agents: ChildAgents | None = attrs.field(default=None, repr=False)
    prices: PriceTable = attrs.field(default=DEFAULT_PRICES, repr=False)


class AgentFactory(abc.ABC, Generic[A]):
    """Builds the agents behind ``ctx.agents`` (the Service Definition of the service
    ``agent_factory``). The registry calls :meth:`build`; nothing else should."""

    @abc.abstractmethod
    def build(self, request: AgentRequest[A]) -> Built[A]:
        """Build the agent of ``request.session`` and its driver, without starting it
        (synchronous: the registry commits it with no checkpoint in between). Raising rolls
        the creation back."""


_Hooks = tuple[Context, "Callable[[object], None]", "Callable[[type], bool]", "Callable[[], Any]"]


class DefaultAgentFactory(AgentFactory[Agent]):
    """Builds today's :class:`Agent`: an inbox, a model loop that runs turns, child agents.

    Subclass it to wrap those steps (tag the session, log the build, wrap the driver); an
    override of :meth:`build` should call the inherited one, whose driver keeps the parent
    and child links in order.
    """

    #: Trick: the last context's bound ``emit``, ``listens`` and compactor lookup, shared by
    #: the agents it builds (one set per agent was 0.4 KiB of every idle agent: python -m
    #: benchmarks --only memory).
    _hooks: _Hooks | None = None

    def build(self, request: AgentRequest[Agent]) -> Built[Agent]:
        context = request.context
        hooks = self._hooks
        if hooks is None or hooks[0] is not context:
            find = functools.partial(context.get, COMPACTION)
            hooks = self._hooks = (context, context.emit, context.listens, find)
        _, emit, listens, compactor = hooks
        return new_agent(
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
            deps=request.deps,
            agents=request.agents,
            prices=request.prices,
            hooks=context.get(HOOKS),
        )

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
