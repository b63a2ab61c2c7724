"""Live events of the session layer. Events are frozen attrs classes."""

from __future__ import annotations

import attrs

from ._errors import SessionWriteError
from ._records import Record


@attrs.frozen
class SessionCreated:
    """A session was published and announced (``SessionStore.announce``)."""

    session_id: str


@attrs.frozen
class SessionAppended:
    """A record was appended to a live session (so ``TurnEnded`` is observable live)."""

    session_id: str
    record: Record


@attrs.frozen
class SessionFlushed:
    """A flush made every record up to ``seq`` durable (``-1``: the session has none)."""

    session_id: str
    seq: int


@attrs.frozen
class SessionDisposed:
    """An announced session left the store (detached, or its creation rolled back)."""

    session_id: str


@attrs.frozen
class SessionWriteFailed:
    """Writing a live session failed: it writes nothing more, and its flushes raise ``error``
    (emitted once, when the write fails, so a command can stop at once instead of going on)."""

    session_id: str
    error: SessionWriteError
