"""The session converter: tagged unions of records and causes, strict structuring."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.cancel import DisposedCancel, HookCancel, ParentCancel, UserCancel
from trio_agents.session import (
    AssistantMessage,
    InboxSpliced,
    Record,
    SessionFormatError,
    StopReason,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarted,
    UserMessage,
    dump_record,
    load_record,
)

text = st.text(max_size=20)
seqs = st.integers(min_value=-1, max_value=2**40)
json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
causes = st.one_of(
    st.none(),
    st.builds(UserCancel),
    st.builds(DisposedCancel),
    st.builds(ParentCancel, parent_id=text),
    st.builds(HookCancel, reason=text),
)
records: st.SearchStrategy[Record] = st.one_of(
    st.builds(
        InboxSpliced,
        seq=seqs,
        op=st.sampled_from(["add", "remove"]),
        lane=st.sampled_from(["next_turn", "next_step"]),
        message_id=text,
        content=st.none() | text,
        wake=st.booleans(),
        reason=st.none() | st.sampled_from(["discarded", "cancelled"]),
    ),
    st.builds(UserMessage, seq=seqs, message_id=text, content=text, turn_id=text),
    st.builds(AssistantMessage, seq=seqs, turn_id=text, content=text),
    st.builds(
        ToolCall,
        seq=seqs,
        turn_id=text,
        call_id=text,
        name=text,
        arguments=st.dictionaries(text, json_values, max_size=4),
    ),
    st.builds(
        ToolResult,
        seq=seqs,
        turn_id=text,
        call_id=text,
        name=text,
        content=text,
        is_error=st.booleans(),
        started=st.booleans(),
    ),
    st.builds(TurnStarted, seq=seqs, turn_id=text),
    st.builds(
        TurnEnded,
        seq=seqs,
        turn_id=text,
        stop_reason=st.sampled_from(StopReason),
        cause=causes,
        error=st.none() | text,
    ),
)


@given(records)
def test_every_record_round_trips_through_one_json_line(record: Record) -> None:
    """dump_record then load_record gives back an equal record, from a single line."""
    line = dump_record(record)
    assert "\n" not in line
    assert load_record(line) == record
    assert json.loads(line)["type"] == _snake(type(record).__name__)


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def test_causes_are_tagged() -> None:
    """A nested cancel cause carries its own snake_case type tag."""
    line = dump_record(
        TurnEnded(turn_id="t", stop_reason=StopReason.CANCELLED, cause=ParentCancel("p"))
    )
    assert json.loads(line)["cause"] == {"type": "parent_cancel", "parent_id": "p"}


def test_unknown_record_type_is_a_format_error_naming_it() -> None:
    """An unknown tag is refused with the tag, where it is, and the known tags."""
    with pytest.raises(
        SessionFormatError, match=r"^invalid session record: unknown Record type 'nope'; known: "
    ) as info:
        load_record('{"type": "nope"}', where="f.jsonl:3")
    assert "@ f.jsonl:3" in str(info.value)


def test_every_bad_field_is_reported_with_its_path() -> None:
    """Wrong types, bad enum values and extra keys are all listed, each with its path."""
    line = '{"type":"turn_ended","turn_id":5,"stop_reason":"x","extra":1}'
    with pytest.raises(SessionFormatError) as info:
        load_record(line, where="line 2")
    message = str(info.value)
    assert "expected a string, got int 5 @ line 2.turn_id" in message
    assert "'x' is not a valid StopReason @ line 2.stop_reason" in message
    assert "extra fields found (extra) @ line 2" in message


def test_missing_field_is_reported() -> None:
    """A missing required field is named."""
    with pytest.raises(SessionFormatError, match=r"required field missing @ record\.turn_id"):
        load_record('{"type":"turn_started"}')


def test_unknown_cause_type_is_reported() -> None:
    """An unknown cause tag is refused."""
    line = '{"type":"turn_ended","turn_id":"t","stop_reason":"cancelled","cause":{"type":"zap"}}'
    with pytest.raises(SessionFormatError, match=r"unknown CancelCause type 'zap'"):
        load_record(line)


def test_non_json_is_a_format_error() -> None:
    """A line that is not JSON says so."""
    with pytest.raises(SessionFormatError, match=r"^line 9 is not valid JSON"):
        load_record("{torn", where="line 9")


def test_scalars_are_not_coerced() -> None:
    """A boolean field given 1 is an error, not True."""
    line = (
        '{"type":"tool_result","turn_id":"t","call_id":"c","name":"n","content":"x","is_error":1}'
    )
    with pytest.raises(SessionFormatError, match=r"expected a boolean, got int 1"):
        load_record(line)


def test_unserializable_arguments_are_refused_with_the_record_named() -> None:
    """A value JSON cannot hold is a ValueError that names the record."""
    record = ToolCall(turn_id="t", call_id="c", name="n", arguments={"x": object()})
    with pytest.raises(ValueError, match=r"^ToolCall \(seq -1\) holds a value JSON cannot"):
        dump_record(record)
