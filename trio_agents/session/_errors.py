"""Errors of the session layer. Each says what went wrong and what to do about it."""

from __future__ import annotations

import trio

from .._errors import TrioAgentsError


class InvalidSessionIdError(TrioAgentsError, ValueError):
    """A session id is not filename-safe (``[A-Za-z0-9._-]{1,128}``, no leading ``.``)."""


class SessionNotFoundError(TrioAgentsError, KeyError):
    """No stored session has this id."""

    def __str__(self) -> str:
        # KeyError would show the repr of the message; show the message itself.
        return str(self.args[0]) if self.args else ""


class SessionIdInUseError(TrioAgentsError, ValueError):
    """A live (or, for a new session, a stored) session already has this id."""


class SessionExistsError(TrioAgentsError, FileExistsError):
    """A new session was given the id of a stored one (resume it, or delete it first)."""


class SessionInUseError(TrioAgentsError, trio.BusyResourceError):
    """The operation needs the session not to be live (e.g. ``delete``)."""


class SessionClosedError(TrioAgentsError, trio.ClosedResourceError):
    """The session was detached or abandoned; it takes no more records."""


class SessionStoreClosedError(TrioAgentsError, trio.ClosedResourceError):
    """The store is not running: it was never applied as a plugin, or it has closed."""


class SessionFormatError(TrioAgentsError, ValueError):
    """Stored session data cannot be read: a bad record, header or format version."""


class SessionWriteError(TrioAgentsError, OSError):
    """Writing a session to its backing storage failed; its later records are not durable."""


class UnstorableRecordError(TrioAgentsError, ValueError):
    """A record holds a value no store can keep: text that is not Unicode (a lone surrogate,
    as ``"\\ud800"`` or undecodable bytes read with ``surrogateescape`` give), ``NaN`` or an
    infinity, or an object JSON has no form for. The record is refused, so nothing is kept."""
