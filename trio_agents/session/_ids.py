"""Session ids and where sessions live by default."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from ._errors import InvalidSessionIdError

_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a valid, filename-safe session id.

    Raises:
        InvalidSessionIdError: it is not 1-128 characters of ``A-Z a-z 0-9 . _ -``, or it
            starts with ``.``.
    """
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id) or session_id[0] == ".":
        raise InvalidSessionIdError(
            f"invalid session id {session_id!r}: use 1-128 characters from A-Z a-z 0-9 . _ - "
            f"that do not start with '.'"
        )
    return session_id


def new_session_id() -> str:
    """A fresh random session id, such as ``s-3fa94c01b2de``."""
    return "s-" + secrets.token_hex(6)


def default_root() -> Path:
    """Where :class:`JsonlStore` keeps sessions when given no root.

    ``$TRIO_AGENTS_HOME/sessions``, else ``$XDG_STATE_HOME/trio-agents/sessions``, else
    ``~/.local/state/trio-agents/sessions``.
    """
    home = os.environ.get("TRIO_AGENTS_HOME")
    if home:
        return Path(home) / "sessions"
    state = os.environ.get("XDG_STATE_HOME")
    if state:
        return Path(state) / "trio-agents" / "sessions"
    return Path.home() / ".local" / "state" / "trio-agents" / "sessions"
