"""What a model streams back for one request."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs

__all__ = ["FinishReason", "Finished", "ModelEvent", "TextDelta", "ToolCallRequested", "Usage"]


def _copy(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict(mapping)


class FinishReason(enum.StrEnum):
    """Why the model stopped producing output."""

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    ERROR = "error"


@attrs.frozen
class Usage:
    """Token counts of one request."""

    input_tokens: int = 0
    output_tokens: int = 0


@attrs.frozen
class TextDelta:
    """The next piece of the assistant's text."""

    text: str


@attrs.frozen
class ToolCallRequested:
    """The model asks for one tool call."""

    call_id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class Finished:
    """The last event of a stream."""

    reason: FinishReason
    usage: Usage = Usage()


ModelEvent: TypeAlias = TextDelta | ToolCallRequested | Finished
