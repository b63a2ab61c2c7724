"""Errors of the agent layer."""

from __future__ import annotations

import trio

from .._errors import TrioAgentsError

__all__ = ["AgentClosedError", "AgentIdInUseError"]


class AgentIdInUseError(TrioAgentsError, ValueError):
    """A live agent already has this id."""


class AgentClosedError(TrioAgentsError, trio.ClosedResourceError):
    """The agent is being disposed (or is disposed) and takes no more messages."""
