"""What a model streams back for one request."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypeAlias

import attrs


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
    """Token counts of one request.

    Attributes:
        input_tokens: every token the model read, the cached ones included.
        output_tokens: the tokens the model wrote.
        cache_creation_tokens: of ``input_tokens``, those written to the provider's prompt
            cache by this request.
        cache_read_tokens: of ``input_tokens``, those read from the provider's prompt cache.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0


@attrs.frozen
class TextDelta:
    """The next piece of the assistant's text."""

    text: str


@attrs.frozen
class ThoughtDelta:
    """The next piece of the model's reasoning, as a provider streams it (Anthropic's
    ``thinking``, an OpenAI-compatible server's ``reasoning_content``): shown to the user as
    it arrives, not part of the answer, not recorded, never sent back."""

    text: str


@attrs.frozen
class ToolCallRequested:
    """The model asks for one tool call."""

    call_id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class Finished:
    """The last event of a stream.

    Attributes:
        reason: why the model stopped.
        usage: the token counts of the request.
        model: the name of the model that answered, when the stream's model is not the one
            that answered (a fallback chain sets it); ``None``: the stream's own model.
    """

    reason: FinishReason
    usage: Usage = Usage()
    model: str | None = None


ModelEvent: TypeAlias = TextDelta | ThoughtDelta | ToolCallRequested | Finished
