"""The fiber's end state, sans-IO: every set of requests, in every order, to its end state."""

from __future__ import annotations

import functools
import itertools

import pytest

from trio_agents.kernel import FiberState
from trio_agents.kernel._states import Halt, end_state, halt_with

# Rules (kernel/_states.py): the strongest request that arrived during the application picks
# its end state, whatever their order; none at all (an outer cancellation) ends it disposed.
END: dict[frozenset[Halt], FiberState] = {
    frozenset(): FiberState.DISPOSED,
    frozenset({Halt.RESET}): FiberState.PENDING,
    frozenset({Halt.DISPOSE}): FiberState.DISPOSED,
    frozenset({Halt.FAIL}): FiberState.FAILED,
    frozenset({Halt.RESET, Halt.DISPOSE}): FiberState.DISPOSED,
    frozenset({Halt.RESET, Halt.FAIL}): FiberState.FAILED,
    frozenset({Halt.DISPOSE, Halt.FAIL}): FiberState.FAILED,
    frozenset({Halt.RESET, Halt.DISPOSE, Halt.FAIL}): FiberState.FAILED,
}

CASES = [
    pytest.param(order, end, id="-".join(h.name.lower() for h in order) or "none")
    for requests, end in END.items()
    for order in itertools.permutations(sorted(requests, key=lambda h: h.value))
]


def test_the_table_covers_every_set_of_requests() -> None:
    """The table lists every subset of the requests, so the cases below are all of them."""
    every = {frozenset(c) for n in range(len(Halt) + 1) for c in itertools.combinations(Halt, n)}
    assert set(END) == every
    assert len(CASES) == 16  # 1 + 3 + 3 * 2 + 6 orders


@pytest.mark.parametrize(("order", "end"), CASES)
def test_the_strongest_request_picks_the_end_state_in_any_order(
    order: tuple[Halt, ...], end: FiberState
) -> None:
    """Requests arriving in this order leave the one that picks this end state."""
    pending: Halt | None = functools.reduce(halt_with, order, None)
    assert end_state(pending) is end
