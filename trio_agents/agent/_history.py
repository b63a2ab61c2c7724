"""Model-visible means logged: the conversation a model sees is rebuilt from session records.

Rules:
- ``UserMessage`` → user text; ``AssistantMessage`` with the ``ToolCall`` records that follow
  it in the same step → one assistant message; ``ToolCallEnded`` → tool output.
- A tool call with no recorded result (a crash cut the turn) gets a synthetic error output, so
  every call the model made is answered.
- Records that the model never saw (inbox bookkeeping, turn markers) are skipped.
- :class:`History` folds in only the records it has not seen (``Session.records_since``), and
  :meth:`History.messages` is a :class:`Messages` view, not a copy: a model request costs the
  new records, never the length of the session. A resumed session is folded once.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeAlias, final, overload

from ..model import AssistantText, ChatMessage, SystemText, ToolCallPart, ToolOutput, UserText
from ..session import (
    AssistantMessage,
    Record,
    Session,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
)

__all__ = ["History", "Messages", "conversation"]

_MISSING = "interrupted: no result was recorded"


@final
class Messages(Sequence[ChatMessage]):
    """An immutable snapshot of a conversation that shares its storage with the history.

    It is a read-only sequence equal to the tuple of the same messages (and hashes like it);
    taking it costs nothing, whatever the length of the conversation.
    """

    __slots__ = ("_base", "_length", "_tail")

    def __init__(
        self, base: list[ChatMessage], length: int, tail: ChatMessage | None = None
    ) -> None:
        # Invariant: `base` is only ever appended to, so its first `length` items never
        # change; that is what makes this view a snapshot.
        self._base = base
        self._length = length
        self._tail = tail

    def __len__(self) -> int:
        return self._length + (self._tail is not None)

    @overload
    def __getitem__(self, index: int) -> ChatMessage: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ChatMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> ChatMessage | tuple[ChatMessage, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError(f"message index {index} out of range (the conversation has {size})")
        if position == self._length:
            assert self._tail is not None  # position < size == length + 1
            return self._tail
        return self._base[position]

    def __iter__(self) -> Iterator[ChatMessage]:
        yield from itertools.islice(self._base, self._length)
        if self._tail is not None:
            yield self._tail

    def __reversed__(self) -> Iterator[ChatMessage]:
        if self._tail is not None:
            yield self._tail
        for i in range(self._length - 1, -1, -1):
            yield self._base[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Messages({list(self)!r})"


@final
class History:
    """The chat history of one session, kept up to date from its records."""

    __slots__ = ("_answered", "_calls", "_messages", "_open", "_seen", "_text")

    def __init__(self, instructions: str | None = None) -> None:
        self._messages: list[ChatMessage] = [SystemText(instructions)] if instructions else []
        self._text: str | None = None
        self._calls: list[ToolCallPart] = []
        self._open: list[ToolCallPart] = []
        self._answered: set[str] = set()
        # Invariant: the records of the session with seq < _seen have been folded in.
        self._seen = 0

    def update(self, session: Session) -> History:
        """Fold in the records of ``session`` not folded yet (and only those)."""
        new = session.records_since(self._seen)
        self.fold(new)
        self._seen += len(new)
        return self

    def fold(self, records: Iterable[Record]) -> None:
        """Fold ``records`` in, in order (``update`` does this with a session's new records)."""
        for record in records:
            self._feed(record)

    def messages(self) -> Messages:
        """The conversation so far, with any step still open closed as it stands."""
        tail: ChatMessage | None = None
        if self._text is not None or self._calls:
            tail = AssistantText(self._text or "", tuple(self._calls))
        return Messages(self._messages, len(self._messages), tail)

    def _feed(self, record: Record) -> None:
        kind = type(record)
        try:
            feed = _FEEDS[kind]
        except KeyError:
            feed = _FEEDS[kind] = _feed_of(kind)
        if feed is not None:
            feed(self, record)

    def _assistant(self, record: AssistantMessage) -> None:
        self._close_assistant()
        self._answer_missing()
        self._text = record.content

    def _tool_call(self, record: ToolCall) -> None:
        part = ToolCallPart(record.call_id, record.name, record.arguments)
        self._calls.append(part)
        self._open.append(part)

    def _tool_ended(self, record: ToolCallEnded) -> None:
        self._close_assistant()
        self._answered.add(record.call_id)
        self._messages.append(
            ToolOutput(record.call_id, record.name, record.content, record.is_error)
        )

    def _user(self, record: UserMessage) -> None:
        self._close_assistant()
        self._answer_missing()
        self._messages.append(UserText(record.content))

    def _turn_ended(self, record: TurnEnded) -> None:
        self._close_assistant()
        self._answer_missing()

    def _close_assistant(self) -> None:
        if self._text is not None or self._calls:
            self._messages.append(AssistantText(self._text or "", tuple(self._calls)))
        self._text = None
        self._calls = []

    def _answer_missing(self) -> None:
        for call in self._open:
            if call.call_id not in self._answered:
                self._messages.append(ToolOutput(call.call_id, call.name, _MISSING, True))
        self._open = []
        self._answered.clear()


_Feed: TypeAlias = Callable[[History, Any], None]

# What each record class does to the history (``None``: the model never sees it), by exact
# class, filled in on first sight: one dict lookup per record instead of a chain of checks.
_FEEDS: dict[type, _Feed | None] = {}


def _feed_of(kind: type) -> _Feed | None:
    feeds: tuple[tuple[type, _Feed], ...] = (
        (AssistantMessage, History._assistant),
        (ToolCall, History._tool_call),
        (ToolCallEnded, History._tool_ended),
        (UserMessage, History._user),
        (TurnEnded, History._turn_ended),
    )
    return next((feed for base, feed in feeds if issubclass(kind, base)), None)


def conversation(records: Iterable[Record], instructions: str | None = None) -> list[ChatMessage]:
    """The chat history for a model request, from a session's records, folded at once."""
    history = History(instructions)
    history.fold(records)
    return list(history.messages())
