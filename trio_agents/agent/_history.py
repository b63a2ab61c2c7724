"""Model-visible means logged: the conversation a model sees is rebuilt from session records.

Rules:
- ``UserMessage`` → user text; ``AssistantMessage`` with the ``ToolCall`` records that follow
  it in the same step → one assistant message; ``ToolCallEnded`` → tool output.
- A tool call with no recorded result (a crash cut the turn) gets a synthetic error output, so
  every call the model made is answered.
- Records that the model never saw (inbox bookkeeping, turn markers) are skipped.
- :class:`History` folds records in incrementally, so a request costs the new records, not
  the whole history again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import final

from ..model import AssistantText, ChatMessage, SystemText, ToolCallPart, ToolOutput, UserText
from ..session import AssistantMessage, Record, ToolCall, ToolCallEnded, TurnEnded, UserMessage

__all__ = ["History", "conversation"]

_MISSING = "interrupted: no result was recorded"


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
        self._seen = 0

    def update(self, records: Sequence[Record]) -> History:
        """Fold in the records not seen yet (``records`` is the session's whole tuple)."""
        for record in records[self._seen :]:
            self._feed(record)
        self._seen = len(records)
        return self

    def messages(self) -> tuple[ChatMessage, ...]:
        """The conversation so far, with any step still open closed as it stands."""
        tail: list[ChatMessage] = []
        if self._text is not None or self._calls:
            tail.append(AssistantText(self._text or "", tuple(self._calls)))
        return (*self._messages, *tail)

    def _feed(self, record: Record) -> None:
        if isinstance(record, AssistantMessage):
            self._close_assistant()
            self._answer_missing()
            self._text = record.content
        elif isinstance(record, ToolCall):
            part = ToolCallPart(record.call_id, record.name, record.arguments)
            self._calls.append(part)
            self._open.append(part)
        elif isinstance(record, ToolCallEnded):
            self._close_assistant()
            self._answered.add(record.call_id)
            self._messages.append(
                ToolOutput(record.call_id, record.name, record.content, record.is_error)
            )
        elif isinstance(record, UserMessage):
            self._close_assistant()
            self._answer_missing()
            self._messages.append(UserText(record.content))
        elif isinstance(record, TurnEnded):
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


def conversation(records: Iterable[Record], instructions: str | None = None) -> list[ChatMessage]:
    """The chat history for a model request, from a session's records."""
    return list(History(instructions).update(tuple(records)).messages())
