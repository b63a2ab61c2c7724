"""The events of a streamed answer in each HTTP provider's wire format, for the loopback
server (``support.FakeServer``): text, reasoning and tool-call pieces, so a test can build
an answer of any size on either provider."""

from __future__ import annotations

import json
from typing import Any

import attrs

from tests.helpers.support import FakeServer, Reply


def sse(data: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``data`` as JSON."""
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _openai(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _anthropic_delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_delta", "index": index, "delta": delta})


@attrs.frozen
class Wire:
    """How one provider streams each part of an answer."""

    scheme: str
    prefix: str  # the path of the API root on the server
    path: str  # the endpoint below it

    def opening(self) -> list[bytes]:
        """The events before the first piece of text."""
        if self.scheme == "openai":
            return []
        start = {"type": "message_start", "message": {"usage": {"input_tokens": 1}}}
        block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
        return [sse(start), sse(block)]

    def text(self, text: str) -> bytes:
        """A piece of the answer's text."""
        if self.scheme == "openai":
            return _openai({"content": text})
        return _anthropic_delta(0, {"type": "text_delta", "text": text})

    def reasoning(self, text: str) -> bytes:
        """A piece of reasoning (not shown), in the block after the text."""
        if self.scheme == "openai":
            return _openai({"reasoning_content": text})
        return _anthropic_delta(1, {"type": "thinking_delta", "thinking": text})

    def reasoning_start(self) -> list[bytes]:
        """What opens a reasoning block."""
        if self.scheme == "openai":
            return []
        block = {"type": "thinking", "thinking": ""}
        return [sse({"type": "content_block_start", "index": 1, "content_block": block})]

    def tool_start(self, name: str) -> bytes:
        """The start of a tool call (its id and name), in the block after the text."""
        if self.scheme == "openai":
            call = {"index": 0, "id": "call-1", "function": {"name": name, "arguments": ""}}
            return _openai({"tool_calls": [call]})
        block = {"type": "tool_use", "id": "toolu-1", "name": name, "input": {}}
        return sse({"type": "content_block_start", "index": 1, "content_block": block})

    def tool_piece(self, piece: str) -> bytes:
        """A piece of the tool call's arguments (JSON text)."""
        if self.scheme == "openai":
            return _openai({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        return _anthropic_delta(1, {"type": "input_json_delta", "partial_json": piece})

    def closing(self, reason: str = "stop") -> list[bytes]:
        """The events that finish the answer (``reason``: ``stop`` or ``tool_calls``)."""
        if self.scheme == "openai":
            return [_openai({}, reason), b"data: [DONE]\n\n"]
        stop = "tool_use" if reason == "tool_calls" else "end_turn"
        delta = {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}}
        return [sse(delta), sse({"type": "message_stop"})]

    def answer(self, text: str) -> Reply:
        """A whole answer saying ``text``."""
        return Reply(chunks=[*self.opening(), self.text(text), *self.closing()])

    def failure(self, status: int, message: str, code: str = "", **headers: str) -> Reply:
        """An error response in the provider's shape (``code``: OpenAI's ``code``,
        Anthropic's error ``type``); ``retry_after="2"`` is the header ``retry-after: 2``."""
        if self.scheme == "openai":
            body: dict[str, Any] = {"error": {"message": message, "code": code or None}}
        else:
            body = {"type": "error", "error": {"type": code or "api_error", "message": message}}
        pairs = tuple((k.replace("_", "-"), v) for k, v in headers.items())
        return Reply(status, pairs, [json.dumps(body).encode()])

    def spec(self, server: FakeServer, name: str, query: str = "") -> str:
        """The spec of model ``name`` served by ``server`` (``query``: more parameters)."""
        more = f"&{query}" if query else ""
        return f"{self.scheme}:{name}?base_url={server.url}{more}"


OPENAI_WIRE = Wire("openai", "/v1", "/chat/completions")
ANTHROPIC_WIRE = Wire("anthropic", "", "/v1/messages")
WIRES = (OPENAI_WIRE, ANTHROPIC_WIRE)
