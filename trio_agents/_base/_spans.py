"""Spans in a sequence of items: what opened and has not closed yet.

Rules:
- An item of the ``opened`` type opens the span of its key; an item of the ``closed`` type
  closes the span of its key (a close with no open span is ignored); other items are passed
  over.
- The open spans come out in the order their keys first opened, each as its latest opening
  item.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

S = TypeVar("S")
C = TypeVar("C")


def still_open(
    items: Iterable[object],
    opened: type[S],
    closed: type[C],
    key: Callable[[S | C], Hashable],
) -> list[S]:
    """The ``opened`` items of ``items`` whose span no later ``closed`` item ended (see the
    module rules)."""
    spans: dict[Hashable, S] = {}
    for item in items:
        if isinstance(item, opened):
            spans[key(item)] = item
        elif isinstance(item, closed):
            spans.pop(key(item), None)
    return list(spans.values())
