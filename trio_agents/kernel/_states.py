"""The fiber state machine, sans-IO: one table of legal transitions.

Rules:
- A fiber starts ``pending``; it is ``loading`` while ``apply`` runs, which needs every service it
  injects to be present.
- ``apply`` returning makes it ``active``; a dispose, a failure or a provider leaving makes it
  ``unloading`` while its exit stack unwinds.
- After unloading it is ``pending`` again (a provider left and it waits for its return),
  ``disposed`` (asked to go) or ``failed`` (``apply`` or a background task raised).
- ``disposed`` and ``failed`` are final. An illegal transition raises and changes nothing.
- What ends an application is the fiber's one pending :class:`Halt`: a stronger request
  replaces a weaker one (a failure over a dispose over a reset, see :func:`halt_with`), and the
  request that stands when the stack has unwound picks the end state (:func:`end_state`). An
  application ended with no request (an outer cancellation cut it short) ends ``disposed``:
  it is never applied again.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from .._base import StateTable


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


class Halt(enum.Enum):
    """Why a fiber's application must end: the fiber's one pending request, weakest first."""

    #: A service the fiber injects is leaving: unwind, then wait ``pending`` for its return.
    RESET = 1
    #: ``dispose()`` was called: unwind, then ``disposed``.
    DISPOSE = 2
    #: ``apply`` or a background task raised: unwind, then ``failed``.
    FAIL = 3


def halt_with(pending: Halt | None, new: Halt) -> Halt:
    """The request that stands once ``new`` arrives on top of ``pending``: the stronger one."""
    return new if pending is None or new.value > pending.value else pending


END_STATES: Final[Mapping[Halt | None, FiberState]] = {
    None: _D,
    Halt.RESET: _P,
    Halt.DISPOSE: _D,
    Halt.FAIL: _F,
}


def end_state(halt: Halt | None) -> FiberState:
    """The state an application ends in, once its stack unwound, by the request that stood."""
    return END_STATES[halt]
