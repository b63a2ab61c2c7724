"""What an agent adds to a snapshot of the ownership tree (``ctx.snapshot()``).

Rules:
- The kernel shows the agent's fiber and its stack; these records are that fiber's
  ``details``, given by its plugin (the registry's host of the agent) through the kernel's
  ``Describer`` protocol: status, the running turn and its tool calls in flight, the queued
  messages, the child agents.
- Plain data, read synchronously: frozen attrs records that ``cattrs`` unstructures to JSON.
- An agent of another factory that does not describe itself is shown by what
  :class:`AgentLike` says: its id, status and parent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal, final

import attrs

from ..kernel import Describer
from ._inbox import QueuedMessage
from ._status import AgentStatus

if TYPE_CHECKING:
    from ..model import ToolCallRequested
    from ._like import AgentLike


@final
@attrs.frozen
class ToolCallSnapshot:
    """A tool call the model asked for that has no result yet.

    Attributes:
        call_id: the model's id of the call.
        name: the tool's name.
        running_for: seconds since the tool began, or ``None`` while it has not (it waits
            for approval, or for its turn to reach it).
    """

    call_id: str
    name: str
    running_for: float | None


@final
@attrs.frozen
class TurnSnapshot:
    """The agent's running work: a turn (``t-3``) or a compaction (``compact-1``).

    Attributes:
        id: its id.
        running_for: seconds since it began (``None`` for a compaction).
        tool_calls: its tool calls in flight, in the order the model asked for them.
    """

    id: str
    running_for: float | None
    tool_calls: tuple[ToolCallSnapshot, ...] = ()


@final
@attrs.frozen
class AgentSnapshot:
    """What an agent is doing at the instant of the snapshot.

    Attributes:
        kind: ``"agent"``, so a record unstructured to JSON says what it is.
        id: the agent's id (its session's).
        status: its :class:`AgentStatus`.
        parent_id: the id of the agent that owns it, or ``None``.
        turn: its running work, or ``None``.
        queued: the messages waiting in its inbox, in arrival order.
        children: the ids of its live child agents, oldest first.
    """

    id: str
    status: AgentStatus
    parent_id: str | None = None
    turn: TurnSnapshot | None = None
    queued: tuple[QueuedMessage, ...] = ()
    children: tuple[str, ...] = ()
    kind: Literal["agent"] = "agent"


def turn_snapshot(
    turn_id: str,
    since: float | None,
    now: float,
    asked: Mapping[str, ToolCallRequested] | None,
    started: Mapping[str, float] | None,
) -> TurnSnapshot:
    """A turn's record: the calls ``asked`` and not answered, with when each ``started``."""
    began = started or {}
    calls = tuple(
        ToolCallSnapshot(
            call_id=call_id,
            name=call.name,
            running_for=now - began[call_id] if call_id in began else None,
        )
        for call_id, call in (asked or {}).items()
    )
    return TurnSnapshot(turn_id, now - since if since is not None else None, calls)


def agent_snapshot(
    agent: AgentLike,
    turn: TurnSnapshot | None,
    queued: Iterable[QueuedMessage],
    children: Iterable[AgentLike],
) -> AgentSnapshot:
    """An agent's record from what it says of itself."""
    parent = agent.parent
    return AgentSnapshot(
        id=agent.id,
        status=agent.status,
        parent_id=parent.id if parent is not None else None,
        turn=turn,
        queued=tuple(queued),
        children=tuple(child.id for child in children),
    )


def describe_agent(agent: AgentLike, now: float) -> object | None:
    """The record of ``agent``: its own ``describe(now)``, else what :class:`AgentLike` says."""
    if isinstance(agent, Describer):
        return agent.describe(now)
    return agent_snapshot(agent, None, (), ())
