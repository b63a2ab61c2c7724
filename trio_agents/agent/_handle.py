"""``AgentHandle``: the agent plus the capability to tear it down."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic

import attrs
from typing_extensions import TypeVar

from ._agent import Agent

if TYPE_CHECKING:
    from ._like import AgentLike

A = TypeVar("A", bound="AgentLike", default=Agent, covariant=True)


@attrs.frozen
class AgentHandle(Generic[A]):
    """What ``create``/``resume`` return. ``dispose()`` is memoized and returns at quiescence.

    Holding only the agent (as a registry observer does) does not allow disposal. ``A`` is
    the type of agent the runtime's factory builds: :class:`Agent` by default.
    """

    agent: A
    dispose: Callable[[], Awaitable[None]] = attrs.field(repr=False)
