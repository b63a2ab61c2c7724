"""The OpenAI chat-completions wire format, sans-IO: request bodies, stream chunks, errors.

Rules:
- ``request_body`` maps provider-neutral messages and tools to the JSON the endpoint takes,
  always streaming with usage (``stream_options.include_usage``). A request that asks for a
  typed answer (``ModelRequest.output``) uses the endpoint's native JSON-schema mode:
  ``response_format: {"type": "json_schema", ...}``, ``strict`` when the schema qualifies
  (every object closed and every property required, no defaults), and the final-answer tool
  left out, so the model answers with the JSON as its text.
- ``ChunkAssembler`` takes the ``data`` of each server-sent event in order. Text deltas come
  out at once; tool-call deltas are assembled by ``index`` (the first delta of an index has
  the id and name, later ones append to the arguments JSON) and come out, parsed, when the
  stream is finished, followed by one ``Finished``.
- The stream is finished by ``[DONE]``, or by the end of the body after a ``finish_reason``
  (some servers omit ``[DONE]``). Any other end is a lost connection: :class:`ModelError`.
- A field that carries the answer with the wrong JSON type (``"content": 5``) is a
  :class:`ModelError` naming it (the rules of ``_wire``); usage counts and other choices
  stay lenient.
- Tool arguments that are not a JSON object are a :class:`ModelError` (the turn records it):
  a tool cannot run on arguments nobody can read, and guessing would hide a model fault.
  Empty arguments mean ``{}``.
- The text, the reasoning (``reasoning_content`` or ``reasoning``, which some servers stream
  and which is not shown), a refusal, and the tool-call arguments count against
  ``max_answer`` as they arrive (``_wire.AnswerBudget``).
- ``describe_failure`` turns an HTTP error response into one short message a user can act
  on, and says whether trying again may help.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, final

import attrs

from ._errors import ModelError, ModelErrorKind
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
from ._retry import Failure, reported_limit
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
    checked,
    clip,
    event_object,
    field,
)

_FINISH = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.LENGTH,
    "content_filter": FinishReason.ERROR,
}
#: Delta fields some servers stream beside the text (reasoning, a refusal): not shown, but
#: counted against the answer's bound.
_UNSHOWN = ("reasoning_content", "reasoning", "refusal")
#: Of those, the ones that carry the model's reasoning: streamed as thoughts, never answered.
_THOUGHTS = frozenset({"reasoning_content", "reasoning"})
#: Status codes worth another attempt (the same set as the official OpenAI clients).
_RETRY_STATUS = frozenset({408, 409, 429})
#: How a failure's message names its status (by default ``HTTP <status>``).
_CODES = {401: "401 Unauthorized", 403: "403 Forbidden", 404: "404", 429: "429"}


def _image_url(image: ImagePart) -> dict[str, Any]:
    """An image content part: a ``data:`` URL of its base64."""
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
    }


def _with_images(text: str, images: tuple[ImagePart, ...]) -> list[dict[str, Any]]:
    """The content parts of a user message: its text (if any), then its images."""
    parts = [{"type": "text", "text": text}] if text else []
    return parts + [_image_url(image) for image in images]


def message_json(message: ChatMessage) -> dict[str, Any]:
    """One message as the chat-completions API takes it (a tool output with images is two:
    see :func:`messages_json`)."""
    if isinstance(message, SystemText):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserText):
        if message.images:
            return {"role": "user", "content": _with_images(message.content, message.images)}
        return {"role": "user", "content": message.content}
    if isinstance(message, AssistantText):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["content"] = message.content or None
            out["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
        return out
    if isinstance(message, ToolOutput):
        # The API has no error flag on a tool message: the model reads it in the text.
        content = f"error: {message.content}" if message.is_error else message.content
        return {"role": "tool", "tool_call_id": message.call_id, "content": content}
    raise TypeError(f"not a chat message: {type(message).__name__} {message!r}")


def messages_json(messages: Iterable[ChatMessage]) -> list[dict[str, Any]]:
    """The API's ``messages`` for a conversation. A tool message is text only, so the images
    of tool outputs follow the run of tool messages they belong to, as one user message that
    names their calls."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for message in messages:
        if pending and not isinstance(message, ToolOutput):
            out.append({"role": "user", "content": pending})
            pending = []
        out.append(message_json(message))
        if isinstance(message, ToolOutput) and message.images:
            text = f"the images of the result of tool call {message.call_id} ({message.name}):"
            pending += _with_images(text, message.images)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def request_body(model: str, request: ModelRequest) -> dict[str, Any]:
    """The JSON body of a streaming ``POST /chat/completions`` for ``request``."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages_json(request.messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    output = request.output
    tools = request.tools
    if output is not None:
        tools = tuple(spec for spec in tools if spec.name != output.tool)
        schema = dict(output.schema)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": output.tool, "schema": schema, "strict": _strict(schema)},
        }
    if tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": dict(spec.parameters),
                },
            }
            for spec in tools
        ]
    return body


def _strict(schema: object) -> bool:
    """Whether ``schema`` fits OpenAI's strict structured outputs: every object closed with
    every property required, and no ``default`` (the mode refuses any other schema)."""
    if not isinstance(schema, dict):
        return True
    if "default" in schema:
        return False
    properties = schema.get("properties") or {}
    if schema.get("type") == "object" or "properties" in schema:
        if schema.get("additionalProperties") is not False:
            return False
        if set(schema.get("required", ())) != set(properties):
            return False
    parts = [*properties.values(), *schema.get("anyOf", ())]
    if isinstance(schema.get("items"), dict):
        parts.append(schema["items"])
    return all(_strict(part) for part in parts)


@final
class ChunkAssembler(StreamAssembler):
    """Turn the ``data`` of a chat-completions event stream into model events (the arguments are
    :class:`~._wire.StreamAssembler`'s)."""

    __slots__ = ("_usage",)

    STOPS = _FINISH
    CALL_PREFIX = "call"
    ARGUMENTS = "arguments that are"

    def __init__(self, where: str, max_answer: int = DEFAULT_MAX_ANSWER) -> None:
        super().__init__(where, max_answer)
        self._usage = Usage()

    def usage(self) -> Usage:
        """The token counts so far."""
        return self._usage

    def feed(self, data: str) -> list[ModelEvent]:
        """Take one event's data; return the text deltas it carries."""
        if self._done:
            return []
        if data.strip() == "[DONE]":
            self._done = True
            return []
        chunk = event_object(self._where, data)
        if "error" in chunk:
            raise ModelError(f"{self._where} reported an error mid-stream: {_error_text(chunk)}")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            self._usage = Usage(
                input_tokens=_count(usage.get("prompt_tokens")),
                output_tokens=_count(usage.get("completion_tokens")),
                cache_read_tokens=_count(cached),
            )
        events: list[ModelEvent] = []
        where = self._where
        for n, choice in enumerate(field(where, chunk, "choices", list, "choices") or []):
            if isinstance(choice, dict) and choice.get("index", 0) != 0:
                continue  # only one completion is asked for (n=1)
            at = f"choices[{n}]"
            if checked(where, choice, dict, at) is None:
                continue  # a null choice carries nothing
            delta = field(where, choice, "delta", dict, f"{at}.delta") or {}
            for key in _UNSHOWN:
                unshown = delta.get(key)
                if isinstance(unshown, str):
                    self._budget.charge(unshown)
                    if key in _THOUGHTS and unshown:
                        events.append(ThoughtDelta(unshown))
            content = field(where, delta, "content", str, f"{at}.delta.content")
            if content:
                self._budget.charge(content)
                events.append(TextDelta(content))
            parts = field(where, delta, "tool_calls", list, f"{at}.delta.tool_calls") or []
            for k, part in enumerate(parts):
                self._add_call_delta(part, f"{at}.delta.tool_calls[{k}]")
            finish = field(where, choice, "finish_reason", str, f"{at}.finish_reason")
            if finish:
                self._stop = finish
        return events

    def _add_call_delta(self, part: Any, at: str) -> None:
        part = checked(self._where, part, dict, at)
        if part is None:
            return
        index = part.get("index", len(self._calls))
        call = self._calls.setdefault(index if isinstance(index, int) else -1, PartialCall())
        call_id = field(self._where, part, "id", str, f"{at}.id")
        if call_id:
            call.call_id = call_id
        function = field(self._where, part, "function", dict, f"{at}.function") or {}
        name = field(self._where, function, "name", str, f"{at}.function.name")
        if name:
            # Invariant: a name arrives whole in one delta; a repeat is the same name.
            call.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some local servers send the object itself
            piece: str | None = json.dumps(arguments)
        else:
            piece = field(self._where, function, "arguments", str, f"{at}.function.arguments")
        if piece:
            self._budget.charge(piece)
            call.pieces.append(piece)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _error_fields(body: object) -> tuple[str, str]:
    """(message, code) of an error body in any of the shapes servers use."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message") or error.get("detail") or ""
            code = error.get("code") or error.get("type") or ""
            return str(message), str(code)
        if isinstance(error, str):
            return error, ""
        detail = body.get("detail")
        if detail:
            return str(detail), ""
    return "", ""


def _error_text(body: object) -> str:
    message, code = _error_fields(body)
    return clip(message or code or json.dumps(body))


def describe_failure(status: int, content: bytes, *, url: str, model: str) -> Failure:
    """Classify the error response ``status`` with body ``content`` from ``url``."""
    body, text = error_body(content)
    message, code = _error_fields(body)
    if not isinstance(body, dict):
        message = text
    said = f": {clip(message)}" if message else ""
    words = FailureWords(url, model, _CODES.get(status, f"HTTP {status}"), said, "OPENAI")
    if status == 401:
        return words.failure("bad_key")
    if status == 403:
        return words.failure("denied")
    if status == 404:
        if code == "model_not_found" or "model" in message.lower():
            return words.failure("no_model")
        return words.failure("not_found", root="usually ending in /v1")
    lowered = message.lower()
    if (
        code == "context_length_exceeded"
        or "context length" in lowered
        or ("context_length" in lowered)
    ):
        return attrs.evolve(words, code="context_length_exceeded").failure(
            "too_long", limit=reported_limit(message)
        )
    if status == 429 and code == "insufficient_quota":
        return Failure(
            f"{url} says the account is out of quota (429){said}", False, ModelErrorKind.AUTH
        )
    if status == 429:
        return words.failure("rate_limited")
    if status >= 500 or status in _RETRY_STATUS:
        return words.failure("server")
    return words.failure("refused")
