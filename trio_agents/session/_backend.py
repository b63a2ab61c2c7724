"""The backend's side of a session store: the hooks a backend implements, typed by its state.

Rules:
- A backend keeps its own state per session, of one type ``S``: ``_begin`` makes it when the
  store prepares or loads a session, and the session holds it (``_state(session)`` gives it
  back, typed). Nothing a backend keeps of a session lives in a map of its own that the
  session could not outlive (an error kept there, with its traceback, would hold the session
  forever).
- The store (:mod:`._store`) calls the hooks; it owns the session's lifecycle, the duplicate
  check, the events and the ownership of sessions. A backend reads only the public side of a
  session (``id``, ``state``, ``resumed``, ``records``, ``records_since``).
"""

from __future__ import annotations

import abc
import builtins
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, cast

import attrs
from typing_extensions import TypeVar

from ._entry import Entry
from ._errors import SessionNotFoundError
from ._records import Record
from ._session import Session
from ._summary import SessionInfo

if TYPE_CHECKING:
    from ..kernel import Context

#: The backend's state of one session (``object`` for a store whose type does not say).
S = TypeVar("S", covariant=True, default=object)


@attrs.frozen
class Stored:
    """What a backend read of one stored session.

    Attributes:
        records: the stored records, in order.
        note: what else the backend wants to know when the session is tracked (what a
            resume must repair, say); the store hands it to ``_begin`` unread.
    """

    records: builtins.list[Record]
    note: object = None


class StoreBackend(abc.ABC, Generic[S]):
    """The hooks of a session store's backend (see the module's rules); ``SessionStore``
    subclasses this, and a backend subclasses ``SessionStore[ItsState]``."""

    async def _open(self, ctx: Context) -> None:
        """Start the backend (its background tasks go on ``ctx``'s fiber)."""

    def _state(self, session: Session) -> S:
        """The backend's state for ``session`` (what ``_begin`` made), in a backend's hooks."""
        # Invariant: the store checked, when the session came in, that it made this entry.
        return cast("Entry[S]", session._store_entry).backend

    @abc.abstractmethod
    def _begin(self, session: Session, stored: Stored | None) -> S:
        """A session was prepared (``stored`` is ``None``) or loaded (``stored`` is what
        ``_read`` returned): return the backend's state for it (``_state`` gives it back)."""

    @abc.abstractmethod
    def _on_record(self, session: Session, record: Record) -> None:
        """A record is being appended to ``session`` (private, entering or live); raise to
        refuse it."""

    @abc.abstractmethod
    async def _enter(self, session: Session) -> None:
        """``session`` is being published (shielded); once this returns, it is live with no
        checkpoint between, and its records are written from then on.

        Raises:
            SessionIdInUseError: another worker of a shared store holds the session.
        """

    @abc.abstractmethod
    async def _sync(self, session: Session) -> int:
        """Make every record of ``session`` durable; the last durable ``seq``."""

    def _synced(self, session: Session) -> int | None:
        """The last ``seq`` of ``session`` when every record of it is durable already, with
        nothing to write or wait for (a backend that stores a record as it is appended),
        else ``None`` (the default): then ``flush_nowait`` refuses and ``flush`` calls
        ``_sync``."""
        return None

    @abc.abstractmethod
    async def _discard(self, session: Session) -> None:
        """Drop unwritten records; for a new session, remove what was persisted for it."""

    @abc.abstractmethod
    async def _release(self, session: Session) -> None:
        """``session`` ended (detached or abandoned; runs shielded): release what the backend
        holds for it. Never raises."""

    @abc.abstractmethod
    async def is_stored(self, session_id: str) -> bool:
        """Whether a session with this id is stored (live or not)."""

    @abc.abstractmethod
    async def _read(self, session_id: str) -> Stored:
        """The stored records of ``session_id`` (raises ``SessionNotFoundError``). Reading
        never writes."""

    @abc.abstractmethod
    async def _remove(self, session_id: str) -> None:
        """Delete the stored session, which has no session under it (raises
        ``SessionNotFoundError``; ``SessionInUseError`` when it is live elsewhere)."""

    async def _remove_tree(self, session_ids: Sequence[str]) -> None:
        """Delete the stored sessions ``session_ids``, the last being the one asked for and
        the others the sessions under it, each listed after the sessions under it (raises
        ``SessionNotFoundError`` when the last is not stored; ``SessionInUseError`` when one
        is live elsewhere). By default one ``_remove`` each, in that order; a backend that
        can do it in one transaction does."""
        *under, asked = session_ids
        for session_id in under:
            # One deleted meanwhile (by another process) is as good as deleted here.
            with contextlib.suppress(SessionNotFoundError):
                await self._remove(session_id)
        await self._remove(asked)

    async def _stored_parents(self) -> dict[str, str | None]:
        """The parent of every stored session (its ``SessionInfo.parent_id``): what a delete
        needs to find the sessions under one. By default from ``_list_stored``; a backend that
        can tell it without reading whole sessions does."""
        return {info.id: info.parent_id for info in await self._list_stored()}

    @abc.abstractmethod
    async def _list_stored(self) -> builtins.list[SessionInfo]:
        """Every stored session (the live flag is filled in by the caller)."""
