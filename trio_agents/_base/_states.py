"""State tables: one table of legal transitions per state machine, and the one check of a move.

Rules:
- A table maps each state to its legal next states; a final state has none.
- :meth:`StateTable.check` returns the new state when the move is legal, so the caller assigns
  what it returns and an illegal move (which raises :exc:`InvalidTransitionError`) changes
  nothing.
- The message names the thing that moves, the two states and the legal next states.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Generic, TypeVar, final

import attrs

from .._errors import TrioAgentsError

S = TypeVar("S", bound=enum.Enum)


class InvalidTransitionError(TrioAgentsError, RuntimeError):
    """A state machine was asked for a transition its table does not allow."""


@final
@attrs.frozen
class StateTable(Generic[S]):
    """The legal transitions of one state machine, and the one check of a move.

    Args:
        what: the thing that moves, for messages (``"a fiber"``).
        transitions: each state's legal next states (a final state has none).
    """

    _what: str
    _transitions: Mapping[S, frozenset[S]]

    def check(self, old: S, new: S) -> S:
        """Return ``new`` if ``old -> new`` is legal, else raise :exc:`InvalidTransitionError`.

        The caller assigns what this returns, so an illegal move changes nothing.
        """
        legal = self._transitions[old]
        if new not in legal:
            raise InvalidTransitionError(
                f"{self._what} cannot go from {old.value!r} to {new.value!r}; "
                f"legal next states: {sorted(s.value for s in legal) or 'none (final)'}"
            )
        return new
