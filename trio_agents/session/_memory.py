"""The in-memory backend: sessions live as long as the store object."""

from __future__ import annotations

import builtins
import time
from datetime import UTC, datetime
from typing import final

import attrs
import trio

from ._backend import Stored
from ._convert import check_record
from ._errors import SessionNotFoundError
from ._records import Record
from ._session import Session
from ._state import SessionState
from ._store import SessionStore
from ._summary import SessionInfo, Summary


@attrs.define(eq=False)
class _Stored:
    records: builtins.list[Record]
    updated: float = attrs.field(factory=time.time)
    #: The live session writing these records, from its ``_enter`` to its ``_release``: what
    #: tells its own entry from a later one of the same id, with no per-session map.
    writer: Session | None = None


@final
class MemoryStore(SessionStore[None]):
    """A :class:`SessionStore` that keeps sessions in memory (tests, ``--store memory``).

    Records of an entered session are stored as they are appended, so a flush only marks them
    flushed. Stored sessions survive ``detach`` and can be loaded again from the same object.
    """

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[str, _Stored] = {}
        # The stored entry of each live session, by id: what `_on_record` appends to. A plain
        # dict, looked up per record, where the weak one would build a weakref per lookup.
        # Invariant: holds exactly the sessions between `_enter` and `_release` (one live
        # session per id, so the id names the session).
        self._writing: dict[str, _Stored] = {}

    def _begin(self, session: Session, stored: Stored | None) -> None:
        return None  # nothing is kept for a session before it is entered

    def _on_record(self, session: Session, record: Record) -> None:
        # Invariant: what one backend refuses, every backend refuses.
        check_record(record)
        if session.state is SessionState.LIVE:
            # Invariant: a live session's entry is the one `_enter` stored for it.
            stored = self._writing[session.id]
            stored.records.append(record)
            stored.updated = session.updated  # stamped by the append, just before

    async def _enter(self, session: Session) -> None:
        if session.resumed:
            # A new session's enter checkpointed already, in the is_stored check before this.
            await trio.lowlevel.checkpoint()
        # No checkpoint from here until the session is live: no record is missed.
        stored = self._data[session.id] = _Stored(builtins.list(session.records), writer=session)
        self._writing[session.id] = stored

    async def _sync(self, session: Session) -> int:
        await trio.lowlevel.checkpoint()
        return session.last_seq

    def _synced(self, session: Session) -> int | None:
        return session.last_seq  # stored as appended: nothing to write

    async def _discard(self, session: Session) -> None:
        stored = self._data.get(session.id)
        if stored is not None and stored.writer is session and not session.resumed:
            del self._data[session.id]
        await trio.lowlevel.checkpoint()

    async def _release(self, session: Session) -> None:
        stored = self._writing.get(session.id)
        if stored is not None and stored.writer is session:
            del self._writing[session.id]
            stored.writer = None
        # No checkpoint: this runs shielded at the end of a detach or an abandon, right after
        # the step of it that checkpointed (the final flush, the discard); one more would
        # only be one more pass of the scheduler for every agent disposed.

    async def is_stored(self, session_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        return session_id in self._data

    async def _read(self, session_id: str) -> Stored:
        await trio.lowlevel.checkpoint()
        stored = self._data.get(session_id)
        if stored is None:
            raise SessionNotFoundError(_not_found(session_id))
        return Stored(builtins.list(stored.records))

    async def _remove(self, session_id: str) -> None:
        await trio.lowlevel.checkpoint()
        if self._data.pop(session_id, None) is None:
            raise SessionNotFoundError(_not_found(session_id))

    async def _list_stored(self) -> builtins.list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        infos = []
        for session_id, stored in self._data.items():
            summary = Summary.of(stored.records)
            infos.append(
                SessionInfo(
                    id=session_id,
                    records=len(stored.records),
                    updated=datetime.fromtimestamp(stored.updated, UTC),
                    live=False,
                    title=summary.title,
                    cwd=summary.cwd,
                    parent_id=summary.parent_id,
                )
            )
        return infos


def _not_found(session_id: str) -> str:
    return f"no stored session has the id {session_id!r}; see store.list() for the ids"
