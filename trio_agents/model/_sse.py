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
- Memory is bounded by ``max_line`` (characters): a line longer than that, or an event whose
  ``data`` grows longer, raises :class:`SSELimitError` as soon as it is seen, so a stream
  with no line end never grows without limit. Invariant: the decoder holds at most
  ``max_line`` characters of an unfinished line plus the last chunk fed.
"""

from __future__ import annotations

import codecs
from typing import final

import attrs

#: The default bound of one line, and of one event's data, in characters (1 MiB).
DEFAULT_MAX_LINE = 1 << 20


@attrs.frozen
class SSEEvent:
    """One dispatched event."""

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None


class SSELimitError(ValueError):
    """A line, or an event's data, is longer than the decoder's ``max_line``."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(f"{what} longer than {limit} characters")
        self.what = what
        self.limit = limit


@final
class SSEDecoder:
    """Decode a ``text/event-stream`` byte stream into :class:`SSEEvent` values.

    Args:
        max_line: the longest line, and the longest data of one event, in characters.
    """

    __slots__ = (
        "_data",
        "_decoder",
        "_event",
        "_id",
        "_max",
        "_partial",
        "_retry",
        "_size",
        "_skip_lf",
        "_start",
    )

    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError(f"max_line must be a whole number >= 1; got {max_line!r}")
        self._max = max_line
        self._size = 0  # characters of data in the event being built
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
        self._size = 0
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
        if len(self._partial) > self._max:
            raise SSELimitError("a line", self._max)
        for line in lines:
            if len(line) > self._max:
                raise SSELimitError("a line", self._max)
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
            self._size += len(value) + 1
            if self._size > self._max + 1:
                raise SSELimitError("the data of an event", self._max)
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
        self._data, self._event, self._size = [], "", 0
        if not data:
            return None
        return SSEEvent("\n".join(data), event or "message", self._id, self._retry)
