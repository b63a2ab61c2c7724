"""The bounded output buffer of one process, sans-IO.

Rules:
- ``feed`` appends bytes; when the unread bytes exceed the cap, the oldest are dropped and
  counted, so a reader always gets the newest output and knows how much it missed.
- ``take`` returns the unread text and the dropped count since the previous ``take``, and
  empties both. Decoding is incremental (a UTF-8 sequence split across reads is kept whole);
  after a drop the decoder restarts, since its pending bytes were cut off.
"""

from __future__ import annotations

import codecs
from typing import final


@final
class OutputBuffer:
    """Unread output, at most ``cap`` bytes of it."""

    __slots__ = ("_cap", "_decoder", "_dropped", "_unread")

    def __init__(self, cap: int) -> None:
        if cap < 1:
            raise ValueError(f"the output cap is a positive number of bytes; got {cap}")
        self._cap = cap
        self._unread = bytearray()
        self._dropped = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    @property
    def cap(self) -> int:
        """The most unread bytes kept."""
        return self._cap

    def feed(self, data: bytes | bytearray) -> None:
        """Append ``data``, dropping the oldest unread bytes beyond the cap."""
        self._unread += data
        excess = len(self._unread) - self._cap
        if excess > 0:
            del self._unread[:excess]
            self._dropped += excess

    def take(self, *, final: bool = False) -> tuple[str, int]:
        """The unread output as text and how many bytes were dropped; both reset.

        Args:
            final: no more bytes will come, so a trailing partial sequence is flushed.
        """
        data, dropped = bytes(self._unread), self._dropped
        self._unread.clear()
        self._dropped = 0
        if dropped:
            self._decoder.reset()
        return self._decoder.decode(data, final=final), dropped
