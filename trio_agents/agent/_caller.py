"""``Caller``: who calls a tool, as the turn hands it to ``ToolRegistry.invoke``.

Rules:
- A frozen record of fields: the registry and the tool's :class:`ToolContext` read them and
  never reach into an agent. What approval needs (the agent's :class:`Approvals`) and what a
  ``cancel`` answer stops (the agent's one public stop, the turn's scope) are in it.
- A turn makes one at its first tool call (most turns call none) and hands the same record to
  every call of the turn.
- What a tool reaches through its ``ToolContext`` beyond the call itself is in it too: the
  application's ``deps`` (a live object, given to ``open_runtime`` or per agent, stored
  nowhere), where the agent's usage is read (``meter``: the agent's parts, read at each use,
  so a record made at a turn's first call still reports the usage after its later requests),
  and the ``agents`` registry a child is started through. Adding them costs the turn nothing:
  the one record per turn has more fields, not more objects.
- A call made outside a turn (a test, a script, ``invoke(name, args, agent)``) gets the record
  of the agent's own :meth:`caller`, or a bare one naming the agent: such a caller has no
  approvals, so a tool that needs approval is refused.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol, final, runtime_checkable

import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ..cancel import CauseScope
    from ..model import Model, ToolSpec
    from ._approval import Approvals, Approver
    from ._budget import Budget
    from ._config import Maybe, ToolNames
    from ._like import AgentLike
    from ._results import ToolResult
    from ._usage import AgentUsage


@final
@attrs.frozen
class Caller:
    """The calling agent of a tool call, as fields.

    Attributes:
        agent: the calling agent (the tool sees it as ``ctx.agent``), or ``None``.
        agent_id: its id (the tools it sees are those of every agent and its own).
        turn_id: the turn the call belongs to, or ``None`` outside a turn.
        scope: the turn's cancel scope, or ``None``; cancelling it stops the whole turn.
        approvals: the agent's approval state (who is asked, the standing answers), or
            ``None``: a call that needs approval is refused.
        deps: the application's dependencies the agent was given (``ctx.deps``), or
            ``None``.
        meter: where the agent's token usage is read (``ctx.usage``), or ``None``.
        agents: the registry a child of the agent is started through
            (``ctx.start_child``), or ``None``.
    """

    agent: AgentLike | None = None
    agent_id: str | None = None
    turn_id: str | None = None
    scope: CauseScope | None = attrs.field(default=None, repr=False)
    approvals: Approvals | None = attrs.field(default=None, repr=False)
    deps: object = attrs.field(default=None, repr=False)
    meter: HasUsage | None = attrs.field(default=None, repr=False)
    agents: ChildAgents | None = attrs.field(default=None, repr=False)

    @classmethod
    def of(cls, agent: AgentLike | Caller | None) -> Caller:
        """The record of ``agent`` calling outside a turn: its own :meth:`HasCaller.caller`
        if it has one, else a record that only names it."""
        if isinstance(agent, Caller):
            return agent
        if agent is None:
            return _NOBODY
        if isinstance(agent, HasCaller):
            return agent.caller()
        return cls(agent=agent, agent_id=agent.id)


_NOBODY = Caller()


@runtime_checkable
class HasCaller(Protocol):
    """An agent that can say how it calls a tool outside a turn (:class:`Agent` can)."""

    def caller(self) -> Caller:
        """The record of this agent calling a tool outside any turn."""


class HasUsage(Protocol):
    """What holds an agent's running usage totals (its ``AgentParts``, the agent itself)."""

    @property
    def usage(self) -> AgentUsage:
        """Token usage summed over every model request of the agent's session."""


class ChildAgents(Protocol):
    """What starts a child of an agent: the ``agents`` registry's ``create``, as
    ``ToolContext.start_child`` calls it."""

    async def create(
        self,
        model: Model | str | None = ...,
        session_id: str | None = ...,
        tools: ToolNames = ...,
        instructions: str | None = ...,
        # Any: the registry's agent type is its factory's (``AgentRegistry[A]``).
        parent: Any = ...,
        *,
        max_steps: int = ...,
        cwd: str | os.PathLike[str] | None = ...,
        ask: ToolNames = ...,
        approver: Approver | None = ...,
        deps: Maybe[object] = ...,
        budget: Budget | None = ...,
    ) -> object:
        """Create an agent owned by ``parent``; returns its ``AgentHandle``."""


class ToolCalls(Protocol):
    """What an agent's turns use of the tools registry (``ToolRegistry`` is one): the specs
    the model is told about, and calls made as a :class:`Caller`."""

    def specs(self, *, agent: str | None = None, explicit: bool = False) -> tuple[ToolSpec, ...]:
        """What the model is told about every tool the agent ``agent`` sees (``explicit``:
        with the tools only agents that name them see)."""

    async def invoke(
        self,
        name: str,
        arguments: Mapping[str, object],
        caller: Caller | AgentLike | None = None,
        *,
        call_id: str | None = None,
        scope: CauseScope | None = None,
        on_start: Callable[[], object] | None = None,
    ) -> ToolResult:
        """Call the tool ``name`` with the model's ``arguments``; never raises for what the
        model or the tool did wrong."""
