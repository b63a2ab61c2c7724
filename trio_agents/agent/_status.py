"""The agent's status machine, sans-IO.

Rules:
- An agent is ``idle`` (nothing wakeable queued) or ``running`` (a turn, or successive turns
  with no idle moment between them).
- Disposal makes it ``disposing`` from either, then ``disposed``; both are one-way.
- An illegal transition raises and leaves the status unchanged.
"""

from __future__ import annotations

import enum
from typing import Final

from .._base import StateTable


class AgentStatus(enum.Enum):
    """Where an agent is in its life."""

    IDLE = "idle"
    RUNNING = "running"
    DISPOSING = "disposing"
    DISPOSED = "disposed"


_I, _R, _G, _D = AgentStatus.IDLE, AgentStatus.RUNNING, AgentStatus.DISPOSING, AgentStatus.DISPOSED

TRANSITIONS: Final[dict[AgentStatus, frozenset[AgentStatus]]] = {
    _I: frozenset({_R, _G}),
    _R: frozenset({_I, _G}),
    _G: frozenset({_D}),
    _D: frozenset(),
}


#: ``check_status(old, new)``: ``new`` if the move is legal, else raise.
check_status: Final = StateTable("an agent", TRANSITIONS).check
