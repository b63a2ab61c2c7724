"""The sans-IO core of the ACP bridge: framing, JSON-RPC meaning, request bookkeeping."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.acp import _jsonrpc
from trio_agents.acp._framing import (
    MAX_DEPTH,
    MAX_FRAME,
    TEXT_SLOT,
    LineFramer,
    Oversized,
    TextTemplate,
    encode_frame,
    find_problem,
)
from trio_agents.acp._jsonrpc import (
    Connection,
    ErrorCode,
    Invalid,
    Notification,
    ProtocolStateError,
    Request,
    Response,
)


def reply_of(event: object) -> dict[str, Any]:
    assert isinstance(event, Invalid)
    assert event.reply is not None
    assert event.reply.endswith(b"\n")
    decoded: dict[str, Any] = json.loads(event.reply)
    return decoded


def frame(message: object) -> bytes:
    return json.dumps(message).encode()


# -- framing -------------------------------------------------------------------------------------


def test_framer_splits_lines_and_keeps_partial_input() -> None:
    """Complete lines come out in order; the unterminated rest waits for more bytes."""
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}\r\n\n  \n") == [b'{"b":2}']
    assert framer.buffered == 0


def test_framer_close_returns_the_unterminated_last_frame() -> None:
    """At the end of input, a last line without a newline is still a frame."""
    framer = LineFramer()
    assert framer.feed(b"abc") == []
    assert framer.close() == [b"abc"]
    assert framer.close() == []
    with pytest.raises(RuntimeError, match=r"^the framer is closed"):
        framer.feed(b"x")


def test_oversized_frame_is_reported_once_and_framing_recovers() -> None:
    """A line over the limit yields one Oversized, is dropped, and the next line is intact."""
    framer = LineFramer(max_frame=8)
    assert framer.feed(b"0123") == []
    assert framer.feed(b"45678") == [Oversized(8)]
    assert framer.feed(b"9" * 100) == []
    assert framer.buffered == 0
    assert framer.feed(b"tail\nok\n") == [b"ok"]


def test_frame_of_exactly_the_limit_is_accepted() -> None:
    """The limit is inclusive."""
    assert LineFramer(max_frame=4).feed(b"abcd\n") == [b"abcd"]
    with pytest.raises(ValueError, match=r"^max_frame must be at least 1"):
        LineFramer(max_frame=0)


def test_five_megabyte_frame_in_small_chunks() -> None:
    """A 5 MB frame fed in 64 KiB chunks comes out whole under the default 16 MiB bound."""
    payload = encode_frame({"jsonrpc": "2.0", "method": "m", "params": {"x": "y" * 5_000_000}})
    framer = LineFramer()
    out: list[bytes | Oversized] = []
    for start in range(0, len(payload), 65536):
        out += framer.feed(payload[start : start + 65536])
    assert out == [payload[:-1]]
    assert MAX_FRAME == 16 * 1024 * 1024


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8), st.data())
def test_framing_is_independent_of_chunking(lines: list[bytes], data: st.DataObject) -> None:
    """However the bytes are cut, the same frames come out."""
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    framer = LineFramer()
    out: list[bytes | Oversized] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += framer.feed(stream[start:end])
    out += framer.close()
    expected = [line.removesuffix(b"\r") for line in lines]
    assert out == [line for line in expected if line.strip()]


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=10,
    )
)
def test_encoded_frames_are_one_line_and_round_trip(value: Any) -> None:
    """An encoded message has exactly one newline, at its end, and decodes to itself."""
    encoded = encode_frame(value)
    assert encoded.count(b"\n") == 1
    assert encoded.endswith(b"\n")
    assert json.loads(encoded) == value


# -- reading -------------------------------------------------------------------------------------


def test_malformed_json_is_a_parse_error_with_null_id() -> None:
    """Bytes that are not JSON get -32700 and id null."""
    reply = reply_of(Connection().receive(b"{not json"))
    assert reply["id"] is None
    assert reply["error"]["code"] == ErrorCode.PARSE_ERROR
    assert ErrorCode.PARSE_ERROR.value == -32700


def test_invalid_utf8_is_a_parse_error() -> None:
    """Bytes that are not UTF-8 are a parse error too."""
    assert reply_of(Connection().receive(b'{"a":"\xff"}'))["error"]["code"] == -32700


def test_oversized_frame_is_a_parse_error() -> None:
    """The framer's Oversized marker is answered -32700 naming the limit."""
    reply = reply_of(Connection().receive(Oversized(10)))
    assert reply["error"]["code"] == -32700
    assert "larger than 10 bytes" in reply["error"]["message"]


@pytest.mark.parametrize(
    ("message", "echoed"),
    [
        ({"jsonrpc": "2.0", "id": 7}, 7),
        ({"jsonrpc": "2.0", "id": "x", "params": {}}, "x"),
        ({"jsonrpc": "1.0", "id": 3, "method": "m"}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": "m", "params": 3}, 5),
        ({"jsonrpc": "2.0", "id": True, "method": "m"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "m"}, None),
        ([{"jsonrpc": "2.0", "id": 1, "method": "m"}], None),
        ([], None),
        (42, None),
    ],
)
def test_invalid_requests_get_minus_32600(message: object, echoed: object) -> None:
    """JSON that is not a request is -32600, with the id echoed when it could be read."""
    reply = reply_of(Connection().receive(frame(message)))
    assert reply["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert ErrorCode.INVALID_REQUEST.value == -32600
    assert reply["id"] == echoed
    assert type(reply["id"]) is type(echoed)


@pytest.mark.parametrize("request_id", [0, "x", None, "0", -1, 2**40])
def test_request_ids_are_echoed_exactly(request_id: object) -> None:
    """0, "x", null and friends come back with the same JSON type and value."""
    connection = Connection()
    event = connection.receive(frame({"jsonrpc": "2.0", "id": request_id, "method": "m"}))
    assert event == Request(request_id, "m", None)  # type: ignore[arg-type]
    assert isinstance(event, Request)
    answer = json.loads(connection.respond(event.id, {"ok": 1}))
    assert answer == {"jsonrpc": "2.0", "id": request_id, "result": {"ok": 1}}
    assert type(answer["id"]) is type(request_id)


def test_ids_zero_and_string_zero_are_different_requests() -> None:
    """0 and "0" can be open at once; each is answered separately."""
    connection = Connection()
    connection.receive(frame({"jsonrpc": "2.0", "id": 0, "method": "a"}))
    event = connection.receive(frame({"jsonrpc": "2.0", "id": "0", "method": "b"}))
    assert isinstance(event, Request)
    assert connection.statistics().incoming_open == 2
    connection.respond("0", None)
    assert connection.is_open(0)
    assert not connection.is_open("0")


def test_a_notification_has_no_id_member() -> None:
    """Without an id member it is a notification; with "id": null it is a request."""
    connection = Connection()
    note = connection.receive(frame({"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}))
    assert note == Notification("n", {"a": 1})
    assert isinstance(
        connection.receive(frame({"jsonrpc": "2.0", "id": None, "method": "n"})), Request
    )


def test_duplicate_open_id_is_refused_without_touching_the_open_one() -> None:
    """A second request reusing an open id is -32600 (id null) and the first stays open."""
    connection = Connection()
    connection.receive(frame({"jsonrpc": "2.0", "id": 1, "method": "m"}))
    reply = reply_of(connection.receive(frame({"jsonrpc": "2.0", "id": 1, "method": "m"})))
    assert reply["id"] is None
    assert connection.is_open(1)


def test_answering_twice_or_an_unknown_id_raises_and_changes_nothing() -> None:
    """respond on a request that is not open raises ProtocolStateError."""
    connection = Connection()
    connection.receive(frame({"jsonrpc": "2.0", "id": 1, "method": "m"}))
    connection.respond_error(1, ErrorCode.METHOD_NOT_FOUND, "no")
    with pytest.raises(ProtocolStateError, match=r"^cannot answer incoming request"):
        connection.respond(1, None)
    with pytest.raises(ProtocolStateError):
        connection.respond("never", None)
    assert connection.statistics().incoming_open == 0


def test_error_answer_carries_code_message_and_data() -> None:
    """respond_error serializes the error object, with data only when given."""
    connection = Connection()
    connection.receive(frame({"jsonrpc": "2.0", "id": "q", "method": "m"}))
    answer = json.loads(connection.respond_error("q", -32002, "unknown", {"sessionId": "s"}))
    assert answer["error"] == {"code": -32002, "message": "unknown", "data": {"sessionId": "s"}}


# -- the transition table ------------------------------------------------------------------------

_SIDES = ("incoming", "outgoing")
_STATES = ("absent", "open")
_MOVES = ("receive", "answer", "send", "response", "abandon")


def test_the_transition_table_is_the_five_legal_moves() -> None:
    """Incoming: receive opens, answer closes; outgoing: send opens, response or abandon close."""
    assert _jsonrpc._TRANSITIONS == {
        ("incoming", "absent", "receive"): "open",
        ("incoming", "open", "answer"): "absent",
        ("outgoing", "absent", "send"): "open",
        ("outgoing", "open", "response"): "absent",
        ("outgoing", "open", "abandon"): "absent",
    }


def _moves(*, legal: bool) -> list[tuple[str, str, str]]:
    """Every (side, state, move) that the table has (``legal``) or has not."""
    every = itertools.product(_SIDES, _STATES, _MOVES)
    return [m for m in every if (m in _jsonrpc._TRANSITIONS) is legal]


def _connection_with(side: str, state: str) -> Connection:
    """A connection where request id 0 on ``side`` is in ``state``."""
    connection = Connection()
    if state == "open" and side == "incoming":
        connection.receive(frame({"jsonrpc": "2.0", "id": 0, "method": "m"}))
    elif state == "open":
        assert connection.request("m", None)[0] == 0
    return connection


@pytest.mark.parametrize(("side", "state", "move"), _moves(legal=True))
def test_a_legal_move_writes_the_state_the_table_names(side: str, state: str, move: str) -> None:
    """The state after a move is exactly the table's entry: the lookup is the assignment."""
    connection = _connection_with(side, state)
    connection._move(side, 0, move, "m")  # type: ignore[arg-type]
    assert connection._state(side, 0) == _jsonrpc._TRANSITIONS[(side, state, move)]  # type: ignore[arg-type,index]


@pytest.mark.parametrize(("side", "state", "move"), _moves(legal=False))
def test_a_move_outside_the_table_raises_and_changes_nothing(
    side: str, state: str, move: str
) -> None:
    """Every undefined (side, state, move) raises ProtocolStateError naming it; nothing moves."""
    connection = _connection_with(side, state)
    before = connection.statistics()
    with pytest.raises(
        ProtocolStateError, match=rf"^cannot {move} {side} request 0: it is {state}; "
    ):
        connection._move(side, 0, move, "m")  # type: ignore[arg-type]
    assert connection.statistics() == before
    assert connection._state(side, 0) == state  # type: ignore[arg-type]


def test_a_response_with_id_true_answers_nothing() -> None:
    """The key keeps the id's type: ``true`` is not the open request 1."""
    connection = Connection()
    connection.request("m", None)
    connection.request("m", None)
    reply = reply_of(connection.receive(frame({"jsonrpc": "2.0", "id": True, "result": 1})))
    assert reply["error"]["code"] == ErrorCode.INVALID_REQUEST
    assert connection.statistics().outgoing_open == 2


# -- outgoing requests ---------------------------------------------------------------------------


def test_outgoing_request_is_correlated_with_its_response() -> None:
    """A response with our id resolves it once, with its method; ids start at 0."""
    connection = Connection()
    first, wire = connection.request("session/request_permission", {"x": 1})
    assert first == 0
    assert json.loads(wire)["method"] == "session/request_permission"
    second, _ = connection.request("other", None)
    response = connection.receive(frame({"jsonrpc": "2.0", "id": second, "result": {"r": 2}}))
    assert response == Response(second, "other", {"r": 2}, None)
    error = connection.receive(frame({"jsonrpc": "2.0", "id": first, "error": {"code": 1}}))
    assert isinstance(error, Response)
    assert error.error == {"code": 1}
    assert connection.statistics().outgoing_open == 0


def test_unsolicited_or_late_response_is_dropped_without_reply() -> None:
    """A response to an id not sent (or abandoned) is Invalid with nothing to send."""
    connection = Connection()
    request_id, _ = connection.request("m", None)
    connection.abandon(request_id)
    late = connection.receive(frame({"jsonrpc": "2.0", "id": request_id, "result": None}))
    assert isinstance(late, Invalid)
    assert late.reply is None
    with pytest.raises(ProtocolStateError, match=r"^cannot abandon"):
        connection.abandon(request_id)


def test_a_malformed_error_member_reads_as_an_internal_error() -> None:
    """A response whose error is not an object becomes -32603 quoting what came."""
    connection = Connection()
    request_id, _ = connection.request("m", None)
    response = connection.receive(frame({"jsonrpc": "2.0", "id": request_id, "error": "no"}))
    assert isinstance(response, Response)
    assert response.method == "m"
    assert response.error == {"code": ErrorCode.INTERNAL_ERROR, "message": "malformed error 'no'"}


def test_a_notification_with_scalar_params_is_invalid_and_not_answered() -> None:
    """params that are neither object nor array: a request is -32600, a notification silent."""
    connection = Connection()
    silent = connection.receive(frame({"jsonrpc": "2.0", "method": "m", "params": 3}))
    assert isinstance(silent, Invalid)
    assert silent.reply is None
    assert silent.reason.endswith("(a notification; not answered)")
    answered = reply_of(
        connection.receive(frame({"jsonrpc": "2.0", "id": 4, "method": "m", "params": 3}))
    )
    assert (answered["id"], answered["error"]["code"]) == (4, -32600)


# -- hypothesis: any input, and the answer discipline --------------------------------------------


@given(st.binary(max_size=200))
def test_any_bytes_give_an_event_and_never_raise(data: bytes) -> None:
    """Whatever a frame holds, receive() returns an event; invalid ones carry valid JSON."""
    event = Connection().receive(data)
    if isinstance(event, Invalid) and event.reply is not None:
        assert json.loads(event.reply)["error"]["code"] in (-32700, -32600)


json_ids = st.integers(-(2**53), 2**53) | st.text(max_size=5) | st.none()


@given(st.lists(st.tuples(json_ids, st.booleans()), max_size=20))
def test_every_request_is_answered_exactly_once(steps: list[tuple[object, bool]]) -> None:
    """Requests received are open until answered; an id is reusable after its answer."""
    connection = Connection()
    open_ids: list[object] = []
    for request_id, answer_now in steps:
        event = connection.receive(frame({"jsonrpc": "2.0", "id": request_id, "method": "m"}))
        if any(type(i) is type(request_id) and i == request_id for i in open_ids):
            assert isinstance(event, Invalid)
        else:
            assert isinstance(event, Request)
            assert event.id == request_id
            open_ids.append(request_id)
        if answer_now and open_ids:
            answered = open_ids.pop(0)
            reply = json.loads(connection.respond(answered, "ok"))  # type: ignore[arg-type]
            assert reply["id"] == answered
            assert type(reply["id"]) is type(answered)
    assert connection.statistics().incoming_open == len(open_ids)


# -- hostile frames: refused at the edge, never raised --------------------------------------------


def test_deep_nesting_is_a_parse_error_not_a_recursion_error() -> None:
    """100,000 '[' (far past the interpreter's recursion limit) is -32700 with id null."""
    reply = reply_of(Connection().receive(b"[" * 100_000))
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    assert re.match(r"^parse error: .*nested deeper than 64", reply["error"]["message"])


def test_nesting_past_the_depth_bound_is_refused_with_the_id_echoed() -> None:
    """Params 65 levels deep are refused (the id answered); 60 levels pass."""
    deep: object = "x"
    for _ in range(64):
        deep = [deep]
    reply = reply_of(
        Connection().receive(frame({"jsonrpc": "2.0", "id": 4, "method": "m", "params": deep}))
    )
    assert reply["id"] == 4
    assert reply["error"]["code"] == -32700
    shallow: object = "x"
    for _ in range(60):
        shallow = [shallow]
    event = Connection().receive(
        frame({"jsonrpc": "2.0", "id": 4, "method": "m", "params": shallow})
    )
    assert isinstance(event, Request)


@pytest.mark.parametrize(
    ("message", "where"),
    [
        ({"jsonrpc": "2.0", "id": "\ud800", "method": "initialize"}, "id"),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"sessionId": "\udfff"}},
            "sessionId",
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"cwd": "/tmp/a\ud800b"}}, "cwd"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"\ud800": 1}}, "a key"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [["ok", "\ud83d"]]}, "params[0][1]"),
        ({"jsonrpc": "2.0", "id": 1, "method": "m\udc00"}, "method"),
    ],
)
def test_a_lone_surrogate_anywhere_is_refused_and_the_reply_encodes(
    message: object, where: str
) -> None:
    """A lone surrogate in any string is -32700 naming where; the reply is valid UTF-8 JSON."""
    event = Connection().receive(frame(message))
    assert isinstance(event, Invalid)
    assert where in event.reason
    assert "surrogate" in event.reason
    reply = reply_of(event)
    assert event.reply is not None
    event.reply.decode("utf-8")  # strict: no surrogate leaks into the answer
    assert reply["error"]["code"] == -32700
    assert reply["id"] == (None if where == "id" else 1)


def test_a_surrogate_pair_is_one_character_and_accepted() -> None:
    """An escaped pair (an emoji) is valid Unicode: the request passes."""
    event = Connection().receive(
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"text":"\\ud83d\\ude00"}}'
    )
    assert isinstance(event, Request)
    assert event.params == {"text": "\U0001f600"}


def test_a_hostile_notification_is_dropped_unanswered() -> None:
    """A notification with a lone surrogate gets no answer, only a reason."""
    event = Connection().receive(frame({"jsonrpc": "2.0", "method": "n", "params": ["\ud800"]}))
    assert isinstance(event, Invalid)
    assert event.reply is None
    assert "surrogate" in event.reason


@pytest.mark.parametrize("text", [b"NaN", b"-Infinity", b"1e999"])
def test_non_finite_numbers_are_refused(text: bytes) -> None:
    """NaN, Infinity and numbers that overflow to infinity are not JSON numbers: -32700."""
    reply = reply_of(
        Connection().receive(b'{"jsonrpc":"2.0","id":2,"method":"m","params":[%s]}' % text)
    )
    assert reply["error"]["code"] == -32700


def test_a_refused_frame_never_borrows_an_open_id() -> None:
    """A hostile frame reusing an open request's id is answered with id null."""
    connection = Connection()
    assert isinstance(
        connection.receive(frame({"jsonrpc": "2.0", "id": 1, "method": "m"})), Request
    )
    reply = reply_of(connection.receive(frame({"jsonrpc": "2.0", "id": 1, "method": "\ud800"})))
    assert reply["id"] is None
    assert connection.is_open(1)


def test_a_hostile_response_to_our_request_reads_as_an_error_response() -> None:
    """The client's answer holding a lone surrogate closes our request as an error."""
    connection = Connection()
    request_id, _ = connection.request("session/request_permission", {})
    event = connection.receive(frame({"jsonrpc": "2.0", "id": request_id, "result": "\ud800"}))
    assert isinstance(event, Response)
    assert event.error is not None
    assert "surrogate" in event.error["message"]
    assert connection.statistics().outgoing_open == 0


def test_encoding_text_that_utf8_cannot_carry_never_raises() -> None:
    """A lone surrogate in an outgoing message is sent as U+FFFD (the frame stays UTF-8)."""
    encoded = encode_frame({"text": "a\ud800b"})
    assert json.loads(encoded.decode("utf-8")) == {"text": "a\ufffdb"}


def _text_update(session_id: str, text: str) -> dict[str, Any]:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {"sessionId": session_id, "update": update}


@given(
    st.text(st.characters(exclude_categories=()), max_size=12),
    st.text(st.characters(exclude_categories=()), max_size=12),
)
def test_a_text_template_frame_is_byte_for_byte_the_notify_frame(
    session_id: str, text: str
) -> None:
    """A template's frame is what notify() encodes with that text, lone surrogates and the
    slot's own characters (in the id, or in the text) included."""
    connection = Connection()
    template = connection.notification_template(
        "session/update", _text_update(session_id, TEXT_SLOT)
    )
    for value in (text, TEXT_SLOT + text, text + TEXT_SLOT):
        expected = connection.notify("session/update", _text_update(session_id, value))
        assert template.frame(value) == expected
    assert template.frame(text).decode("utf-8")  # strict: still UTF-8


def test_a_text_template_needs_its_slot() -> None:
    """A message without the slot string is refused, not silently templated."""
    with pytest.raises(ValueError, match=r"^the message holds no TEXT_SLOT string$"):
        TextTemplate({"text": "no slot"})


def test_an_answer_that_cannot_be_encoded_leaves_the_request_open() -> None:
    """respond() with a result JSON cannot hold raises, and the request can still be answered."""
    connection = Connection()
    assert isinstance(
        connection.receive(frame({"jsonrpc": "2.0", "id": 1, "method": "m"})), Request
    )
    with pytest.raises(ValueError, match=r"JSON"):
        connection.respond(1, {"x": float("nan")})
    with pytest.raises(TypeError):
        connection.respond(1, {"x": object()})
    assert connection.is_open(1)
    assert json.loads(connection.respond_error(1, -32603, "internal error"))["id"] == 1


#: Strings that include lone surrogates (hypothesis leaves category Cs out by default).
hostile_strings = st.text(st.characters(exclude_categories=()), max_size=6)
hostile_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | hostile_strings,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(hostile_strings, c, max_size=3),
    max_leaves=12,
)


@given(
    st.one_of(
        hostile_values.map(lambda v: {"jsonrpc": "2.0", "id": 1, "method": "m", "params": v}),
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "method": hostile_strings},
            optional={"id": hostile_strings | st.integers(), "params": hostile_values},
        ),
        hostile_values,
    )
)
def test_hostile_values_give_an_event_and_a_utf8_reply(message: object) -> None:
    """Any JSON value (surrogates, non-finite floats) gives an event; requests stay answerable."""
    connection = Connection()
    event = connection.receive(json.dumps(message).encode())
    if isinstance(event, Invalid) and event.reply is not None:
        assert json.loads(event.reply.decode("utf-8"))["error"]["code"] in (-32700, -32600)
    if isinstance(event, Request):
        event.method.encode("utf-8")
        json.dumps(event.params, allow_nan=False).encode("utf-8")  # refused at the edge
        assert json.loads(connection.respond(event.id, event.params).decode("utf-8"))


def _clean(value: Any, depth: int = 0) -> bool:
    """The rules of find_problem, written as plainly as possible."""
    surrogate = re.compile("[\ud800-\udfff]")
    if isinstance(value, str):
        return not surrogate.search(value)
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return depth < MAX_DEPTH and all(_clean(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return depth < MAX_DEPTH and all(
            not surrogate.search(k) and _clean(v, depth + 1) for k, v in value.items()
        )
    return True


_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=4)
_SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | _TEXT


@given(
    st.recursive(
        _SCALAR,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
        max_leaves=20,
    )
)
def test_find_problem_refuses_exactly_surrogates_non_finite_numbers_and_deep_nesting(
    value: Any,
) -> None:
    """find_problem names a problem exactly when a string or key holds a lone surrogate, a
    number is not finite, or arrays and objects nest MAX_DEPTH deep or more."""
    assert (find_problem(value) is None) == _clean(value)


@pytest.mark.parametrize("levels", range(MAX_DEPTH - 1, MAX_DEPTH + 3))
@pytest.mark.parametrize("container", ["list", "dict"])
def test_find_problem_refuses_nesting_from_max_depth_on(levels: int, container: str) -> None:
    """Arrays or objects nested MAX_DEPTH levels are fine; one level more is refused."""
    value: Any = 1
    for _ in range(levels):
        value = [value] if container == "list" else {"k": value}
    assert (find_problem(value) is None) == (levels <= MAX_DEPTH) == _clean(value)
