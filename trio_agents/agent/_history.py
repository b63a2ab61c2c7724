"""Model-visible means logged: the conversation a model sees is rebuilt from session records.

Rules:
- ``UserMessage`` → user text; ``AssistantMessage`` with the ``ToolCall`` records that follow
  it in the same step → one assistant message; ``ToolCallEnded`` → tool output.
- A tool call with no recorded result (a crash cut the turn) gets a synthetic error output, so
  every call the model made is answered.
- An ``OutputProduced`` refused in the model's text (no ``call_id``) → the user text that told
  the model what was wrong (:func:`._output.text_feedback`); a call's answer is its tool output.
- An ``ImageAttached`` goes with the user message (``message_id``) or the tool output
  (``call_id``) it names, recorded after it; an image whose message never comes is never sent.
- Records that the model never saw (inbox bookkeeping, turn markers) are skipped.
- A tool output is re-sent at every step, so it is bounded here too: a ``ToolCallEnded``
  over the tool result cap (one stored before the registry capped results, or written by
  another program) is cut as the registry cuts (:func:`._tools.cap_result`) when it is
  folded in, once; the record itself is left as stored.
- :class:`History` folds in only the records it has not seen (``Session.records_since``), and
  :meth:`History.messages` is a :class:`Messages` view, not a copy: a model request costs the
  new records, never the length of the session. A resumed session is folded once.
- Each ``TurnStarted`` marks where its turn begins (its ``seq`` and the index of its first
  message): those marks are where a compaction may cut.
- A ``Compacted`` record replaces the conversation with the system text, its summary (as system
  text under :data:`SUMMARY_HEADING`) and the messages from the turn at ``kept_from_seq`` on.
  It builds a new message list (the views taken before stay valid) and costs the kept messages
  only. A ``kept_from_seq`` between two marks cuts at the next mark; past the last mark, no
  turn is kept (nor the step still open).
- :meth:`History.size` is the size of the conversation in characters and messages, kept up to
  date as messages are added, so metering it costs nothing per request.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeAlias, final, overload

import attrs

from ..model import (
    AssistantText,
    ChatMessage,
    ImagePart,
    SystemText,
    ToolCallPart,
    ToolOutput,
    UserText,
)
from ..session import (
    AssistantMessage,
    Compacted,
    ImageAttached,
    OutputProduced,
    Record,
    Session,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from ._output import text_feedback
from ._results import cap_result

_MISSING = "interrupted: no result was recorded"
#: The first line of the system text that carries a compaction's summary.
SUMMARY_HEADING = "Summary of the earlier conversation (it was compacted):"


def message_chars(message: ChatMessage) -> int:
    """The characters of ``message`` that a provider sends: its text, tool names, arguments."""
    if isinstance(message, AssistantText):
        return len(message.content) + sum(
            len(call.name) + len(repr(call.arguments)) for call in message.tool_calls
        )
    if isinstance(message, ToolOutput):
        return len(message.content) + len(message.name)
    return len(message.content)


@attrs.frozen
class TurnMark:
    """Where a turn begins in the conversation.

    Attributes:
        seq: the ``seq`` of the turn's ``TurnStarted`` record.
        index: the index of the turn's first message in :meth:`History.messages`.
    """

    seq: int
    index: int


@final
@attrs.define(eq=False, repr=False)
class Messages(Sequence[ChatMessage]):
    """An immutable snapshot of a conversation that shares its storage with the history.

    It is a read-only sequence equal to the tuple of the same messages (and hashes like it);
    taking it costs nothing, whatever the length of the conversation.
    """

    # Invariant: `base` is only ever appended to, so its first `length` items never change;
    # that is what makes this view a snapshot.
    _base: list[ChatMessage]
    _length: int
    _tail: ChatMessage | None = None

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
        # C iterators, not a generator: list(), sum() and zip() over a long view stay in C.
        items = itertools.islice(self._base, self._length)
        return items if self._tail is None else itertools.chain(items, (self._tail,))

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


def _system_of(instructions: str | None) -> tuple[ChatMessage, ...]:
    return (SystemText(instructions),) if instructions else ()


@final
# Converters at init only: a converter otherwise makes attrs hook every attribute set, and the
# history sets several per record it folds (+10% instructions per turn: python -m benchmarks
# --only instructions).
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class History:
    """The chat history of one session, kept up to date from its records."""

    _system: tuple[ChatMessage, ...] = attrs.field(
        default=None, converter=_system_of, alias="instructions"
    )
    _messages: list[ChatMessage] = attrs.field(init=False)
    # Invariant: _chars is the sum of message_chars() over _messages.
    _chars: int = attrs.field(init=False)
    # Invariant: sorted by seq (records are folded in seq order); indexes into _messages.
    _marks: list[TurnMark] = attrs.field(factory=list, init=False)
    _text: str | None = attrs.field(default=None, init=False)
    _calls: list[ToolCallPart] = attrs.field(factory=list, init=False)
    _open: list[ToolCallPart] = attrs.field(factory=list, init=False)
    # Trick: a dict as a set: the ids of the open calls answered so far (an empty set is 216
    # bytes, an empty dict 64, and every idle agent holds one: python -m benchmarks --only
    # memory).
    _answered: dict[str, None] = attrs.field(factory=dict, init=False)
    # Invariant: the records of the session with seq < _seen have been folded in.
    _seen: int = attrs.field(default=0, init=False)
    # The images waiting for their message, by ("message", id) or ("call", id); made by
    # the first image (most sessions have none).
    _images: dict[tuple[str, str], list[ImagePart]] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self._messages = list(self._system)
        self._chars = sum(message_chars(m) for m in self._messages)

    def update(self, session: Session) -> History:
        """Fold in the records of ``session`` not folded yet (and only those)."""
        if session.last_seq >= self._seen:  # a step asks several times; most find nothing
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

    @property
    def system(self) -> int:
        """How many leading messages are the agent's own system text (0 or 1)."""
        return len(self._system)

    def marks(self) -> tuple[TurnMark, ...]:
        """Where each turn still in the conversation begins, oldest first."""
        return tuple(self._marks)

    def size(self) -> tuple[int, int]:
        """The conversation's size: characters (see :func:`message_chars`) and messages."""
        chars, count = self._chars, len(self._messages)
        if self._text is not None or self._calls:
            chars += message_chars(AssistantText(self._text or "", tuple(self._calls)))
            count += 1
        return chars, count

    def size_after(self, compaction: Compacted) -> tuple[int, int]:
        """What :meth:`size` would be once ``compaction`` is folded in."""
        start = self._cut(compaction.kept_from_seq)
        head = self._head(compaction.summary)
        if not self._kept_turns(compaction.kept_from_seq):
            return sum(message_chars(m) for m in head), len(head)
        chars, count = self.size()
        kept = self._chars - sum(message_chars(m) for m in self._messages[:start])
        return (
            chars - self._chars + kept + sum(message_chars(m) for m in head),
            count - start + len(head),
        )

    def _head(self, summary: str) -> list[ChatMessage]:
        head = list(self._system)
        if summary:
            head.append(SystemText(f"{SUMMARY_HEADING}\n{summary}"))
        return head

    def _kept_turns(self, seq: int) -> int:
        """How many turns a cut at ``seq`` keeps."""
        return len(self._marks) - bisect.bisect_left(self._marks, seq, key=lambda mark: mark.seq)

    def _cut(self, seq: int) -> int:
        """The index of the first message kept by a cut at ``seq``."""
        at = bisect.bisect_left(self._marks, seq, key=lambda mark: mark.seq)
        return self._marks[at].index if at < len(self._marks) else len(self._messages)

    def _append(self, message: ChatMessage) -> None:
        self._messages.append(message)
        self._chars += message_chars(message)

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
        self._answered[record.call_id] = None
        content = cap_result(record.content)
        images = self._attached("call", record.call_id)
        self._append(ToolOutput(record.call_id, record.name, content, record.is_error, images))

    def _user(self, record: UserMessage) -> None:
        self._close_assistant()
        self._answer_missing()
        self._append(UserText(record.content, self._attached("message", record.message_id)))

    def _image(self, record: ImageAttached) -> None:
        key = ("message", record.message_id) if record.message_id is not None else None
        if key is None and record.call_id is not None:
            key = ("call", record.call_id)
        if key is not None:
            if self._images is None:
                self._images = {}
            self._images.setdefault(key, []).append(ImagePart(record.mime_type, record.data))

    def _attached(self, kind: str, id: str) -> tuple[ImagePart, ...]:
        if not self._images:
            return ()
        return tuple(self._images.pop((kind, id), ()))

    def _output(self, record: OutputProduced) -> None:
        if record.call_id is None and record.problems:
            self._close_assistant()
            self._answer_missing()
            self._append(UserText(text_feedback(record.problems)))

    def _turn_ended(self, record: TurnEnded) -> None:
        self._close_assistant()
        self._answer_missing()

    def _turn_started(self, record: TurnStarted) -> None:
        self._close_assistant()
        self._answer_missing()
        self._marks.append(TurnMark(record.seq, len(self._messages)))

    def _compacted(self, record: Compacted) -> None:
        # Invariant: a new list, so the Messages views taken before keep their snapshot.
        at = bisect.bisect_left(self._marks, record.kept_from_seq, key=lambda mark: mark.seq)
        start = self._cut(record.kept_from_seq)
        head = self._head(record.summary)
        shift = len(head) - start
        self._messages = [*head, *self._messages[start:]]
        self._chars = sum(message_chars(m) for m in self._messages)
        self._marks = [TurnMark(mark.seq, mark.index + shift) for mark in self._marks[at:]]
        if not self._marks:
            # No turn kept: the step still open belongs to the records replaced too.
            self._text = None
            self._calls = []
            self._open = []
            self._answered.clear()

    def _close_assistant(self) -> None:
        if self._text is not None or self._calls:
            self._append(AssistantText(self._text or "", tuple(self._calls)))
        self._text = None
        self._calls = []

    def _answer_missing(self) -> None:
        for call in self._open:
            if call.call_id not in self._answered:
                self._append(ToolOutput(call.call_id, call.name, _MISSING, True))
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
        (ImageAttached, History._image),
        (TurnEnded, History._turn_ended),
        (TurnStarted, History._turn_started),
        (Compacted, History._compacted),
        (OutputProduced, History._output),
    )
    return next((feed for base, feed in feeds if issubclass(kind, base)), None)
