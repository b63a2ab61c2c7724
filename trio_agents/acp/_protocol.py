"""ACP (protocol version 1) shapes, as plain functions of plain data (sans-IO).

Rules:
- Params are read strictly: a missing or mistyped field is :class:`RpcError` ``-32602``
  naming the field; unknown fields are ignored (ACP is extensible through ``_meta``).
- A record maps to at most one ``session/update``: ``UserMessage`` → ``user_message_chunk``,
  ``AssistantMessage`` → ``agent_message_chunk``, ``ToolCall`` → ``tool_call`` (pending),
  ``ToolCallEnded`` → ``tool_call_update`` (completed or failed). Turn and inbox records map to
  nothing. Live streaming and ``session/load`` replay share these functions.
- Stop reasons: ``completed`` → ``end_turn``, ``cancelled`` and ``interrupted`` →
  ``cancelled``, ``max_steps`` → ``max_turn_requests``, ``blocked`` → ``refusal``; an
  ``error`` turn has no ACP stop reason and is answered with a JSON-RPC error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

from ..session import (
    AssistantMessage,
    Record,
    SessionInfo,
    StopReason,
    ToolCall,
    ToolCallEnded,
    UserMessage,
)
from ._jsonrpc import ErrorCode, RpcError

__all__ = [
    "PERMISSION_OPTIONS",
    "PROTOCOL_VERSION",
    "absolute_cwd",
    "agent_capabilities",
    "optional_str",
    "params_object",
    "prompt_text",
    "replay",
    "required_str",
    "session_info",
    "stop_reason",
    "text_chunk",
    "tool_call",
    "tool_call_update",
    "update_of",
]

PROTOCOL_VERSION: Final = 1

#: What ``session/request_permission`` offers before a shell command runs.
PERMISSION_OPTIONS: Final = (
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow in this session", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject in this session", "kind": "reject_always"},
)

_STOP_REASONS: Final = {
    StopReason.COMPLETED: "end_turn",
    StopReason.CANCELLED: "cancelled",
    StopReason.INTERRUPTED: "cancelled",
    StopReason.MAX_STEPS: "max_turn_requests",
    StopReason.BLOCKED: "refusal",
}


def agent_capabilities() -> dict[str, Any]:
    """What ``initialize`` announces: exactly what the bridge handles (sessions loaded,
    resumed, listed, closed and deleted; text, resource links and embedded text resources)."""
    return {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        # stdio servers need no announcement; http is the streamable HTTP transport.
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
    }


def stop_reason(reason: StopReason) -> str | None:
    """The ACP ``stopReason`` of a turn's stop reason; ``None`` for ``error``."""
    return _STOP_REASONS.get(reason)


# -- params ------------------------------------------------------------------------------------


def params_object(params: Any) -> Mapping[str, Any]:
    """The params as an object (``null`` or absent is an empty object)."""
    if params is None:
        return {}
    if not isinstance(params, Mapping):
        raise RpcError(ErrorCode.INVALID_PARAMS, "invalid params: expected an object")
    return params


def required_str(params: Mapping[str, Any], name: str) -> str:
    """The string field ``name``."""
    value = params.get(name)
    if not isinstance(value, str):
        got = "nothing" if name not in params else f"{type(value).__name__} {value!r}"
        raise RpcError(
            ErrorCode.INVALID_PARAMS, f"invalid params: {name!r} must be a string; got {got}"
        )
    return value


def optional_str(params: Mapping[str, Any], name: str) -> str | None:
    """The string field ``name``, or ``None`` when absent or null."""
    if params.get(name) is None:
        return None
    return required_str(params, name)


def absolute_cwd(params: Mapping[str, Any]) -> str:
    """The required absolute ``cwd``."""
    cwd = required_str(params, "cwd")
    if not os.path.isabs(cwd):
        raise RpcError(
            ErrorCode.INVALID_PARAMS, f"invalid params: 'cwd' must be an absolute path; got {cwd!r}"
        )
    return cwd


def prompt_text(params: Mapping[str, Any]) -> str:
    """The text of a ``session/prompt``'s content blocks, in order.

    Text blocks give their text; a resource link gives its URI (baseline ACP); an embedded
    text resource (``embeddedContext``) gives its URI on one line, then its text. Images,
    audio and binary resources are refused.
    """
    blocks = params.get("prompt")
    if not isinstance(blocks, list):
        raise RpcError(
            ErrorCode.INVALID_PARAMS, "invalid params: 'prompt' must be an array of content blocks"
        )
    parts: list[str] = []
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            parts.append(block["uri"])
        elif (
            kind == "resource"
            and isinstance(block.get("resource"), Mapping)
            and isinstance(block["resource"].get("text"), str)
            and isinstance(block["resource"].get("uri"), str)
        ):
            parts.append(f"{block['resource']['uri']}\n{block['resource']['text']}")
        else:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"invalid params: prompt[{index}] is not supported (this agent takes text, "
                f"resource_link and embedded text resource blocks; see promptCapabilities)",
            )
    return "\n".join(parts)


# -- updates -----------------------------------------------------------------------------------


def text_chunk(kind: str, text: str) -> dict[str, Any]:
    """A ``user_message_chunk`` / ``agent_message_chunk`` update."""
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _title(record: ToolCall) -> str:
    command = record.arguments.get("command")
    if record.name == "bash" and isinstance(command, str):
        return f"bash: {command}"
    return record.name


def tool_call(record: ToolCall) -> dict[str, Any]:
    """The ``tool_call`` update announcing a call (status ``pending``)."""
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": record.call_id,
        "title": _title(record),
        "kind": "execute" if record.name == "bash" else "other",
        "status": "pending",
        "rawInput": record.arguments,
    }


def tool_call_update(record: ToolCallEnded) -> dict[str, Any]:
    """The ``tool_call_update`` that closes a call with its result."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": record.call_id,
        "status": "failed" if record.is_error else "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": record.content}}],
        "rawOutput": {"content": record.content, "isError": record.is_error},
    }


def update_of(record: Record) -> dict[str, Any] | None:
    """The ``session/update`` payload of one record, or ``None`` (see the module rules)."""
    if isinstance(record, UserMessage):
        return text_chunk("user_message_chunk", record.content)
    if isinstance(record, AssistantMessage):
        return text_chunk("agent_message_chunk", record.content)
    if isinstance(record, ToolCall):
        return tool_call(record)
    if isinstance(record, ToolCallEnded):
        return tool_call_update(record)
    return None


def replay(records: Iterable[Record]) -> list[dict[str, Any]]:
    """The updates that replay a conversation, in order."""
    return [u for u in map(update_of, records) if u is not None]


def session_info(info: SessionInfo, cwd: str) -> dict[str, Any]:
    """One entry of ``session/list``."""
    entry: dict[str, Any] = {"sessionId": info.id, "cwd": cwd}
    if info.title is not None:
        entry["title"] = info.title
    if info.updated is not None:
        entry["updatedAt"] = info.updated.isoformat()
    return entry
