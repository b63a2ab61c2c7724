"""The fiber state machine, sans-IO: one table of legal transitions.

Rules:
- A fiber starts ``pending``; it is ``loading`` while ``apply`` runs, which needs every service it
  injects to be present.
- ``apply`` returning makes it ``active``; a dispose, a failure or a provider leaving makes it
  ``unloading`` while its exit stack unwinds.
- After unloading it is ``pending`` again (a provider left and it waits for its return),
  ``disposed`` (asked to go) or ``failed`` (``apply`` or a background task raised).
- ``disposed`` and ``failed`` are final. An illegal transition raises and changes nothing.
"""

from __future__ import annotations

import enum
from typing import Final

from .._base import StateTable

__all__ = ["FiberState", "check_transition"]


class FiberState(enum.Enum):
    """Where a fiber is in its life."""

    PENDING = "pending"
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADING = "unloading"
    DISPOSED = "disposed"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        """Whether the fiber can never run again."""
        return self in (FiberState.DISPOSED, FiberState.FAILED)

    @property
    def is_open(self) -> bool:
        """Whether the fiber accepts new entries (effects, tasks, services, children)."""
        return self in (FiberState.LOADING, FiberState.ACTIVE)


_P, _L, _A, _U, _D, _F = (
    FiberState.PENDING,
    FiberState.LOADING,
    FiberState.ACTIVE,
    FiberState.UNLOADING,
    FiberState.DISPOSED,
    FiberState.FAILED,
)

TRANSITIONS: Final[dict[FiberState, frozenset[FiberState]]] = {
    _P: frozenset({_L, _D}),
    _L: frozenset({_A, _U}),
    _A: frozenset({_U}),
    _U: frozenset({_P, _D, _F}),
    _D: frozenset(),
    _F: frozenset(),
}


#: ``check_transition(old, new)``: ``new`` if the move is legal, else raise.
check_transition: Final = StateTable("a fiber", TRANSITIONS).check
