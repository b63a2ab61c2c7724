"""Budgets down the ownership tree: what an agent and its descendants may spend.

Rules:
- A :class:`Budget` is any subset of limits: tokens (``input_tokens``, ``output_tokens``,
  ``tokens`` for both), model ``requests``, ``tool_calls``, ``turns``, wall-clock ``seconds``
  and ``cost`` (US dollars, by the runtime's price table). It is recorded in the agent's
  ``AgentConfigured``, so a resumed agent keeps it.
- What an agent spent is folded from its session's records (``ModelUsage`` for tokens,
  requests and cost; ``TurnStarted`` for turns; ``ToolCallEnded`` that started for tool
  calls; ``ChildEnded`` for what each ended ``task`` child spent), so it survives a resume
  and is the same in any process that takes the session over; while the agent lives, its
  :class:`Ledger` adds each new spending as it happens.
- A child's spending counts against its own budget and every ancestor's: a spending is added
  to the ledger of the agent and of each live ancestor (an ancestor counts what its live
  descendants spend from the moment they are its descendants).
- Amounts (tokens, cost, seconds) are *spent* when they reach their limit; counts (requests,
  tool calls, turns) when one more would go beyond it. Checked before every model request
  (turns at a turn's first one) and before every tool call, and amounts and requests again
  right after each request's usage is recorded: a request that spends the budget stops the
  requests in flight under its owner at once, so the records never exceed a budget by more
  than that one request.
- When a budget on the path from an agent to the root is spent, the topmost agent whose
  budget is spent is cancelled with :class:`BudgetExhausted`; the cause reaches its whole
  subtree as it is (not as ``ParentCancel``), so each stopped turn records whose budget and
  which limit stopped it. Agents outside that subtree go on.
- ``seconds`` counts the wall clock from the agent's creation (``AgentConfigured.created_at``;
  for a session stored without it, from when this process made the agent).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, cast, final

import attrs
import trio

from ..cancel import BudgetExhausted, CancelCause, CauseScope
from ..session import ChildEnded, ModelUsage, Record, ToolCallEnded, TurnStarted
from ._results import ToolResult

#: The names of a budget's limits, in the order they are checked and shown.
LIMITS: Final = (
    "input_tokens",
    "output_tokens",
    "tokens",
    "requests",
    "tool_calls",
    "turns",
    "seconds",
    "cost",
)
_COUNTS: Final = frozenset(
    {"input_tokens", "output_tokens", "tokens", "requests", "tool_calls", "turns"}
)
_AMOUNTS: Final = ("input_tokens", "output_tokens", "tokens", "seconds", "cost")


def _limit(_: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is None:
        return
    name = attribute.name
    if name in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"budget {name} is a whole number >= 0 (or None for no limit); "
                f"got {type(value).__name__} {value!r}"
            )
    elif isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TypeError(
            f"budget {name} is a number >= 0 (or None for no limit); "
            f"got {type(value).__name__} {value!r}"
        )
    if value < 0:
        raise ValueError(f"budget {name} must be >= 0 (or None for no limit); got {value!r}")


@attrs.frozen
class Budget:
    """What an agent and its descendants may spend; every limit is optional.

    Attributes:
        input_tokens: input tokens, over every model request.
        output_tokens: output tokens.
        tokens: input and output tokens together.
        requests: model requests that finished.
        tool_calls: tool calls that started.
        turns: turns started.
        seconds: wall-clock seconds since the agent was created.
        cost: US dollars, by the runtime's price table (a request to a model without a price
            costs nothing here).

    Raises:
        TypeError: a limit is not a number (a count not a whole number).
        ValueError: a limit is negative.
    """

    input_tokens: int | None = attrs.field(default=None, validator=_limit, kw_only=True)
    output_tokens: int | None = attrs.field(default=None, validator=_limit, kw_only=True)
    tokens: int | None = attrs.field(default=None, validator=_limit, kw_only=True)
    requests: int | None = attrs.field(default=None, validator=_limit, kw_only=True)
    tool_calls: int | None = attrs.field(default=None, validator=_limit, kw_only=True)
    turns: int | None = attrs.field(default=None, validator=_limit, kw_only=True)
    seconds: float | None = attrs.field(default=None, validator=_limit, kw_only=True)
    cost: float | None = attrs.field(default=None, validator=_limit, kw_only=True)

    @classmethod
    def of(cls, limits: Mapping[str, float]) -> Budget:
        """The budget of ``limits`` by name (a config table, a session record).

        Raises:
            ValueError: a name is not a limit, or a value is negative.
            TypeError: a value is not a number.
        """
        unknown = sorted(set(limits) - set(LIMITS))
        if unknown:
            raise ValueError(
                f"unknown budget limit {', '.join(map(repr, unknown))}; "
                f"the limits are {', '.join(LIMITS)}"
            )
        values = {
            name: int(value)
            if name in _COUNTS and isinstance(value, float) and value.is_integer()
            else value
            for name, value in limits.items()
        }
        return cls(**cast("dict[str, Any]", values))

    def limits(self) -> dict[str, float]:
        """The limits that are set, by name (what the session records)."""
        return {name: value for name in LIMITS if (value := getattr(self, name)) is not None}

    def __bool__(self) -> bool:
        return bool(self.limits())


@attrs.define
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    tool_calls: int = 0
    turns: int = 0
    cost: float = 0.0

    def add_usage(self, record: ModelUsage) -> None:
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        self.requests += 1
        self.cost += record.cost or 0.0

    def add_child(self, record: ChildEnded) -> None:
        """What a child of a ``task`` call spent, as its parent recorded it at its end."""
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        self.requests += record.requests
        self.cost += record.cost or 0.0
        self.turns += record.turns
        self.tool_calls += record.tool_calls


def _budget_or_none(budget: Budget | None) -> Budget | None:
    return budget if budget else None


def _weak(stop: Callable[[CancelCause], bool]) -> weakref.WeakMethod[Callable[[CancelCause], bool]]:
    return weakref.WeakMethod(stop)


def _now_if_none(started: float | None) -> float:
    return started if started is not None else time.time()


@final
# Converters at init only (no hook on every attribute set, as History).
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class Ledger:
    """What one agent (and its live descendants) spent, against its budget (see the rules).

    Made by the agent when it or an ancestor has a budget; ``None`` otherwise, so an agent
    with no budget on its path costs nothing.
    """

    id: str
    budget: Budget | None = attrs.field(converter=_budget_or_none)
    parent: Ledger | None
    # Weak: the agent holds its ledger, and a disposed agent is freed by its last reference
    # going, not by the cycle collector (tests/agent/test_freed.py).
    _stop: weakref.WeakMethod[Callable[[CancelCause], bool]] = attrs.field(converter=_weak)
    _started: float = attrs.field(converter=_now_if_none)
    # The ledgers of the live children: a stop reaches them when their parent's own cancel
    # cannot (it is being disposed), so no request in flight under a spent budget outlives
    # the stop.
    _children: weakref.WeakSet[Ledger] = attrs.field(factory=weakref.WeakSet, init=False)
    _spent: _Spent = attrs.field(factory=_Spent, init=False)

    def __attrs_post_init__(self) -> None:
        if self.parent is not None:
            self.parent._children.add(self)

    @classmethod
    def open(
        cls,
        agent_id: str,
        budget: Budget | None,
        parent: Ledger | None,
        stop: Callable[[CancelCause], bool],
        *,
        started: float | None,
        records: Sequence[Record],
    ) -> Ledger | None:
        """The ledger of an agent, its spending folded from ``records``; ``None`` when
        neither it nor an ancestor has a budget."""
        if not budget and parent is None:
            return None
        ledger = cls(agent_id, budget, parent, stop, started)
        spent = ledger._spent
        for record in records:
            if isinstance(record, ModelUsage):
                spent.add_usage(record)
            elif isinstance(record, TurnStarted):
                spent.turns += 1
            elif isinstance(record, ToolCallEnded) and record.started:
                spent.tool_calls += 1
            elif isinstance(record, ChildEnded):
                spent.add_child(record)
        return ledger

    def _chain(self) -> Iterator[Ledger]:
        node: Ledger | None = self
        while node is not None:
            yield node
            node = node.parent

    def spent(self, limit: str) -> float:
        """What this agent and its live descendants spent of ``limit`` (a name of
        :data:`LIMITS`)."""
        spent = self._spent
        if limit == "tokens":
            return spent.input_tokens + spent.output_tokens
        if limit == "seconds":
            return max(time.time() - self._started, 0.0)
        value: float = getattr(spent, limit)
        return value

    def _exhausted(self, counts: tuple[str, ...]) -> BudgetExhausted | None:
        budget = self.budget
        if budget is None:
            return None
        for name in LIMITS:
            allowed = getattr(budget, name)
            if allowed is None:
                continue
            if name in _AMOUNTS or name in counts:
                spent = self.spent(name)
                if name == "turns":
                    # Checked at a turn's first request, when the turn is counted on the
                    # whole path already: the turns before it are one fewer.
                    spent -= 1
                if spent >= allowed:
                    return BudgetExhausted(self.id, name, spent, allowed)
        return None

    def _stop_topmost(self, counts: tuple[str, ...]) -> BudgetExhausted | None:
        """Cancel the topmost agent on the path whose budget is spent; its cause."""
        found: BudgetExhausted | None = None
        owner: Ledger | None = None
        for node in self._chain():
            cause = node._exhausted(counts)
            if cause is not None:
                found, owner = cause, node
        if found is not None and owner is not None:
            owner._stop_under(found)
        return found

    def _stop_under(self, cause: BudgetExhausted) -> None:
        """Cancel this agent with ``cause`` (its cancel reaches its children); an agent
        whose cancel did nothing (being disposed, or idle) has its children stopped here."""
        stop = self._stop()
        if stop is not None and stop(cause):
            return
        for child in list(self._children):
            child._stop_under(cause)

    def turn_started(self) -> None:
        """A turn of this agent started: it counts on the whole path."""
        for node in self._chain():
            node._spent.turns += 1

    def check_request(self, *, first: bool) -> BudgetExhausted | None:
        """Before a model request (``first``: the turn's first one, which checks turns):
        ``None`` if every budget on the path has room, else the cause the owner of the spent
        one was cancelled with."""
        return self._stop_topmost(("requests", "turns") if first else ("requests",))

    def admit_tool_call(self) -> BudgetExhausted | None:
        """Before a tool call: ``None`` (and the call counts on the path) if every budget on
        the path has room, else the cause the owner of the spent one was cancelled with."""
        cause = self._stop_topmost(("tool_calls",))
        if cause is None:
            for node in self._chain():
                node._spent.tool_calls += 1
        return cause

    def spend(self, record: ModelUsage) -> BudgetExhausted | None:
        """A request's usage was recorded: it counts on the whole path; an amount that is now
        spent stops its owner at once (cutting the requests in flight under it)."""
        for node in self._chain():
            node._spent.add_usage(record)
        return self._stop_topmost(("requests",))


async def within_budget(ledger: Ledger | None, scope: CauseScope, *, first: bool) -> None:
    """Before a model request of the turn of ``scope``: stop the turn (a checkpoint that
    raises ``Cancelled``) if a budget on its path is spent."""
    if ledger is None:
        return
    cause = ledger.check_request(first=first)
    if cause is not None:
        # The owner's cancel reached this turn already, unless the agent is not its child
        # yet (a creation in progress): the first cause wins either way.
        scope.cancel(cause)
        await trio.lowlevel.checkpoint()


def tool_refusal(ledger: Ledger | None, scope: CauseScope) -> ToolResult | None:
    """Before a tool call of the turn of ``scope``: ``None`` if it may run, else the result
    that records it not started (the turn is cancelled, so the model never sees it)."""
    if ledger is None:
        return None
    cause = ledger.admit_tool_call()
    if cause is None:
        return None
    scope.cancel(cause)
    return ToolResult(content=f"refused: the {cause.describe()}", is_error=True, started=False)
