"""The conversation a model sees, and the tools it may call (provider-neutral values)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

import attrs

__all__ = [
    "AssistantText",
    "ChatMessage",
    "ModelRequest",
    "OutputSpec",
    "SystemText",
    "ToolCallPart",
    "ToolOutput",
    "ToolSpec",
    "UserText",
]


def _copy(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    # A private copy: a caller mutating its dict later cannot change a sent message.
    return dict(mapping)


@attrs.frozen
class ToolCallPart:
    """A tool call the model made in an assistant message."""

    call_id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class SystemText:
    """Instructions for the model."""

    content: str


@attrs.frozen
class UserText:
    """What the user said."""

    content: str


@attrs.frozen
class AssistantText:
    """What the model said, and the tools it called in the same step."""

    content: str
    tool_calls: tuple[ToolCallPart, ...] = ()


@attrs.frozen
class ToolOutput:
    """The result of one tool call, answering :class:`ToolCallPart` ``call_id``."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


ChatMessage: TypeAlias = SystemText | UserText | AssistantText | ToolOutput


@attrs.frozen
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class OutputSpec:
    """The typed final answer a request asks for: JSON that matches ``schema``.

    The same request offers the final-answer tool (the :class:`ToolSpec` named ``tool``, whose
    parameters are ``schema``). A provider with a native JSON-schema mode may use it instead:
    it leaves that tool out and the model answers with the JSON as its text. Any other
    provider sends the request as it is, and the model answers by calling the tool.
    """

    tool: str
    schema: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class ModelRequest:
    """One model call: the conversation so far and the tools on offer.

    ``messages`` is any read-only sequence: a tuple, or the agent's own snapshot view of its
    history (which costs nothing to take however long the conversation is). Providers iterate
    it; they do not change it. ``output`` is the typed final answer the request asks for, or
    ``None`` (see :class:`OutputSpec`).
    """

    messages: Sequence[ChatMessage]
    tools: tuple[ToolSpec, ...] = ()
    output: OutputSpec | None = None
