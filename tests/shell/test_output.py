"""The sans-IO output buffer of the shell: the cap, drop counting, incremental decoding."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.support import CountingBuffer
from trio_agents.shell._output import OutputBuffer


def test_take_returns_what_was_fed_since_the_previous_take() -> None:
    """Reads are incremental: each take returns only the new output."""
    buffer = OutputBuffer(100)
    buffer.feed(b"one\n")
    assert buffer.take() == ("one\n", 0)
    buffer.feed(b"two\n")
    assert buffer.take() == ("two\n", 0)
    assert buffer.take() == ("", 0)


def test_over_the_cap_the_oldest_bytes_are_dropped_and_counted() -> None:
    """The newest `cap` bytes are kept; the drop count says how many went."""
    buffer = CountingBuffer(4)
    buffer.feed(b"abc")
    buffer.feed(b"defg")
    assert buffer.take() == ("defg", 3)
    assert buffer.take() == ("", 0)
    assert buffer.total == 7


def test_a_utf8_sequence_split_across_reads_is_decoded_whole() -> None:
    """A multibyte character cut between two feeds appears once, intact."""
    data = "é".encode()
    buffer = OutputBuffer(100)
    buffer.feed(data[:1])
    assert buffer.take() == ("", 0)
    buffer.feed(data[1:])
    assert buffer.take() == ("é", 0)


def test_invalid_utf8_is_replaced_not_raised() -> None:
    """Binary output never breaks a read."""
    buffer = OutputBuffer(100)
    buffer.feed(b"\xff\xfeok")
    assert buffer.take(final=True) == ("\ufffd\ufffdok", 0)


def test_cap_must_be_positive() -> None:
    """A zero cap is refused with a message that says what is expected."""
    with pytest.raises(ValueError, match=r"^the output cap is a positive number"):
        OutputBuffer(0)


def test_cap_is_what_it_was_made_with() -> None:
    """``cap`` reports the limit."""
    assert OutputBuffer(7).cap == 7


def test_a_drop_restarts_the_decoder() -> None:
    """Bytes held for an unfinished character are cut off by a drop, not glued to what
    follows (which would decode as a replacement character)."""
    buffer = OutputBuffer(2)
    buffer.feed("é".encode()[:1])
    assert buffer.take() == ("", 0)
    buffer.feed(b"xyz")
    assert buffer.take() == ("yz", 1)


_ASCII = st.text(alphabet=string.ascii_letters + "\n", max_size=50).map(str.encode)


@given(chunks=st.lists(_ASCII, max_size=20), cap=st.integers(1, 64), every=st.integers(1, 5))
def test_kept_plus_dropped_is_everything_fed(chunks: list[bytes], cap: int, every: int) -> None:
    """No byte is lost silently: what readers got plus what was dropped is all the output."""
    buffer = CountingBuffer(cap)
    kept = dropped = 0
    for i, chunk in enumerate(chunks):
        buffer.feed(chunk)
        if i % every == 0:
            text, lost = buffer.take()
            assert len(text) <= cap
            kept, dropped = kept + len(text), dropped + lost
    text, lost = buffer.take(final=True)
    kept, dropped = kept + len(text), dropped + lost
    assert kept + dropped == sum(len(c) for c in chunks) == buffer.total
