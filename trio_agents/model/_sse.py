"""A sans-IO decoder of server-sent events (the ``text/event-stream`` format).

Rules (the WHATWG HTML "event stream interpretation", minus reconnection):
- Bytes in, events out: ``feed(data)`` returns the events completed by ``data``; the split of
  the stream into chunks never changes the events (a chunk may end inside a UTF-8 sequence,
  inside a line, or between the ``\\r`` and ``\\n`` of one line end).
- Lines end with ``\\r\\n``, ``\\n`` or ``\\r``. A blank line dispatches the event being built;
  one with no ``data`` field is dropped. ``data`` lines are joined with ``\\n``.
- ``:comment`` lines are ignored; ``field:value`` loses one space after the colon; a line
  without a colon is a field with an empty value; unknown fields are ignored.
- ``end()`` marks the end of the stream: an event not closed by a blank line is discarded
  (it may be truncated); ``end()`` returns whether that happened.
"""

from __future__ import annotations

import codecs
from typing import final

import attrs

__all__ = ["SSEDecoder", "SSEEvent"]


@attrs.frozen
class SSEEvent:
    """One dispatched event."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


@final
class SSEDecoder:
    """Decode a ``text/event-stream`` byte stream into :class:`SSEEvent` values."""

    __slots__ = ("_data", "_decoder", "_event", "_id", "_partial", "_retry", "_skip_lf", "_start")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""  # text of the current line so far
        self._skip_lf = False  # the last chunk ended with "\r": a leading "\n" is its line end
        self._start = True  # a byte order mark is dropped at the very start only
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Take the next bytes of the stream; return the events they complete."""
        text = self._decoder.decode(data)
        if self._start and text:
            self._start = False
            text = text.removeprefix("\ufeff")
        return self._lines(text)

    def end(self) -> bool:
        """The stream ended; return whether an unfinished event was discarded."""
        # A flush can only add U+FFFD for a cut UTF-8 sequence: never a line end.
        rest = self._partial + self._decoder.decode(b"", final=True)
        truncated = bool(rest or self._data or self._event)
        self._partial = ""
        self._data.clear()
        self._event = ""
        return truncated

    def _lines(self, text: str) -> list[SSEEvent]:
        if self._skip_lf and text:
            self._skip_lf = False
            text = text.removeprefix("\n")
        events: list[SSEEvent] = []
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if text.endswith("\r"):
            self._skip_lf = True
        # Invariant: the last piece is the start of a line not yet ended ("" after a line end).
        lines[0] = self._partial + lines[0]
        self._partial = lines.pop()
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon:
            value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> SSEEvent | None:
        data, event = self._data, self._event
        self._data, self._event = [], ""
        if not data:
            return None
        return SSEEvent("\n".join(data), event or "message", self._id, self._retry)
