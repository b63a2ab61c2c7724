"""What an agent's work (its turns and compactions) uses of the agent: its parts, named.

Rules:
- An :class:`Agent` builds one :class:`AgentParts` and hands it to every turn and compaction
  it runs; they reach the agent through it only, never through the agent's private state.
- The parts are shared, not copied: the session, the inbox and the history a turn changes
  are the agent's own, so what a turn records is what the agent sees at once.
- The agent's state machine (status, the running turn, disposal) is not a part: a turn is
  told what it needs of it (``Turn.abort``, ``Turn.dispose``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, final

import attrs
import trio

from ..model import DEFAULT_PRICES, Model, PriceTable, ToolSpec
from ..session import ModelUsage, Session, SessionStore, SessionWriteError
from ._approval import Approvals
from ._caller import Caller, ToolCalls
from ._compaction import Compactor, SummarizingCompactor
from ._config import ALL_TOOLS
from ._history import History
from ._hooks import NO_HOOKS, HookRegistry
from ._inbox import Inbox
from ._meter import ContextMeter, ContextUsage
from ._output import Outputs
from ._usage import AgentUsage

if TYPE_CHECKING:
    from ..cancel import CauseScope
    from ._budget import Ledger
    from ._caller import ChildAgents, ToolCalls
    from ._like import AgentLike

#: The compaction policy of a runtime that provides none.
_DEFAULT_COMPACTOR = SummarizingCompactor()


@final
@attrs.define(eq=False, repr=False, kw_only=True)
class AgentParts:
    """The session, model, tools, inbox, history, meter and policies of one agent.

    Attributes:
        agent: the agent, as its tools see it (``ctx.agent``); ``None`` once it is disposed.
        approvals: the agent's approval state, which its tool calls go through.
        allowed: the tool names the agent's definition allows, or ``None`` (all of them).
        usage: token usage summed over every model request of the session.
        deps: the application's dependencies the agent was given (its tools' ``ctx.deps``).
        agents: the registry its tools start its children through, or ``None``.
        prices: the price table its requests are costed with.
        budget: its ledger against the budgets on its path to the root, or ``None``: none
            of them has a budget.
    """

    agent: AgentLike | None
    approvals: Approvals
    session: Session
    _store: SessionStore = attrs.field(alias="store")
    model: Model
    tools: ToolCalls
    allowed: frozenset[str] | None
    emit: Callable[[object], None]
    #: Whether an event of a class would reach a listener (build it only then).
    listens: Callable[[type], bool]
    inbox: Inbox
    usage: AgentUsage
    history: History
    max_steps: int
    # Trick: the runtime's compaction service, looked up at each use through a lookup shared
    # by the agents of one context (see DefaultAgentFactory._hooks, which pins it).
    _find_compactor: Callable[[], Compactor | None] | None = attrs.field(alias="find_compactor")
    deps: object = None
    agents: ChildAgents | None = None
    prices: PriceTable = DEFAULT_PRICES
    budget: Ledger | None = None
    #: The runtime's hooks (``ctx.hooks``), or a registry that never has any.
    hooks: HookRegistry = NO_HOOKS
    #: The agent's typed-output settings (``_output``), made when first set.
    outputs: Outputs | None = attrs.field(default=None, init=False)
    meter: ContextMeter = attrs.field(factory=ContextMeter, init=False)
    id: str = attrs.field(init=False)
    # The agent's view of the registry's specs: (the registry's tuple, the subset offered).
    _specs_seen: tuple[tuple[ToolSpec, ...], tuple[ToolSpec, ...]] | None = attrs.field(
        default=None, init=False
    )

    def __attrs_post_init__(self) -> None:
        self.id = self.session.id

    def caller(self, turn_id: str, scope: CauseScope) -> Caller:
        """The record of the agent calling tools in the turn ``turn_id`` (see ``Caller``)."""
        return Caller(
            self.agent, self.id, turn_id, scope, self.approvals, self.deps, self, self.agents
        )

    def compactor(self) -> Compactor:
        """The compaction policy in force now: the runtime's service, else the default."""
        find = self._find_compactor
        found = find() if find is not None else None
        return found if found is not None else _DEFAULT_COMPACTOR

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the tools this agent may call."""
        names = self.allowed
        plain = self.tools.specs(agent=self.id, explicit=False)
        if names is None:
            return plain
        specs = self.tools.specs(agent=self.id, explicit=True)
        seen = self._specs_seen
        # Invariant: the registry returns the same tuples until its tools change, so the
        # identity check is the whole invalidation.
        if seen is None or seen[0] is not specs:
            # "*" names every tool not marked explicit (``tools=["*", "task"]``).
            every = {s.name for s in plain} if ALL_TOOLS in names else set()
            seen = self._specs_seen = (
                specs,
                tuple(s for s in specs if s.name in names or s.name in every),
            )
        return seen[1]

    def may_call(self, name: str) -> bool:
        """Whether the agent's definition allows calling the tool ``name``."""
        names = self.allowed
        return names is None or name in names or ALL_TOOLS in names

    def context(self) -> ContextUsage:
        """The size of the next model request, against the model's window."""
        chars, messages = self.history.update(self.session).size()
        window: int | None = getattr(self.model, "context_window", None)
        return self.meter.usage(chars, messages, self.tool_specs(), window)

    def record_usage(self, record: ModelUsage) -> None:
        """Append a request's ``ModelUsage``, add it to the totals and calibrate the meter."""
        self.session.append(record)
        self.usage = self.usage.plus(record)
        chars, messages = self.history.update(self.session).size()
        self.meter.measured(record, chars, messages, self.tool_specs())
        if self.budget is not None:
            self.budget.spend(record)

    def compacted(self) -> None:
        """A ``Compacted`` record was appended: fold it, and start metering afresh."""
        self.history.update(self.session)
        self.meter.reset()

    def flush_nowait(self) -> bool:
        """Flush at the end of a turn without waiting, when the store has nothing to wait for
        (``MemoryStore``); ``False`` when it has: then :meth:`flush_quietly`."""
        try:
            self._store.flush_nowait(self.session)
        except trio.WouldBlock:
            return False
        return True

    async def flush_quietly(self) -> None:
        """Flush at the end of a turn. A write failure does not stop the agent: the store
        reports it (``SessionWriteFailed``, a log line), keeps the records queued and writes
        them with the next flush; only the final flush of the teardown raises it."""
        with contextlib.suppress(SessionWriteError):
            await self._store.flush(self.session)

    async def flush(self) -> None:
        """Flush the session's records (the final flush of the teardown).

        Raises:
            SessionWriteError: the store could not write them.
        """
        await self._store.flush(self.session)
