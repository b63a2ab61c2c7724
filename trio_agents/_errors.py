"""The one exception base of the package; every layer's errors derive from it."""

from __future__ import annotations


class TrioAgentsError(Exception):
    """Base of every error raised by trio_agents.

    Subclasses are named ``XError`` and also inherit the builtin they conceptually are
    (``AgentIdInUseError(TrioAgentsError, ValueError)``), so callers can catch either.
    """
