"""The session converter: tagged unions of records and causes, strict structuring."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agents.cancel import CancelCause, DisposedCancel, HookCancel, ParentCancel, UserCancel
from trio_agents.session import (
    AgentConfigured,
    AssistantMessage,
    Compacted,
    InboxSpliced,
    ModelUsage,
    Record,
    SessionFormatError,
    StopReason,
    ToolApproval,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
    check_recordable_cause,
    dump_record,
    load_record,
    register_cause,
    register_record,
)
from trio_agents.session._convert import check_record
from trio_agents.session._errors import UnstorableRecordError

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
        ToolCallEnded,
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
    assert json.loads(line)["type"] == FORMAT_1_TAGS.get(
        type(record), _snake(type(record).__name__)
    )


#: Record classes renamed since format 1 keep the tag files already hold.
FORMAT_1_TAGS: dict[type[Record], str] = {ToolCallEnded: "tool_result"}


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
    assert "unknown keys: extra @ line 2" in message


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


def test_wrong_json_types_are_reported_not_coerced() -> None:
    """A boolean for a string, a list for the arguments object, a string for a cause: refused."""
    line = json.dumps(
        {
            "type": "tool_call",
            "turn_id": True,
            "call_id": "c",
            "name": "n",
            "arguments": ["not", "an", "object"],
        }
    )
    with pytest.raises(SessionFormatError) as info:
        load_record(line, where="l")
    message = str(info.value)
    assert "expected a string, got bool True @ l.turn_id" in message
    assert "expected a JSON object, got list ['not', 'an', 'object'] @ l.arguments" in message
    cause = '{"type":"turn_ended","turn_id":"t","stop_reason":"cancelled","cause":"user_cancel"}'
    with pytest.raises(
        SessionFormatError, match=r"expected a JSON object, got str 'user_cancel' @ record\.cause"
    ):
        load_record(cause)


def test_a_cause_without_its_type_tag_is_reported() -> None:
    """A nested cause object must name its kind."""
    line = '{"type":"turn_ended","turn_id":"t","stop_reason":"cancelled","cause":{}}'
    with pytest.raises(
        SessionFormatError,
        match=r"missing the 'type' field that names the CancelCause kind @ record\.cause",
    ):
        load_record(line)


def test_a_record_that_is_not_an_object_is_reported() -> None:
    """A JSON line holding a list is not a record."""
    with pytest.raises(
        SessionFormatError, match=r"expected a JSON object, got list \[1, 2\] @ record$"
    ):
        load_record("[1, 2]")


@attrs.frozen
class ZapCancel(CancelCause):
    """A cause of this test module, made serializable by ``register_cause``."""

    volts: int = 0


@attrs.frozen
class UnregisteredCancel(CancelCause):
    """A cause nobody registered."""


def test_register_cause_makes_a_new_cause_round_trip() -> None:
    """A registered cause is written under its snake_case tag and read back."""
    assert register_cause(ZapCancel) is ZapCancel
    record = TurnEnded(turn_id="t", stop_reason=StopReason.CANCELLED, cause=ZapCancel(3))
    line = dump_record(record)
    assert json.loads(line)["cause"] == {"type": "zap_cancel", "volts": 3}
    assert load_record(line) == record


def test_register_cause_refuses_non_causes_and_taken_tags() -> None:
    """Only attrs CancelCause subclasses; a tag names one class."""
    with pytest.raises(TypeError, match=r"^register_cause\(\) takes an attrs subclass"):
        register_cause(int)  # type: ignore[type-var]
    with pytest.raises(
        ValueError, match=r"^cause tag 'user_cancel' is already used by UserCancel; choose"
    ):
        register_cause(UnregisteredCancel, "user_cancel")


def test_an_unregistered_cause_cannot_be_written() -> None:
    """Dumping a record whose cause is not registered names the fix."""
    record = TurnEnded(turn_id="t", stop_reason=StopReason.CANCELLED, cause=UnregisteredCancel())
    with pytest.raises(
        TypeError,
        match=r"^cancel cause UnregisteredCancel is not registered; call "
        r"register_cause\(UnregisteredCancel\) first$",
    ):
        dump_record(record)


def test_check_record_refuses_an_unregistered_cause_without_fields() -> None:
    """The quick check passes only registered causes without a look: another is refused."""
    check_record(TurnEnded(turn_id="t", stop_reason=StopReason.CANCELLED, cause=UserCancel()))
    record = TurnEnded(turn_id="t", stop_reason=StopReason.CANCELLED, cause=UnregisteredCancel())
    with pytest.raises(TypeError, match=r"^cancel cause UnregisteredCancel is not registered; "):
        check_record(record)


@attrs.frozen(kw_only=True)
class Measured(Record):
    """A record of this test module with a float field."""

    value: float


register_record(Measured)


def test_an_integer_is_accepted_for_a_float_field() -> None:
    """JSON has one number type: 2 reads back as 2.0, a string does not."""
    record = load_record('{"type":"measured","value":2,"seq":0}')
    assert record == Measured(value=2.0, seq=0)
    assert isinstance(record, Measured)
    assert type(record.value) is float
    with pytest.raises(SessionFormatError, match=r"expected a number, got str '2'"):
        load_record('{"type":"measured","value":"2"}')


def test_an_integral_float_is_an_integer_as_in_every_strict_reader() -> None:
    """One policy with configs and tool arguments: 2.0 reads as the integer 2, 2.5 does not."""
    line = '{"type":"model_usage","turn_id":"t","input_tokens":2.0,"output_tokens":3,"seq":0}'
    record = load_record(line)
    assert isinstance(record, ModelUsage)
    assert type(record.input_tokens) is int
    assert record.input_tokens == 2
    with pytest.raises(SessionFormatError, match=r"expected an integer, got float 2\.5 @ "):
        load_record(line.replace("2.0", "2.5"))
    with pytest.raises(SessionFormatError, match=r"expected an integer, got bool True @ "):
        load_record(line.replace("2.0", "true"))


def test_a_long_wrong_value_is_shown_by_its_start() -> None:
    """A megabyte in the wrong field does not make a megabyte of message."""
    line = json.dumps({"type": "turn_started", "turn_id": ["x" * 1_000_000]})
    with pytest.raises(SessionFormatError) as info:
        load_record(line)
    assert len(str(info.value)) < 200
    assert "expected a string, got list ['xxx" in str(info.value)


# -- check_record: dump_record's verdict without the line ------------------------------------

# Half of it holds a lone surrogate (category Cs), which st.text() draws almost never.
_lone = st.builds(
    lambda before, lone: before + lone, st.text(max_size=3), st.characters(categories=["Cs"])
)  # text with a lone surrogate, which st.text() draws almost never
_any_value: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=4),
    _lone,
    st.sampled_from([math.nan, math.inf, -math.inf, 0.5]),
    st.sampled_from(StopReason),
    st.builds(object),
    st.binary(max_size=3),
    st.lists(_lone | st.text(max_size=2), max_size=2),
    st.dictionaries(st.text(max_size=2) | _lone, st.floats() | _lone, max_size=2),
    causes,
    st.builds(HookCancel, reason=_lone),
    st.builds(ParentCancel, parent_id=st.integers() | st.builds(object)),
)


@attrs.frozen(kw_only=True)
class Unregistered(Record):
    text: str


_valid_records: st.SearchStrategy[Record] = st.one_of(
    records,
    st.builds(ModelUsage, turn_id=text, input_tokens=st.integers(0), output_tokens=st.integers(0)),
    st.builds(Compacted, summary=text, kept_from_seq=st.integers(0), turn_id=st.none() | text),
    st.builds(
        ToolApproval,
        turn_id=st.none() | text,
        name=text,
        decision=st.sampled_from(["allow_once", "reject_always", "cancel"]),
        by=text,
    ),
    st.builds(AgentConfigured, instructions=st.none() | text, tools=st.none() | st.lists(text)),
    st.builds(Unregistered, text=text),
)


@settings(max_examples=400)
@given(record=_valid_records, data=st.data())
def test_check_record_accepts_and_refuses_what_dump_record_does(
    record: Record, data: st.DataObject
) -> None:
    """A storable record with one field set to any value (lone surrogates, NaN, objects,
    bytes, the wrong enum): the quick check agrees with the full dump, both accept or both
    raise the same error."""
    names = [field.name for field in attrs.fields(type(record))]
    if data.draw(st.booleans()):
        name = data.draw(st.sampled_from(names))
        try:
            record = attrs.evolve(record, **{name: data.draw(_any_value)})
        except (TypeError, ValueError):
            return  # the class refuses the value itself
    assert _verdict(check_record, record) == _verdict(dump_record, record)


def _verdict(check: Callable[[Record], object], record: Record) -> tuple[str, str] | None:
    """``None`` if ``check`` accepts ``record``, else the error it raised (class, message)."""
    try:
        check(record)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return None


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        (
            AssistantMessage(turn_id="t-1", content="bad \udcff"),
            "lone surrogate U\\+DCFF at content",
        ),
        (TurnEnded(turn_id="t-1", stop_reason=b"done"), "JSON cannot represent"),  # type: ignore[arg-type]
        (ModelUsage(turn_id="t-1", input_tokens=math.nan, output_tokens=0), "JSON cannot"),  # type: ignore[arg-type]
        (
            TurnEnded(
                turn_id="t-1", stop_reason=StopReason.BLOCKED, cause=HookCancel(reason="\udcff")
            ),
            "lone surrogate U\\+DCFF at cause.reason",
        ),
        (
            ToolCall(turn_id="t-1", call_id="c", name="n", arguments={"\udcff": 1}),
            "lone surrogate U\\+DCFF at a key of arguments",
        ),
        (
            ToolCall(turn_id="t-1", call_id="c", name="n", arguments={"a": [{"\udcff": 1}]}),
            "lone surrogate U\\+DCFF at a key of arguments.a\\[0\\]",
        ),
        (
            ToolCall(turn_id="t-1", call_id="c", name="n", arguments={"a": _nested(150)}),
            "deeper than 100 levels",
        ),
        (ToolCall(turn_id="t-1", call_id="c", name="n", arguments={"a": {1, 2}}), "JSON cannot"),
    ],
)
def test_check_record_refuses_what_dump_record_refuses(record: Record, problem: str) -> None:
    with pytest.raises(UnstorableRecordError, match=problem):
        dump_record(record)
    with pytest.raises(UnstorableRecordError, match=problem):
        check_record(record)


def test_check_recordable_cause_refuses_a_non_cause_then_an_unregistered_cause() -> None:
    """Only a CancelCause whose class is registered passes, returned as is."""
    assert check_recordable_cause(UserCancel()) == UserCancel()
    with pytest.raises(TypeError, match=r"^cancel causes are CancelCause instances such as "):
        check_recordable_cause("user")
    with pytest.raises(
        TypeError,
        match=r"^cancel cause UnregisteredCancel is not registered, so the turn it cancels "
        r"could not record it; call register_cause\(UnregisteredCancel\) first$",
    ):
        check_recordable_cause(UnregisteredCancel())
