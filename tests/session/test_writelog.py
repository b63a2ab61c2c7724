"""The sans-IO write log of one session (``trio_agents.session._writelog``): a table of moves,
and a state machine against a model of the lines in order."""

from __future__ import annotations

import re

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trio_agents.session._writelog import WriteLog


def _log(*, written: int = -1, synced: int | None = None, keep: bool = True) -> WriteLog[str]:
    return WriteLog(written, written if synced is None else synced, keep_unsynced=keep)


def _view(log: WriteLog[str]) -> tuple[int, int, list[str], bool, list[str]]:
    return (log.written_seq, log.synced_seq, list(log.pending), log.in_flight, list(log.unsynced))


#: (moves from a fresh log that has "a", "b" pending; what it looks like after them).
#: A move is take, settle, settle-sync, fail, fail-rewound or add:<line>.
TABLE: list[tuple[tuple[str, ...], tuple[int, int, list[str], bool, list[str]]]] = [
    ((), (-1, -1, ["a", "b"], False, [])),
    (("take",), (-1, -1, [], True, [])),
    (("take", "add:c"), (-1, -1, ["c"], True, [])),
    (("take", "settle"), (1, -1, [], False, ["a", "b"])),
    (("take", "settle-sync"), (1, 1, [], False, [])),
    (("take", "settle", "take", "settle-sync"), (1, 1, [], False, [])),
    (("take", "add:c", "fail"), (-1, -1, ["a", "b", "c"], False, [])),
    (("take", "settle", "add:c", "take", "fail"), (1, -1, ["c"], False, ["a", "b"])),
    (("take", "settle", "add:c", "take", "fail-rewound"), (-1, -1, ["a", "b", "c"], False, [])),
    (("take", "settle", "add:c", "add:d", "take", "settle"), (3, -1, [], False, list("abcd"))),
    (("take", "settle", "discard"), (1, -1, [], False, [])),
    (("take", "discard", "settle-sync"), (1, 1, [], False, [])),
]


def _apply(log: WriteLog[str], move: str) -> None:
    if move.startswith("add:"):
        log.add(move[4:])
    elif move == "take":
        log.take()
    elif move == "discard":
        log.discard()
    elif move.startswith("settle"):
        log.settle(synced=move == "settle-sync")
    else:
        log.fail(rewound=move == "fail-rewound")


@pytest.mark.parametrize(("moves", "after"), TABLE, ids=[",".join(m) or "fresh" for m, _ in TABLE])
def test_moves_leave_the_log_as_the_table_says(
    moves: tuple[str, ...], after: tuple[int, int, list[str], bool, list[str]]
) -> None:
    """Each sequence of moves leaves the seqs, pending, in-flight and unsynced lines given."""
    log = _log()
    log.add("a")
    log.add("b")
    for move in moves:
        _apply(log, move)
    assert _view(log) == after


def test_take_returns_the_pending_lines_in_order() -> None:
    """take() hands the pending lines over in the order they were added."""
    log = _log(written=4)
    for line in "xyz":
        log.add(line)
    assert log.take() == ["x", "y", "z"]
    log.settle(synced=True)
    assert (log.written_seq, log.synced_seq) == (7, 7)


@pytest.mark.parametrize(
    ("setup", "move", "message"),
    [
        (("take",), "take", r"^a batch of this session is in flight already; settle it first$"),
        ((), "settle", r"^no batch of this session is in flight; take\(\) one first$"),
        ((), "fail", r"^no batch of this session is in flight; take\(\) one first$"),
        (("take", "settle"), "settle-sync", r"^no batch of this session is in flight"),
    ],
)
def test_an_illegal_move_raises_and_changes_nothing(
    setup: tuple[str, ...], move: str, message: str
) -> None:
    """take with a batch in flight, settle or fail with none: RuntimeError, log unchanged."""
    log = _log()
    log.add("a")
    for step in setup:
        _apply(log, step)
    before = _view(log)
    with pytest.raises(RuntimeError, match=message):
        _apply(log, move)
    assert _view(log) == before


def test_clean_only_when_nothing_is_pending_in_flight_or_unsynced() -> None:
    """clean: nothing pending, nothing in flight, everything written is synced."""
    log = _log(written=2)
    seen = [log.clean]
    log.add("a")
    seen.append(log.clean)
    log.take()
    seen.append(log.clean)
    log.settle(synced=False)
    seen.append(log.clean)
    log.take()
    log.settle(synced=True)
    seen.append(log.clean)
    assert seen == [True, False, False, False, True]


def test_without_keep_unsynced_the_written_lines_are_not_kept() -> None:
    """A log that does not keep unsynced lines counts them only; a rewound fail resends none."""
    log = _log(keep=False)
    log.add("a")
    log.take()
    log.settle(synced=False)
    assert (log.written_seq, log.synced_seq, log.unsynced) == (0, -1, [])


def test_repr_names_the_counts() -> None:
    """The repr says the seqs and how many lines are where."""
    log = _log(written=1, synced=0)
    log.add("a")
    assert re.fullmatch(
        r"<WriteLog written=1 synced=0 pending=1 in_flight=- unsynced=0>", repr(log)
    )


class WriteLogMachine(RuleBasedStateMachine):
    """Random moves against a model: every line added is, in order, written (durable, then
    unsynced), in flight or pending; the seqs count what is written and durable."""

    def __init__(self) -> None:
        super().__init__()
        self.log: WriteLog[int] = WriteLog(-1, keep_unsynced=True)
        self.next = 0
        self.written: list[int] = []  # every line written, in order
        self.durable = 0  # how many of `written` are durable
        self.batch: list[int] | None = None
        self.pending: list[int] = []

    @rule(count=st.integers(1, 3))
    def add(self, count: int) -> None:
        for _ in range(count):
            self.log.add(self.next)
            self.pending.append(self.next)
            self.next += 1

    @precondition(lambda self: self.batch is None)
    @rule()
    def take(self) -> None:
        assert self.log.take() == self.pending
        self.batch, self.pending = self.pending, []

    @precondition(lambda self: self.batch is not None)
    @rule(synced=st.booleans())
    def settle(self, synced: bool) -> None:
        self.log.settle(synced=synced)
        assert self.batch is not None
        self.written += self.batch
        self.batch = None
        if synced:
            self.durable = len(self.written)

    @precondition(lambda self: self.batch is not None)
    @rule(rewound=st.booleans())
    def fail(self, rewound: bool) -> None:
        self.log.fail(rewound=rewound)
        assert self.batch is not None
        back = self.batch
        if rewound:
            back = self.written[self.durable :] + back
            del self.written[self.durable :]
        self.pending[:0] = back
        self.batch = None

    @invariant()
    def matches_the_model(self) -> None:
        log = self.log
        assert log.written_seq == len(self.written) - 1
        assert log.synced_seq == self.durable - 1
        assert log.unsynced == self.written[self.durable :]
        assert log.pending == self.pending
        assert log.in_flight == (self.batch is not None)
        flight = self.batch or []
        assert [*self.written, *flight, *self.pending] == list(range(self.next))
        assert log.clean == (
            not self.pending and self.batch is None and self.durable == len(self.written)
        )


TestWriteLogMachine = WriteLogMachine.TestCase
