"""The Anthropic Messages API wire format, sans-IO: request bodies, stream events, errors.

Rules:
- ``request_body`` maps provider-neutral messages and tools to the JSON ``POST /v1/messages``
  takes, always streaming, with ``max_tokens`` (the API requires it), and with prompt-cache
  breakpoints (``cache_control: {"type": "ephemeral"}``, at most 4 as the API allows) unless
  told not to: on the last tool, on the system text (then a list of one text block), and on
  the last block of the last two user messages (the end of this request, which the next
  step resends as its prefix, and the end of the previous one, where this request finds
  its cached prefix). A prefix below the model's minimum is simply not cached;
  - system texts go to the ``system`` field (joined by blank lines), never into ``messages``;
  - a tool output is a ``tool_result`` block (``is_error`` when the tool failed) in a user
    message; an assistant's tool calls are ``tool_use`` blocks after its text;
  - consecutive messages of one role are merged into one message, as the API requires
    (alternating roles); in a user message the ``tool_result`` blocks come first;
  - empty text blocks are left out (the API refuses them), and a message left with no
    block is dropped;
  - a request that asks for a typed answer (``ModelRequest.output``) keeps the final-answer
    tool and sets ``tool_choice: {"type": "any"}`` (the API has no JSON-schema mode): the
    model must call a tool, its own tools or the final answer.
- ``EventAssembler`` takes each server-sent event (its ``type`` is the one in the data).
  Text deltas come out at once; a ``tool_use`` block is assembled from its
  ``content_block_start`` and the ``input_json_delta`` pieces of its index, and comes out,
  parsed, when the message is finished, followed by one ``Finished`` with the stop reason
  (``message_delta``) and the usage (``message_start``, updated by ``message_delta``; the
  input counts include the cached tokens).
- The stream is finished by ``message_stop``, or by the end of the body after a stop reason.
  Any other end is a lost connection: :class:`ModelError`. An ``error`` event is a
  :class:`StreamFailure`, retryable when it says the API is overloaded.
- A field that carries the answer with the wrong JSON type (``"text": 5``) is a
  :class:`ModelError` naming it (the rules of ``_wire``); usage counts stay lenient.
- Tool input that is not a JSON object is a :class:`ModelError`: a tool cannot run on
  arguments nobody can read. No input at all means ``{}``.
- The text, the thinking (``thinking_delta``: a :class:`ThoughtDelta`; ``signature_delta``:
  not shown) and the tool
  input (pieces, or the object a ``tool_use`` block starts with) count against
  ``max_answer`` as they arrive (``_wire.AnswerBudget``).
- ``describe_failure`` turns an HTTP error response into one short line a user can act on,
  and says whether trying again may help (429, 529 overloaded, 408, 409, 5xx; the server's
  ``x-should-retry`` header overrides).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, final

from ._errors import ModelErrorKind
from ._http_failures import FailureWords, error_body
from ._messages import (
    AssistantText,
    ChatMessage,
    ImagePart,
    ModelRequest,
    SystemText,
    ToolOutput,
    UserText,
)
from ._retry import Failure, StreamFailure, reported_limit
from ._stream import (
    FinishReason,
    ModelEvent,
    TextDelta,
    ThoughtDelta,
    Usage,
)
from ._wire import (
    DEFAULT_MAX_ANSWER,
    PartialCall,
    StreamAssembler,
    clip,
    event_object,
    field,
)

_STOP = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "pause_turn": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_CALLS,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.ERROR,
}
_RETRY_STATUS = frozenset({408, 409, 429, 529})
#: The kind of failure of each retryable ``error`` event of a stream.
_RETRY_ERRORS = {
    "overloaded_error": ModelErrorKind.OVERLOADED,
    "api_error": ModelErrorKind.SERVER,
    "rate_limit_error": ModelErrorKind.RATE_LIMITED,
}
#: What the API says when a request does not fit the window (the prompt alone, or with
#: ``max_tokens``: ``input length and `max_tokens` exceed context limit``).
_TOO_LONG = ("prompt is too long", "context window", "exceed context limit")
#: The string field of each delta type that is not shown but counts against the bound.
_UNSHOWN = {"thinking_delta": "thinking", "signature_delta": "signature"}
_INPUT_COUNTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _image(image: ImagePart) -> dict[str, Any]:
    """An ``image`` content block with its base64 source."""
    source = {"type": "base64", "media_type": image.mime_type, "data": image.data}
    return {"type": "image", "source": source}


def _blocks(message: ChatMessage) -> tuple[str, list[dict[str, Any]]]:
    """The role and content blocks of one non-system message."""
    if isinstance(message, UserText):
        text = [{"type": "text", "text": message.content}]
        return "user", text + [_image(image) for image in message.images]
    if isinstance(message, AssistantText):
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        blocks += [
            {"type": "tool_use", "id": c.call_id, "name": c.name, "input": dict(c.arguments)}
            for c in message.tool_calls
        ]
        return "assistant", blocks
    if isinstance(message, ToolOutput):
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.call_id}
        if message.images:
            # A result with images is a list of blocks: its text (if any), then the images.
            text = [{"type": "text", "text": message.content}] if message.content else []
            result["content"] = text + [_image(image) for image in message.images]
        elif message.content:
            result["content"] = message.content
        if message.is_error:
            result["is_error"] = True
        return "user", [result]
    raise TypeError(f"not a chat message: {type(message).__name__} {message!r}")


def conversation(messages: Sequence[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """The ``system`` text and the ``messages`` list of the API for ``messages``."""
    system: list[str] = []
    merged: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemText):
            if message.content:
                system.append(message.content)
            continue
        role, blocks = _blocks(message)
        blocks = [b for b in blocks if b["type"] != "text" or b["text"]]
        if not blocks:
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": blocks})
    for entry in merged:
        if entry["role"] == "user":
            # Invariant: the API takes tool results first in a user message; sort() is stable.
            entry["content"].sort(key=lambda b: b["type"] != "tool_result")
    return "\n\n".join(system), merged


def _cache_mark() -> dict[str, str]:
    """A prompt-cache breakpoint: the prefix up to and including its block is cached."""
    return {"type": "ephemeral"}


def request_body(
    model: str, request: ModelRequest, *, max_tokens: int, cache: bool = True
) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /v1/messages`` for ``request``, with prompt-cache
    breakpoints when ``cache`` (see the module rules)."""
    system, messages = conversation(request.messages)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True}
    if system:
        body["system"] = system
        if cache:
            body["system"] = [{"type": "text", "text": system, "cache_control": _cache_mark()}]
    body["messages"] = messages
    if request.tools:
        body["tools"] = [
            {"name": s.name, "description": s.description, "input_schema": dict(s.parameters)}
            for s in request.tools
        ]
        if cache:
            body["tools"][-1]["cache_control"] = _cache_mark()
        if request.output is not None:
            body["tool_choice"] = {"type": "any"}
    if cache:
        # The end of this request (its last user message) is the prefix of the next one, and
        # the end of the previous request (the user message before) is where it is read from.
        users = [m for m in messages if m["role"] == "user"][-2:]
        for message in users:
            message["content"][-1]["cache_control"] = _cache_mark()
    return body


@final
class EventAssembler(StreamAssembler):
    """Turn the events of a Messages API stream into model events (the arguments are
    :class:`~._wire.StreamAssembler`'s)."""

    __slots__ = ("_counts",)

    STOPS = _STOP
    CALL_PREFIX = "toolu"
    ARGUMENTS = "input that is"

    def __init__(self, where: str, max_answer: int = DEFAULT_MAX_ANSWER) -> None:
        super().__init__(where, max_answer)
        self._counts: dict[str, int] = {}

    def feed(self, data: str) -> list[ModelEvent]:
        """Take one event's data; return the text deltas it carries.

        Raises:
            StreamFailure: the event is an ``error``.
            ModelError: the event is not a JSON object.
        """
        if self._done:
            return []
        event = event_object(self._where, data)
        kind = event.get("type")
        if kind == "content_block_delta":
            return self._delta(event)
        if kind == "content_block_start":
            return self._start(event)
        if kind == "message_start":
            self._count(_fields(_fields(event.get("message")).get("usage")))
        elif kind == "message_delta":
            self._count(_fields(event.get("usage")))
            delta = field(self._where, event, "delta", dict, "message_delta.delta") or {}
            stop = field(self._where, delta, "stop_reason", str, "message_delta.delta.stop_reason")
            if stop:
                self._stop = stop
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            error_type, message = _error_fields(event)
            raise StreamFailure(
                f"{self._where} reported an error mid-stream "
                f"({error_type or 'error'}): {message or 'no message'}",
                retryable=error_type in _RETRY_ERRORS,
                kind=_RETRY_ERRORS.get(error_type, ModelErrorKind.BROKEN),
            )
        return []  # ping, content_block_stop and unknown events carry nothing to show

    def _delta(self, event: dict[str, Any]) -> list[ModelEvent]:
        at = "content_block_delta.delta"
        delta = field(self._where, event, "delta", dict, at) or {}
        kind = delta.get("type")
        if kind == "text_delta":
            text = field(self._where, delta, "text", str, f"{at}.text")
            return self._text(text)
        if kind == "input_json_delta":
            call = self._calls.get(self._index(event, "content_block_delta"))
            piece = field(self._where, delta, "partial_json", str, f"{at}.partial_json")
            if call is not None and piece:
                self._budget.charge(piece)
                call.pieces.append(piece)
        elif isinstance(kind, str) and kind in _UNSHOWN:
            unshown = delta.get(_UNSHOWN[kind])
            if isinstance(unshown, str):
                self._budget.charge(unshown)
                if kind == "thinking_delta" and unshown:
                    return [ThoughtDelta(unshown)]  # shown as a thought, not the answer
        return []  # signature and citation deltas are not part of the answer text

    def _start(self, event: dict[str, Any]) -> list[ModelEvent]:
        at = "content_block_start.content_block"
        block = field(self._where, event, "content_block", dict, at) or {}
        if block.get("type") == "tool_use":
            start_input = block.get("input")
            if start_input:
                self._budget.charge(json.dumps(start_input))
            self._calls[self._index(event, "content_block_start")] = PartialCall(
                field(self._where, block, "id", str, f"{at}.id") or "",
                field(self._where, block, "name", str, f"{at}.name") or "",
                start_input,
            )
        elif block.get("type") == "text":
            # The API starts text blocks empty; text a server puts there is not lost.
            return self._text(field(self._where, block, "text", str, f"{at}.text"))
        return []

    def _text(self, text: str | None) -> list[ModelEvent]:
        if not text:
            return []
        self._budget.charge(text)
        return [TextDelta(text)]

    def _index(self, event: dict[str, Any], kind: str) -> int:
        index = field(self._where, event, "index", int, f"{kind}.index")
        return -1 if index is None else index

    def _count(self, usage: dict[str, Any]) -> None:
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self._counts[key] = value  # message_delta counts are cumulative

    def usage(self) -> Usage:
        """The token counts so far."""
        counts = self._counts
        return Usage(
            input_tokens=sum(counts.get(k, 0) for k in _INPUT_COUNTS),
            output_tokens=counts.get("output_tokens", 0),
            cache_creation_tokens=counts.get("cache_creation_input_tokens", 0),
            cache_read_tokens=counts.get("cache_read_input_tokens", 0),
        )


def _fields(value: object) -> dict[str, Any]:
    """A JSON object of an event's metadata, or an empty one: a malformed value is ignored."""
    return value if isinstance(value, dict) else {}


def _error_fields(body: object) -> tuple[str, str]:
    """(type, message) of an error body ``{"type": "error", "error": {...}}``, on one line."""
    error = _fields(_fields(body).get("error"))
    message = " ".join(str(error.get("message") or "").split())
    return str(error.get("type") or ""), clip(message)


def describe_failure(
    status: int, content: bytes, headers: Mapping[str, str], *, url: str, model: str
) -> Failure:
    """Classify the error response ``status`` with body ``content`` from ``url``."""
    body, text = error_body(content)
    error_type, message = _error_fields(body)
    if not isinstance(body, dict):
        message = clip(text)
    failure = _classify(status, error_type, message, url, model)
    should = headers.get("x-should-retry", "").strip().lower()
    if should in ("true", "false"):
        return Failure(failure.message, should == "true")
    return failure


def _classify(status: int, error_type: str, message: str, url: str, model: str) -> Failure:
    code = f"{status} {error_type}" if error_type else f"HTTP {status}"
    said = f": {message}" if message else ""
    words = FailureWords(url, model, code, said, "ANTHROPIC")
    lowered = message.lower()
    if status == 401:
        return words.failure("bad_key")
    if status == 403:
        return words.failure("denied")
    if status == 404:
        if "model" in lowered:
            return words.failure("no_model")
        return words.failure("not_found", root="without /v1")
    if any(phrase in lowered for phrase in _TOO_LONG):
        return words.failure("too_long", limit=reported_limit(message))
    if status == 413:
        return Failure(
            f"{url} refused a request this large ({code}){said}",
            False,
            ModelErrorKind.CONTEXT_TOO_LONG,
        )
    if status == 429:
        return words.failure("rate_limited")
    if status == 529 or error_type == "overloaded_error":
        return Failure(
            f"{url} is overloaded ({code}){said}; try again later", True, ModelErrorKind.OVERLOADED
        )
    if status >= 500 or status in _RETRY_STATUS:
        return words.failure("server")
    if "max_tokens" in lowered:
        return words.failure(
            "refused", then="; set a smaller max_tokens (anthropic:MODEL?max_tokens=N)"
        )
    return words.failure("refused")
