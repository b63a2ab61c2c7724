"""ACP (protocol version 1) shapes, as plain functions of plain data (sans-IO).

Rules:
- Params are read strictly: a missing or mistyped field is :class:`RpcError` ``-32602``
  naming the field; unknown fields are ignored (ACP is extensible through ``_meta``).
- Records map to ``session/update`` payloads (:class:`UpdateMapper`): ``UserMessage`` →
  ``user_message_chunk``, ``AssistantMessage`` → ``agent_message_chunk``, ``ToolCall`` →
  ``tool_call`` (pending, with its ``kind``, the file it touches as ``locations`` and, for a
  write or an edit, the change asked for as ``diff`` content), ``ToolCallEnded`` →
  ``tool_call_update`` (completed or failed; a write's or an edit's ``diff`` of the whole file
  when the live bridge saw it, then the text), followed by a ``plan`` update for a ``plan``
  call that succeeded. Turn and inbox records map to nothing. Live streaming and
  ``session/load`` replay share the mapper, so a loaded session shows its plan.
- Paths in ``locations`` and ``diff`` are absolute: relative ones are taken from the session's
  ``cwd``.
- Stop reasons: ``completed`` → ``end_turn``, ``cancelled`` and ``interrupted`` →
  ``cancelled``, ``max_steps`` → ``max_turn_requests``, ``blocked`` → ``refusal``; an
  ``error`` turn has no ACP stop reason and is answered with a JSON-RPC error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Final, final

from ..cancel import BudgetExhausted, CancelCause
from ..model import ImageError, ImagePart
from ..session import (
    AssistantMessage,
    Record,
    SessionInfo,
    StopReason,
    ToolCall,
    ToolCallEnded,
    UserMessage,
)
from ..workspace import PlanEntry, plan_entries
from ._jsonrpc import ErrorCode, RpcError

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
    resumed, listed, closed and deleted; text, images, resource links and embedded text
    resources)."""
    return {
        "loadSession": True,
        "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
        # stdio servers need no announcement; http is the streamable HTTP transport.
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
    }


def stop_reason(reason: StopReason, cause: CancelCause | None = None) -> str | None:
    """The ACP ``stopReason`` of a turn's stop reason and cause; ``None`` for ``error``.

    A turn stopped by a spent budget answers ``max_tokens`` for a token or cost budget and
    ``max_turn_requests`` for the others (requests, tool calls, turns, seconds).
    """
    if isinstance(cause, BudgetExhausted) and reason is StopReason.CANCELLED:
        return "max_tokens" if cause.limit in _TOKEN_LIMITS else "max_turn_requests"
    return _STOP_REASONS.get(reason)


_TOKEN_LIMITS: Final = frozenset({"input_tokens", "output_tokens", "tokens", "cost"})


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
    text resource (``embeddedContext``) gives its URI on one line, then its text; an image
    gives no text (:func:`prompt_images`). Audio and binary resources are refused.
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
        elif kind == "image":
            continue
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
                f"image, resource_link and embedded text resource blocks; see "
                f"promptCapabilities)",
            )
    return "\n".join(parts)


def prompt_images(params: Mapping[str, Any]) -> tuple[ImagePart, ...]:
    """The images of a ``session/prompt``'s content blocks, in order (base64 ``data`` with
    its ``mimeType``, each checked: :class:`~trio_agents.model.ImagePart`)."""
    blocks = params.get("prompt")
    images: list[ImagePart] = []
    for index, block in enumerate(blocks if isinstance(blocks, list) else ()):
        if not isinstance(block, Mapping) or block.get("type") != "image":
            continue
        mime, data = block.get("mimeType"), block.get("data")
        if not isinstance(mime, str) or not isinstance(data, str):
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"invalid params: prompt[{index}] is an image without a string 'mimeType' "
                f"and 'data' (base64)",
            )
        try:
            images.append(ImagePart(mime, data))
        except ImageError as exc:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, f"invalid params: prompt[{index}]: {exc}"
            ) from None
    return tuple(images)


# -- updates -----------------------------------------------------------------------------------


def text_chunk(kind: str, text: str) -> dict[str, Any]:
    """A ``user_message_chunk`` / ``agent_message_chunk`` update."""
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


#: The ACP ``kind`` of each built-in tool (every other tool is ``other``).
_KINDS: Final = {
    "bash": "execute",
    "bash_output": "execute",
    "bash_kill": "execute",
    "bash_unsandboxed": "execute",
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "list_files": "search",
    "glob": "search",
    "grep": "search",
    "plan": "think",
    "task": "think",
    "task_output": "think",
    "task_cancel": "think",
}
#: The tools whose ``path`` argument names the one file they touch.
_FILE_TOOLS: Final = frozenset({"read_file", "write_file", "edit_file"})
#: The longest session title (the stores' rule: the first line of the first message).
_TITLE_LENGTH: Final = 60


def tool_kind(name: str) -> str:
    """The ACP tool kind of the tool ``name``."""
    return _KINDS.get(name, "other")


def _file_path(arguments: Mapping[str, Any], cwd: str | None) -> str | None:
    path = arguments.get("path")
    if not isinstance(path, str) or not path or "\0" in path:
        return None
    if cwd is None and not os.path.isabs(path):
        return None
    return os.path.normpath(os.path.join(cwd or "/", path))


def _title(name: str, arguments: Mapping[str, Any]) -> str:
    """``bash: ls``, ``edit_file: src/a.py``, ``grep: TODO``, ``task: reviewer``; another
    tool: its name."""
    if name.startswith("bash"):
        key = "command"
    elif name in _FILE_TOOLS or name == "list_files":
        key = "path"
    elif name == "task":
        key = "agent"
    else:
        key = "pattern" if name in ("glob", "grep") else ""
    value = arguments.get(key)
    return f"{name}: {value}" if isinstance(value, str) else name


def diff_content(path: str, old_text: str | None, new_text: str) -> dict[str, Any]:
    """A ``diff`` tool call content (``oldText`` null: a new file)."""
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def tool_call_start(
    name: str, call_id: str, arguments: Mapping[str, Any], cwd: str | None
) -> dict[str, Any]:
    """A tool call as it is announced (status ``pending``): kind, title, the file it touches
    (``locations``, absolute from ``cwd``) and, for ``write_file``/``edit_file``, the change
    its arguments ask for as ``diff`` content."""
    call: dict[str, Any] = {
        "toolCallId": call_id,
        "title": _title(name, arguments),
        "kind": tool_kind(name),
        "status": "pending",
        "rawInput": dict(arguments),
    }
    path = _file_path(arguments, cwd) if name in _FILE_TOOLS else None
    if path is not None:
        location: dict[str, Any] = {"path": path}
        offset = arguments.get("offset")
        if name == "read_file" and isinstance(offset, int) and not isinstance(offset, bool):
            location["line"] = max(offset, 1)
        call["locations"] = [location]
        old, new = arguments.get("old_text"), arguments.get("new_text")
        content = arguments.get("content")
        if name == "edit_file" and isinstance(old, str) and isinstance(new, str):
            call["content"] = [diff_content(path, old, new)]
        elif name == "write_file" and isinstance(content, str):
            call["content"] = [diff_content(path, None, content)]
    return call


def tool_call(record: ToolCall, cwd: str | None = None) -> dict[str, Any]:
    """The ``tool_call`` update announcing a call (status ``pending``)."""
    return {
        "sessionUpdate": "tool_call",
        **tool_call_start(record.name, record.call_id, record.arguments, cwd),
    }


def in_progress(call_id: str, content: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The ``tool_call_update`` saying a call started running (with ``content``, if any)."""
    update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"}
    listed = [dict(c) for c in content]
    return {**update, "content": listed} if listed else update


def child_progress(call_id: str, text: str) -> dict[str, Any]:
    """The ``tool_call_update`` of a ``task`` call whose child is answering: ``in_progress``,
    with the child's text so far as its content."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "in_progress",
        "content": [{"type": "content", "content": {"type": "text", "text": text}}],
    }


def tool_call_update(
    record: ToolCallEnded, diffs: Iterable[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """The ``tool_call_update`` that closes a call with its result (after the ``diff``
    contents of the files it changed)."""
    text = {"type": "content", "content": {"type": "text", "text": record.content}}
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": record.call_id,
        "status": "failed" if record.is_error else "completed",
        "content": [*(dict(d) for d in diffs), text],
        "rawOutput": {"content": record.content, "isError": record.is_error},
    }


def plan_update(entries: Iterable[PlanEntry]) -> dict[str, Any]:
    """A ``plan`` update: the whole plan, each entry's content, priority and status."""
    return {
        "sessionUpdate": "plan",
        "entries": [
            {"content": e.content, "priority": e.priority, "status": e.status} for e in entries
        ],
    }


def usage_update(used: int, size: int) -> dict[str, Any]:
    """A ``usage_update``: the tokens in the context and the window's size."""
    return {"sessionUpdate": "usage_update", "used": used, "size": size}


def session_title(content: str) -> str | None:
    """A session's title from its first message: its first non-empty line, at most 60
    characters (what the stores list)."""
    line = content.strip().splitlines()[0] if content.strip() else ""
    if not line:
        return None
    return line if len(line) <= _TITLE_LENGTH else line[: _TITLE_LENGTH - 1] + "…"


def available_commands_update(
    commands: Iterable[tuple[str, str, str | None]],
) -> dict[str, Any]:
    """An ``available_commands_update`` of ``(name, description, input hint or None)``."""
    listed = []
    for name, description, hint in commands:
        command: dict[str, Any] = {"name": name, "description": description}
        if hint is not None:
            command["input"] = {"hint": hint}
        listed.append(command)
    return {"sessionUpdate": "available_commands_update", "availableCommands": listed}


def session_info_update(title: str) -> dict[str, Any]:
    """A ``session_info_update`` giving the session's title."""
    return {"sessionUpdate": "session_info_update", "title": title}


@final
class UpdateMapper:
    """The updates of one session's records, in order (live and in a replay).

    It remembers the calls still open, so that a call's end carries the ``diff`` of the files
    it changed (told with :meth:`file_changed`) and the client's terminal it ran in
    (:meth:`attach`), and a ``plan`` call's end sends the plan.
    """

    __slots__ = ("_calls", "_cwd", "_diffs")

    def __init__(self, cwd: str | None) -> None:
        self._cwd = cwd
        self._calls: dict[str, ToolCall] = {}
        self._diffs: dict[str, list[dict[str, Any]]] = {}

    def file_changed(self, call_id: str, path: str, old_text: str | None, new_text: str) -> None:
        """The open call ``call_id`` changed the file ``path``."""
        self.attach(call_id, diff_content(path, old_text, new_text))

    def attach(self, call_id: str, content: Mapping[str, Any]) -> None:
        """Show ``content`` (a diff, a client's terminal) in the open call ``call_id``'s end."""
        if call_id in self._calls:
            self._diffs.setdefault(call_id, []).append(dict(content))

    def updates(self, record: Record) -> list[dict[str, Any]]:
        """The ``session/update`` payloads of ``record`` (see the module rules)."""
        if isinstance(record, UserMessage):
            return [text_chunk("user_message_chunk", record.content)]
        if isinstance(record, AssistantMessage):
            return [text_chunk("agent_message_chunk", record.content)]
        if isinstance(record, ToolCall):
            self._calls[record.call_id] = record
            return [tool_call(record, self._cwd)]
        if isinstance(record, ToolCallEnded):
            call = self._calls.pop(record.call_id, None)
            diffs = self._diffs.pop(record.call_id, None)
            if diffs is None and call is not None and not record.is_error:
                # Replayed (no live change was seen): the change the call's arguments asked
                # for, so a loaded session still shows it (a write's old text is unknown).
                asked = tool_call_start(call.name, call.call_id, call.arguments, self._cwd)
                diffs = asked.get("content", [])
            out = [tool_call_update(record, diffs or ())]
            if call is not None and record.name == "plan" and not record.is_error:
                entries = plan_entries(call.arguments)
                if entries is not None:
                    out.append(plan_update(entries))
            return out
        return []


def update_of(record: Record) -> dict[str, Any] | None:
    """The first ``session/update`` payload of one record alone, or ``None``."""
    updates = UpdateMapper(None).updates(record)
    return updates[0] if updates else None


def replay(records: Iterable[Record], cwd: str | None = None) -> list[dict[str, Any]]:
    """The updates that replay a conversation, in order."""
    mapper = UpdateMapper(cwd)
    return [u for record in records for u in mapper.updates(record)]


def session_info(info: SessionInfo, cwd: str) -> dict[str, Any]:
    """One entry of ``session/list``."""
    entry: dict[str, Any] = {"sessionId": info.id, "cwd": cwd}
    if info.title is not None:
        entry["title"] = info.title
    if info.updated is not None:
        entry["updatedAt"] = info.updated.isoformat()
    return entry
