"""The key of the ``sessions`` service."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..kernel import ServiceKey

if TYPE_CHECKING:
    from ._store import SessionStore

#: The key of the ``sessions`` service (provided by a :class:`SessionStore` plugin).
SESSIONS: Final[ServiceKey[SessionStore]] = ServiceKey("sessions")
