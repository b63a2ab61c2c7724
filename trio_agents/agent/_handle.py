"""``AgentHandle``: the agent plus the capability to tear it down."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from ._agent import Agent

__all__ = ["AgentHandle"]


@attrs.frozen
class AgentHandle:
    """What ``create``/``resume`` return. ``dispose()`` is memoized and returns at quiescence.

    Holding only the :class:`Agent` (as a registry observer does) does not allow disposal.
    """

    agent: Agent
    dispose: Callable[[], Awaitable[None]] = attrs.field(repr=False)
