"""still_open: the one fold behind open turns and open children (what opened, not closed)."""

from __future__ import annotations

from operator import attrgetter

import attrs

from trio_agents._base import still_open


@attrs.frozen
class _Open:
    key: str
    note: str = ""


@attrs.frozen
class _Close:
    key: str


def test_open_spans_come_out_in_the_order_they_opened() -> None:
    """Closed spans leave, other items are passed over, the rest keep their first order."""
    items = [_Open("a"), _Open("b"), "noise", _Close("a"), _Open("c")]
    assert still_open(items, _Open, _Close, attrgetter("key")) == [_Open("b"), _Open("c")]


def test_a_reopened_key_keeps_its_place_with_its_latest_opening() -> None:
    """A key opened twice stays where it first opened, as its latest opening item."""
    items = [_Open("a", "first"), _Open("b"), _Open("a", "again")]
    spans = still_open(items, _Open, _Close, attrgetter("key"))
    assert spans == [_Open("a", "again"), _Open("b")]


def test_a_close_without_an_open_span_is_ignored() -> None:
    """Closing a key that never opened changes nothing."""
    assert still_open([_Close("x"), _Open("y")], _Open, _Close, attrgetter("key")) == [_Open("y")]
