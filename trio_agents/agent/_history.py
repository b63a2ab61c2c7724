"""Model-visible means logged: the conversation a model sees is rebuilt from session records.

Rules:
- ``UserMessage`` → user text; ``AssistantMessage`` with the ``ToolCall`` records that follow
  it in the same step → one assistant message; ``ToolResult`` → tool output.
- A tool call with no recorded result (a crash cut the turn) gets a synthetic error output, so
  every call the model made is answered.
- Records that the model never saw (inbox bookkeeping, turn markers) are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model import AssistantText, ChatMessage, SystemText, ToolCallPart, ToolOutput, UserText
from ..session import AssistantMessage, Record, ToolCall, ToolResult, TurnEnded, UserMessage

__all__ = ["conversation"]


def conversation(records: Iterable[Record], instructions: str | None = None) -> list[ChatMessage]:
    """The chat history for a model request, from a session's records."""
    messages: list[ChatMessage] = [SystemText(instructions)] if instructions else []
    pending_text: str | None = None
    pending_calls: list[ToolCallPart] = []
    answered: set[str] = set()

    def close_assistant() -> None:
        nonlocal pending_text
        if pending_text is not None or pending_calls:
            messages.append(AssistantText(pending_text or "", tuple(pending_calls)))
        pending_text = None
        pending_calls.clear()

    open_calls: list[ToolCallPart] = []

    def answer_missing() -> None:
        for call in open_calls:
            if call.call_id not in answered:
                messages.append(
                    ToolOutput(call.call_id, call.name, "interrupted: no result was recorded", True)
                )
        open_calls.clear()

    for record in records:
        if isinstance(record, AssistantMessage):
            close_assistant()
            answer_missing()
            pending_text = record.content
        elif isinstance(record, ToolCall):
            part = ToolCallPart(record.call_id, record.name, record.arguments)
            pending_calls.append(part)
            open_calls.append(part)
        elif isinstance(record, ToolResult):
            close_assistant()
            answered.add(record.call_id)
            messages.append(
                ToolOutput(record.call_id, record.name, record.content, record.is_error)
            )
        elif isinstance(record, UserMessage):
            close_assistant()
            answer_missing()
            messages.append(UserText(record.content))
        elif isinstance(record, TurnEnded):
            close_assistant()
            answer_missing()
    close_assistant()
    return messages
