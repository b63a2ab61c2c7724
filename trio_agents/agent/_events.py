"""Live events of agents (``docs/agents.rst``). Each carries the ids it concerns."""

from __future__ import annotations

import attrs

from ..cancel import CancelCause
from ..session import StopReason
from ._status import AgentStatus


@attrs.frozen
class AgentCreated:
    """An agent was published in the registry."""

    agent_id: str
    session_id: str
    parent_id: str | None = None


@attrs.frozen
class AgentStatusChanged:
    """An agent went from one :class:`AgentStatus` to another (``IDLE``, ``RUNNING`` ...)."""

    agent_id: str
    old: AgentStatus
    new: AgentStatus


@attrs.frozen
class AgentCancelRequested:
    """An effective ``agent.cancel(cause)``; emitted before the inbox is cleared or the turn
    aborted."""

    agent_id: str
    cause: CancelCause


@attrs.frozen
class AgentOutput:
    """A piece of streamed model text, as it arrives (the full text is also recorded)."""

    agent_id: str
    turn_id: str
    text: str


@attrs.frozen
class AgentThought:
    """A piece of the model's reasoning as it streams it (not recorded: it is not part of
    the answer, and a resumed agent does not send it back)."""

    agent_id: str
    turn_id: str
    text: str


@attrs.frozen
class AgentDisposed:
    """An agent left the registry; its id may be used again."""

    agent_id: str
    session_id: str


@attrs.frozen
class TaskStarted:
    """Agent ``agent_id``'s ``task`` tool call ``call_id`` started the child ``child_id``."""

    agent_id: str
    call_id: str | None
    child_id: str
    definition: str
    background: bool = False


@attrs.frozen
class TaskEnded:
    """The child ``child_id`` that agent ``agent_id``'s call ``call_id`` started ended."""

    agent_id: str
    call_id: str | None
    child_id: str
    stop_reason: StopReason
    cause: CancelCause | None = None
