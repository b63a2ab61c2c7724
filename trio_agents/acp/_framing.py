"""Newline-delimited framing: bytes in, frames out (sans-IO).

Rules (two states, ``reading`` and ``discarding``):
- ``reading``: bytes accumulate until a ``\\n``; the line (without ``\\n`` and one trailing
  ``\\r``) is a frame. Blank lines are skipped.
- A line that grows past ``max_frame`` bytes yields one :class:`Oversized` and moves to
  ``discarding``: the rest of that line is dropped, bounded memory, and the next ``\\n`` moves
  back to ``reading``. So one oversized frame costs one error, and framing stays in step.
- ``close()`` ends the input: an unterminated last line is a frame too (or ``Oversized``).

Decoding a frame is strict, so nothing a client sends can raise past the edge (issue 18):
- :func:`decode_frame` takes UTF-8 JSON text only (no other encodings); nesting far past
  the interpreter's recursion limit is refused like any nesting past :data:`MAX_DEPTH`.
  Every failure is one :class:`ValueError` with a readable reason.
- :func:`find_problem` names what a parsed value must not bring in, so the request's id can
  still be read and answered: a lone surrogate in any string or key (valid JSON escapes,
  but not Unicode: no encoder, store or terminal can take them), nesting past
  :data:`MAX_DEPTH`, and ``NaN``, ``Infinity`` or a number that overflows to infinity
  (Python's parser takes them; JSON has no such numbers).

Writing is the other direction: :func:`encode_frame` is the only way a message becomes bytes,
and a serialized JSON value never holds a raw ``\\n``. It never fails on text: a lone
surrogate (which UTF-8 cannot carry) is sent as U+FFFD, with a warning. A
:class:`TextTemplate` is a message encoded once by :func:`encode_frame` with one string left
open; each of its frames is byte for byte what :func:`encode_frame` makes of the message
with that string (the string's JSON form spliced in, with the same surrogate rule), at the
cost of encoding one string instead of the whole message (a streamed reply sends one frame
per text delta).
"""

from __future__ import annotations

import json
import logging
import math
import re
from typing import Any, Final, final

import attrs

log = logging.getLogger("trio_agents.acp")

#: The default bound of one incoming frame: 16 MiB.
MAX_FRAME: Final = 16 * 1024 * 1024

#: The deepest nesting of arrays and objects a frame may have (ACP needs fewer than 10).
MAX_DEPTH: Final = 64

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


@attrs.frozen
class Oversized:
    """A frame longer than the limit was dropped."""

    limit: int


# Built once: json.dumps with options builds an encoder per call (one per frame).
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def encode_frame(message: Any) -> bytes:
    """One JSON value as one frame: compact UTF-8 JSON and a ``\\n``.

    Raises:
        TypeError: ``message`` holds a value JSON has no form for.
        ValueError: ``message`` holds ``NaN`` or an infinity, or nests too deep to encode.
    """
    try:
        text = _encode(message)
    except RecursionError:
        raise ValueError("the message nests too deep to encode as JSON") from None
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        # Only a string's content can hold a surrogate, so the replacement stays valid JSON.
        log.warning("an outgoing frame held a lone surrogate (not Unicode); sent as U+FFFD")
        return _SURROGATE.sub("\ufffd", text).encode() + b"\n"


#: The placeholder of a :class:`TextTemplate`'s open string (no real text holds it).
TEXT_SLOT: Final = "\x00text-slot\x00"
_SLOT_JSON: Final = _encode(TEXT_SLOT).encode()


@final
class TextTemplate:
    """The frames of one message that differ only in one string (see the module rules).

    Args:
        message: the message, with :data:`TEXT_SLOT` as the value of its *last* string in
            serialized order (a key or value before it may hold anything, the slot included).
    """

    __slots__ = ("_head", "_tail")

    def __init__(self, message: Any) -> None:
        head, slot, tail = encode_frame(message).rpartition(_SLOT_JSON)
        if not slot:
            raise ValueError("the message holds no TEXT_SLOT string")
        self._head = head
        self._tail = tail

    def frame(self, text: str) -> bytes:
        """The frame of the message with ``text`` in the slot."""
        literal = _encode(text)
        try:
            return self._head + literal.encode() + self._tail
        except UnicodeEncodeError:
            log.warning("an outgoing frame held a lone surrogate (not Unicode); sent as U+FFFD")
            return self._head + _SURROGATE.sub("\ufffd", literal).encode() + self._tail


def decode_frame(frame: bytes) -> Any:
    """The JSON value of one frame (see the module rules).

    Raises:
        ValueError: the frame is not UTF-8 JSON text, or nests deeper than ``MAX_DEPTH``.
    """
    text = frame.decode("utf-8")  # UnicodeDecodeError is a ValueError with the position
    try:
        return json.loads(text)
    except RecursionError:
        # Invariant: the C parser raises this cleanly at the recursion limit, which is far
        # above MAX_DEPTH; so a value deeper than the limit is refused like one above it.
        raise ValueError(f"the JSON value is nested deeper than {MAX_DEPTH} levels") from None


def find_problem(value: Any) -> str | None:
    """Why a decoded value must be refused, or ``None`` (see the module rules)."""
    # Every frame is walked: the walk that builds each value's path for the message runs
    # only when the plain walk has found that something is wrong.
    return _find_with_paths(value) if _has_problem(value) else None


def _has_problem(value: Any) -> bool:
    """Whether :func:`find_problem` has something to say: the same checks, without paths."""
    # Only containers are pushed (with their depth); the scalars in them are judged in
    # place, so a frame's many small strings cost no tuple and no loop turn of their own.
    if type(value) is not dict and type(value) is not list:
        return _bad_scalar(value)
    todo: list[tuple[dict[Any, Any] | list[Any], int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if depth >= MAX_DEPTH:
            return True
        depth += 1
        if type(item) is dict:
            for key in item:
                if not key.isascii() and _SURROGATE.search(key):
                    return True
            values: Any = item.values()
        else:
            values = item
        for v in values:
            kind = type(v)
            if kind is str:
                if not v.isascii() and _SURROGATE.search(v):
                    return True
            elif kind is dict or kind is list:
                todo.append((v, depth))
            elif _bad_scalar(v):
                return True
    return False


def _bad_scalar(item: Any) -> bool:
    kind = type(item)
    if kind is str:
        return not item.isascii() and _SURROGATE.search(item) is not None
    # Not finite, or a subclass of a JSON type: the full walk judges it.
    return not (
        kind is int or kind is bool or item is None or (kind is float and math.isfinite(item))
    )


def _find_with_paths(value: Any) -> str | None:
    # Iterative, so the walk itself cannot run out of stack. (value, path, depth)
    todo: list[tuple[Any, str, int]] = [(value, "", 0)]
    while todo:
        item, path, depth = todo.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                return f"a lone surrogate (not Unicode) in the string at {path or 'the top'}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"a number that is not finite (not JSON) at {path or 'the top'}"
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return f"the JSON value is nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, list):
                todo.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))
                continue
            for key, v in item.items():
                if not key.isascii() and _SURROGATE.search(key):
                    return f"a lone surrogate (not Unicode) in a key of {path or 'the message'}"
                todo.append((v, f"{path}.{key}" if path else key, depth + 1))
    return None


@final
class LineFramer:
    """Split a byte stream into frames.

    Args:
        max_frame: the most bytes one frame may have (the ``\\n`` excluded).
    """

    __slots__ = ("_buffer", "_closed", "_discarding", "max_frame")

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        if max_frame < 1:
            raise ValueError(f"max_frame must be at least 1 byte; got {max_frame!r}")
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._discarding = False
        self._closed = False

    @property
    def buffered(self) -> int:
        """Bytes held for the frame in progress (at most ``max_frame``)."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray) -> list[bytes | Oversized]:
        """Take ``data`` and return the frames it completed, in order.

        Raises:
            RuntimeError: after :meth:`close`.
        """
        if self._closed:
            raise RuntimeError("the framer is closed; no more input is accepted")
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            self._take(data, start, end, out)
            if newline < 0:
                return out
            self._end_line(out)
            start = newline + 1

    def close(self) -> list[bytes | Oversized]:
        """End the input; return the unterminated last frame, if any."""
        if self._closed:
            return []
        self._closed = True
        out: list[bytes | Oversized] = []
        self._end_line(out)
        return out

    def _take(
        self, data: bytes | bytearray, start: int, end: int, out: list[bytes | Oversized]
    ) -> None:
        if self._discarding or start == end:
            return
        if len(self._buffer) + (end - start) > self.max_frame:
            self._buffer.clear()
            self._discarding = True
            out.append(Oversized(self.max_frame))
            return
        self._buffer += data[start:end]

    def _end_line(self, out: list[bytes | Oversized]) -> None:
        if self._discarding:
            self._discarding = False
            return
        frame = bytes(self._buffer)
        self._buffer.clear()
        if frame.endswith(b"\r"):
            frame = frame[:-1]
        if frame.strip():
            out.append(frame)
