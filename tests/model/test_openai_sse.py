"""The sans-IO server-sent events decoder: lines, fields, dispatch, and any chunking."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.model._sse import DEFAULT_MAX_LINE, SSEDecoder, SSEEvent, SSELimitError


def decode(*chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events


def test_a_blank_line_dispatches_the_event() -> None:
    """data lines become one event when a blank line closes it; nothing before that."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: hello\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("hello")]


def test_data_lines_are_joined_with_newlines() -> None:
    """Several data fields in one event are joined with \\n."""
    assert decode(b"data: a\ndata:b\ndata\n\n") == [SSEEvent("a\nb\n")]


def test_fields_comments_and_unknown_fields() -> None:
    """event, id and retry are kept; comments and unknown fields are ignored."""
    stream = b": keep-alive\nevent: delta\nid: 7\nretry: 100\nfoo: bar\ndata: x\n\n"
    assert decode(stream) == [SSEEvent("x", "delta", "7", 100)]


def test_the_id_persists_and_event_resets() -> None:
    """The last id is remembered across events; the event type is per event."""
    assert decode(b"event: a\nid: 1\ndata: x\n\ndata: y\n\n") == [
        SSEEvent("x", "a", "1"),
        SSEEvent("y", "message", "1"),
    ]


def test_an_id_containing_nul_is_ignored() -> None:
    """Per the SSE spec an id with a NUL character does not replace the last id."""
    assert decode(b"id: 1\ndata: x\n\nid: a\0b\ndata: y\n\n") == [
        SSEEvent("x", "message", "1"),
        SSEEvent("y", "message", "1"),
    ]


def test_an_event_without_data_is_dropped() -> None:
    """A blank line with no data pending dispatches nothing."""
    assert decode(b"\n\nevent: ping\n\ndata: x\n\n") == [SSEEvent("x")]


def test_only_one_space_after_the_colon_is_removed() -> None:
    """'data:  x' keeps the second space."""
    assert decode(b"data:  x\n\n") == [SSEEvent(" x")]


def test_all_three_line_ends_work() -> None:
    """\\r\\n, \\n and \\r all end a line."""
    assert decode(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        SSEEvent("a"),
        SSEEvent("b"),
        SSEEvent("c"),
    ]


def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    """A chunk ending in \\r followed by one starting with \\n is a single line end."""
    assert decode(b"data: a\r", b"\n", b"\r", b"\n") == [SSEEvent("a")]


def test_a_utf8_sequence_split_across_chunks_is_decoded() -> None:
    """Bytes of one character in two chunks decode to that character."""
    data = "data: héllo\n\n".encode()
    cut = data.index(b"\xc3") + 1
    assert decode(data[:cut], data[cut:]) == [SSEEvent("héllo")]


def test_a_leading_byte_order_mark_is_dropped() -> None:
    """A BOM at the very start of the stream is not part of the first field name."""
    assert decode(b"\xef\xbb", b"\xbfdata: x\n\n") == [SSEEvent("x")]


def test_end_reports_a_truncated_event() -> None:
    """end() discards an event the stream cut off, and says so."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: complete\n\ndata: cut") == [SSEEvent("complete")]
    assert decoder.end() is True
    clean = SSEDecoder()
    clean.feed(b"data: x\n\n")
    assert clean.end() is False


def test_a_line_at_the_bound_passes_and_one_past_it_is_refused() -> None:
    """max_line characters in a line are fine; one more is an SSELimitError, raised while the
    line is still unfinished (no line end needed) or within one chunk."""
    assert decode_with(10, b"data: 1234\n\n") == [SSEEvent("1234")]
    with pytest.raises(SSELimitError, match=r"^a line longer than 10 characters$"):
        SSEDecoder(10).feed(b"data: 12345")
    with pytest.raises(SSELimitError, match=r"^a line longer than 10 characters$"):
        SSEDecoder(10).feed(b"data: 12345\n\n")
    growing = SSEDecoder(10)
    for piece in (b"da", b"ta: ", b"1234"):
        assert growing.feed(piece) == []
    with pytest.raises(SSELimitError):
        growing.feed(b"5")


def test_comments_count_toward_the_line_bound() -> None:
    """A comment line is held like any other until its end: it is bounded too."""
    with pytest.raises(SSELimitError):
        SSEDecoder(8).feed(b": " + b"k" * 7)


def test_the_data_of_one_event_is_bounded_across_lines() -> None:
    """Short data lines add up: the joined data may not exceed max_line either; a blank line
    starts the count again."""
    assert decode_with(12, b"data:123456\ndata:12345\n\ndata:1234567\n\n") == [
        SSEEvent("123456\n12345"),
        SSEEvent("1234567"),
    ]
    with pytest.raises(SSELimitError, match=r"^the data of an event longer than 12 characters$"):
        SSEDecoder(12).feed(b"data:123456\ndata:123456\n")


def test_the_default_bound_is_one_mebibyte_and_must_be_positive() -> None:
    """1 MiB by default; a bound below 1 is refused."""
    assert DEFAULT_MAX_LINE == 1 << 20
    assert decode(b"data: " + b"x" * (DEFAULT_MAX_LINE - 6) + b"\n\n")[0].data[-1] == "x"
    with pytest.raises(ValueError, match=r"^max_line must be a whole number >= 1; got 0$"):
        SSEDecoder(0)


def decode_with(max_line: int, *chunks: bytes) -> list[SSEEvent]:
    decoder = SSEDecoder(max_line)
    return [event for chunk in chunks for event in decoder.feed(chunk)]


_FIELD = st.sampled_from(["data", "event", "id", "retry", ":", "other"])
_VALUE = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\0"), max_size=8)
_LINE = st.one_of(st.just(""), st.builds(lambda f, v: f"{f}: {v}", _FIELD, _VALUE))
_EOL = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_LINE, _EOL), max_size=20))
    return "".join(line + eol for line, eol in lines).encode()


@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_any_chunking_gives_the_same_events(stream: bytes, cuts: list[int]) -> None:
    """Splitting a stream anywhere (even inside \\r\\n or a character) changes nothing."""
    points = sorted({c % (len(stream) + 1) for c in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    whole = SSEDecoder()
    split = SSEDecoder()
    assert decode(*pieces) == whole.feed(stream)
    for piece in pieces:
        split.feed(piece)
    assert split.end() == whole.end()
