"""Records and the Session: seq stamping, snapshots, the record registry."""

from __future__ import annotations

import re

import attrs
import pytest

import trio_agents.session as sessions
from trio_agents.session import (
    AssistantMessage,
    InvalidSessionIdError,
    Record,
    Session,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
    register_record,
)


def test_append_stamps_contiguous_seq() -> None:
    """Each appended record gets seq equal to its index, whatever seq it came with."""
    session = Session("s-1")
    got = [session.append(TurnStarted(turn_id="t", seq=99)) for _ in range(5)]
    assert [r.seq for r in got] == [0, 1, 2, 3, 4]
    assert [r.seq for r in session.records] == [0, 1, 2, 3, 4]


def test_append_returns_the_stamped_record_of_the_same_type() -> None:
    """append() returns an equal record (but for seq) of the same class."""
    session = Session("s-1")
    record = AssistantMessage(turn_id="t", content="hi")
    stamped = session.append(record)
    assert type(stamped) is AssistantMessage
    assert attrs.evolve(stamped, seq=-1) == record
    assert record.seq == -1


def test_append_stamps_like_evolve_private_fields_validators_and_no_init_fields() -> None:
    """Stamping is evolve's call: a private field goes by its alias, validators and
    __attrs_post_init__ run again, and a field __init__ does not take is rebuilt, not copied."""
    calls: list[int] = []

    @attrs.frozen(kw_only=True)
    class Odd(Record):
        _hidden: str = attrs.field(validator=attrs.validators.instance_of(str))
        derived: str = attrs.field(init=False, default="")

        def __attrs_post_init__(self) -> None:
            calls.append(self.seq)
            object.__setattr__(self, "derived", f"{self._hidden}@{self.seq}")

    session = Session("s-1")
    session.append(Odd(hidden="a"))
    stamped = session.append(Odd(hidden="b"))
    assert stamped == attrs.evolve(Odd(hidden="b"), seq=1)
    assert stamped.derived == "b@1"
    # The stamped record's __init__, then the two of the evolve in the comparison.
    assert calls[-3:] == [1, -1, 1]


def test_records_snapshot_is_immutable_and_not_affected_by_later_appends() -> None:
    """A records snapshot is a tuple that later appends do not change."""
    session = Session("s-1")
    session.append(TurnStarted(turn_id="a"))
    before = session.records
    assert isinstance(before, tuple)
    assert session.records is before  # cached until the next append
    session.append(TurnStarted(turn_id="b"))
    assert len(before) == 1
    assert len(session.records) == 2


def test_records_are_frozen() -> None:
    """Records cannot be mutated in place."""
    record = UserMessage(message_id="m", content="x", turn_id="t")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.content = "y"  # type: ignore[misc]


def test_append_refuses_non_records() -> None:
    """Appending something that is not a Record is a TypeError that names the fix."""
    session = Session("s-1")
    with pytest.raises(TypeError, match=r"^session\.append\(\) takes a Record"):
        session.append("hello")  # type: ignore[type-var]
    assert session.records == ()


def test_session_statistics_of_a_standalone_session() -> None:
    """A session outside any store is not live and has nothing flushed."""
    session = Session("s-1", [TurnStarted(turn_id="t")])
    stats = session.statistics()
    assert (stats.records, stats.flushed_seq, stats.live) == (1, -1, False)


@pytest.mark.parametrize("bad", ["", ".hidden", "a/b", "a b", "x" * 129, "é"])
def test_invalid_session_ids_are_refused(bad: str) -> None:
    """Ids must be filename-safe; the error says which characters are allowed."""
    with pytest.raises(InvalidSessionIdError, match=r"^invalid session id .* use 1-128"):
        Session(bad)


def test_invalid_session_id_error_is_a_value_error() -> None:
    """InvalidSessionIdError can be caught as ValueError."""
    with pytest.raises(ValueError, match="invalid session id"):
        Session("../etc")


def test_stop_reason_values() -> None:
    """StopReason is a str enum with exactly the documented values."""
    assert [r.value for r in StopReason] == [
        "completed",
        "cancelled",
        "error",
        "max_steps",
        "blocked",
        "interrupted",
    ]
    assert isinstance(StopReason.COMPLETED, str)
    assert StopReason("max_steps") is StopReason.MAX_STEPS
    assert TurnEnded(turn_id="t", stop_reason=StopReason.ERROR).cause is None


def test_register_record_extends_the_union() -> None:
    """A registered record class round-trips through dump/load under its tag."""

    @register_record
    @attrs.frozen(kw_only=True)
    class NoteAdded(Record):
        text: str

    line = sessions.dump_record(NoteAdded(text="n", seq=3))
    assert '"type":"note_added"' in line
    assert sessions.load_record(line) == NoteAdded(text="n", seq=3)


def test_register_record_refuses_a_taken_tag() -> None:
    """Two classes cannot share one tag."""

    @attrs.frozen(kw_only=True)
    class Other(Record):
        pass

    with pytest.raises(ValueError, match=r"^record tag 'turn_ended' is already used by TurnEnded"):
        register_record(Other, "turn_ended")


def test_register_record_refuses_non_records() -> None:
    """Only attrs subclasses of Record can be registered."""
    with pytest.raises(TypeError, match=re.escape("register_record() takes an attrs subclass")):
        register_record(int)  # type: ignore[type-var]


def test_public_names_are_exported_once_and_sorted() -> None:
    """__all__ is sorted (constants first, as ruff keeps it), unique, and every name exists."""
    constants = [n for n in sessions.__all__ if n.isupper()]
    rest = [n for n in sessions.__all__ if not n.isupper()]
    assert sessions.__all__ == sorted(set(constants)) + sorted(set(rest))
    for name in sessions.__all__:
        assert hasattr(sessions, name)


def test_register_record_refuses_a_malformed_tag() -> None:
    """A tag is a snake_case identifier."""

    @attrs.frozen(kw_only=True)
    class Odd(Record):
        pass

    with pytest.raises(ValueError, match=r"^record tags are snake_case identifiers .*'Odd-1'$"):
        register_record(Odd, "Odd-1")


def test_register_record_is_idempotent_but_a_class_has_one_tag() -> None:
    """The same class under the same tag again is a no-op; under another tag, an error."""

    @attrs.frozen(kw_only=True)
    class Twice(Record):
        pass

    assert register_record(Twice, "twice_registered") is Twice
    assert register_record(Twice, "twice_registered") is Twice
    with pytest.raises(ValueError, match=r"Twice is already registered as 'twice_registered'$"):
        register_record(Twice, "twice_again")
    assert sessions.load_record('{"type":"twice_registered"}') == Twice()


def test_an_unregistered_record_cannot_be_serialized() -> None:
    """Writing a record class nobody registered names the fix."""

    @attrs.frozen(kw_only=True)
    class Stray(Record):
        pass

    with pytest.raises(TypeError, match=r"^record class .*Stray is not registered; call "):
        sessions.dump_record(Stray())
