"""The in-memory backend: sessions live as long as the store object."""

from __future__ import annotations

import builtins
import time
from datetime import UTC, datetime
from typing import cast, final

import attrs
import trio

from ._convert import dump_record
from ._errors import SessionNotFoundError
from ._records import Record
from ._session import Session
from ._store import SessionInfo, SessionStore, _cwd_of_records, _title_of_records

__all__ = ["MemoryStore"]


@attrs.define(eq=False)
class _Stored:
    records: builtins.list[Record]
    updated: float = attrs.field(factory=time.time)


@final
class MemoryStore(SessionStore):
    """A :class:`SessionStore` that keeps sessions in memory (tests, ``--store memory``).

    Records of an entered session are stored as they are appended, so a flush only marks them
    flushed. Stored sessions survive ``detach`` and can be loaded again from the same object.
    """

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[str, _Stored] = {}

    def _track(self, session: Session, note: object = None) -> None:
        pass

    def _on_record(self, session: Session, record: Record) -> None:
        # Invariant: what one backend refuses, every backend refuses.
        dump_record(record)
        if session._entered:
            # Invariant: an entered session takes records only until it ends, and until then
            # its backend is the entry `_entered` stored for it.
            stored = cast(_Stored, session._backend)
            stored.records.append(record)
            stored.updated = time.time()

    def _entered(self, session: Session) -> None:
        stored = self._data[session.id] = _Stored(builtins.list(session._records))
        session._backend = stored

    async def _sync(self, session: Session) -> None:
        session._flushed_seq = len(session._records) - 1
        await trio.lowlevel.checkpoint()

    async def _discard(self, session: Session) -> None:
        stored = self._data.get(session.id)
        if stored is not None and session._backend is stored and not session._loaded:
            del self._data[session.id]
        await trio.lowlevel.checkpoint()

    def _forget(self, session: Session) -> None:
        session._backend = None

    def is_stored(self, session_id: str) -> bool:
        return session_id in self._data

    async def _read(self, session_id: str) -> tuple[builtins.list[Record], object]:
        await trio.lowlevel.checkpoint()
        stored = self._data.get(session_id)
        if stored is None:
            raise SessionNotFoundError(_not_found(session_id))
        return builtins.list(stored.records), None

    async def _remove(self, session_id: str) -> None:
        await trio.lowlevel.checkpoint()
        if self._data.pop(session_id, None) is None:
            raise SessionNotFoundError(_not_found(session_id))

    async def _list_stored(self) -> builtins.list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        return [
            SessionInfo(
                id=session_id,
                records=len(stored.records),
                updated=datetime.fromtimestamp(stored.updated, UTC),
                live=False,
                title=_title_of_records(stored.records),
                cwd=_cwd_of_records(stored.records),
            )
            for session_id, stored in self._data.items()
        ]


def _not_found(session_id: str) -> str:
    return f"no stored session has the id {session_id!r}; see store.list() for the ids"
