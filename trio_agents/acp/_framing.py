"""Newline-delimited framing: bytes in, frames out (sans-IO).

Rules (two states, ``reading`` and ``discarding``):
- ``reading``: bytes accumulate until a ``\\n``; the line (without ``\\n`` and one trailing
  ``\\r``) is a frame. Blank lines are skipped.
- A line that grows past ``max_frame`` bytes yields one :class:`Oversized` and moves to
  ``discarding``: the rest of that line is dropped, bounded memory, and the next ``\\n`` moves
  back to ``reading``. So one oversized frame costs one error, and framing stays in step.
- ``close()`` ends the input: an unterminated last line is a frame too (or ``Oversized``).

Writing is the other direction: :func:`encode_frame` is the only way a message becomes bytes,
and a serialized JSON value never holds a raw ``\\n``.
"""

from __future__ import annotations

import json
from typing import Any, Final, final

import attrs

__all__ = ["MAX_FRAME", "LineFramer", "Oversized", "encode_frame"]

#: The default bound of one incoming frame: 16 MiB.
MAX_FRAME: Final = 16 * 1024 * 1024


@attrs.frozen
class Oversized:
    """A frame longer than the limit was dropped."""

    limit: int


def encode_frame(message: Any) -> bytes:
    """One JSON value as one frame: compact UTF-8 JSON and a ``\\n``."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


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
