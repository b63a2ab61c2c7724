"""A session: the append-only record history of one agent.

Rules:
- ``append`` stamps each record with ``seq`` equal to its index, so ``seq`` is contiguous from 0.
- ``records`` is an immutable snapshot (a tuple), cached until the next append; building it
  costs every record, so code that runs per step reads ``records_since`` instead (the cost of
  the new records only).
- A session owns its lifecycle (``state``, :mod:`._state`); its store moves it along with
  :meth:`Session.advance`, and is told of each append through the ``on_append`` callback it
  gave (before the record counts, so a record the store cannot serialize is refused, not
  half-kept); the store publishes it as ``SessionAppended`` once the session is live.
- From the start of a detach or an abandon (``ending``) on, a session refuses appends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar, final

import attrs

from ._errors import SessionClosedError
from ._ids import check_session_id
from ._records import Record
from ._state import SessionState, check_session_state

R = TypeVar("R", bound=Record)


#: Per record class: (attribute, init argument) of every field ``__init__`` takes but ``seq``.
_INIT_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}


def _stamp(record: R, seq: int) -> R:
    """``attrs.evolve(record, seq=seq)``, with the class's fields looked up once per class.

    Invariant: the same call as ``evolve`` makes (``cls(**fields, seq=seq)``, so validators,
    converters and ``__attrs_post_init__`` run as they would), without its per-call lookup of
    the fields and the checks around it: this runs for every record appended.
    """
    cls = type(record)
    try:
        names = _INIT_FIELDS[cls]
    except KeyError:
        names = _INIT_FIELDS[cls] = tuple(
            (a.name, a.alias) for a in attrs.fields(cls) if a.init and a.alias != "seq"
        )
    kwargs = {alias: getattr(record, name) for name, alias in names}
    kwargs["seq"] = seq
    return cls(**kwargs)


@attrs.frozen(kw_only=True)
class SessionStatistics:
    """A snapshot of a session.

    Attributes:
        records: how many records it holds.
        flushed_seq: the last ``seq`` known durable (``-1``: none yet).
        live: whether it is entered in its store and not yet detached.
    """

    records: int
    flushed_seq: int
    live: bool


@final
class Session:
    """The record history of one agent; ``session.id`` is the agent's id.

    Sessions are made by a :class:`SessionStore` (``prepare`` or ``load``). A session built
    directly, ``Session("s-1")``, belongs to no store: appends work, nothing is persisted.

    Args:
        session_id: a filename-safe id (``[A-Za-z0-9._-]{1,128}``, not starting with ``.``).
        records: initial records; they are re-stamped with contiguous ``seq``.
        resumed: the records are the stored history of the session (its store loaded them),
            so they count as durable (``flushed_seq`` is the last of them).
        on_append: called with each record appended, stamped, before it counts; raising
            refuses the record (a store passes its check and publication here).

    Raises:
        InvalidSessionIdError: the id is not valid.
    """

    def __init__(
        self,
        session_id: str,
        records: Iterable[Record] = (),
        *,
        resumed: bool = False,
        on_append: Callable[[Session, Record], None] | None = None,
    ) -> None:
        self._id = check_session_id(session_id)
        self._records: list[Record] = [
            r if r.seq == i else attrs.evolve(r, seq=i) for i, r in enumerate(records)
        ]
        self._snapshot: tuple[Record, ...] | None = None
        self._updated = time.time()
        self._resumed = resumed
        self._on_append = on_append
        self._state = SessionState.PRIVATE
        self._flushed_seq = len(self._records) - 1 if resumed else -1
        # What the store that made this session keeps of it (its own and its backend's
        # state; SessionStore's business). Held here, not in a map of the store keyed by the
        # session, so it lives as long as the session and can never keep the session alive.
        self._store_entry: object = None

    @property
    def id(self) -> str:
        """The session id (also the id of the agent it belongs to)."""
        return self._id

    @property
    def state(self) -> SessionState:
        """Where the session is in its life."""
        return self._state

    @property
    def updated(self) -> float:
        """When a record was last appended (or the session built), as ``time.time()``."""
        return self._updated

    @property
    def resumed(self) -> bool:
        """Whether the session holds a stored history (loaded), rather than being new."""
        return self._resumed

    def advance(self, state: SessionState) -> None:
        """Move the session to ``state``: its store's step, not the application's.

        Raises:
            InvalidTransitionError: the move is not legal from the current state (the state
                is unchanged).
        """
        self._state = check_session_state(self._state, state)

    def flushed(self, seq: int) -> int:
        """Record that every record up to ``seq`` is durable (its store's step) and return
        the mark, which never moves back."""
        self._flushed_seq = max(self._flushed_seq, seq)
        return self._flushed_seq

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest record, ``-1`` when there is none (costs no snapshot)."""
        return len(self._records) - 1

    @property
    def records(self) -> tuple[Record, ...]:
        """An immutable snapshot of every record so far, in ``seq`` order."""
        snapshot = self._snapshot
        if snapshot is None:
            snapshot = self._snapshot = tuple(self._records)
        return snapshot

    def records_since(self, seq: int) -> tuple[Record, ...]:
        """The records whose ``seq`` is ``seq`` or later, in order: a snapshot that costs the
        records it holds, not the whole history.

        Args:
            seq: the first ``seq`` wanted (``0`` for all; past the end: none).

        Raises:
            ValueError: ``seq`` is negative.
        """
        if seq < 0:
            raise ValueError(f"records_since() takes a seq >= 0; got {seq}")
        return tuple(self._records[seq:])

    def append(self, record: R) -> R:
        """Append ``record`` and return it stamped with its ``seq`` (its index).

        Raises:
            TypeError: ``record`` is not a :class:`Record`, or its class is not registered.
            ValueError: the record holds a value that cannot be serialized.
            SessionClosedError: the session was detached or abandoned.
        """
        if not isinstance(record, Record):
            raise TypeError(
                f"session.append() takes a Record (e.g. UserMessage(...)); "
                f"got {type(record).__name__}"
            )
        if not self._state.takes_records:
            raise SessionClosedError(
                f"session {self._id!r} is detached; it takes no more records "
                f"(load it again from the store to continue it)"
            )
        stamped = _stamp(record, len(self._records))
        self._records.append(stamped)
        self._snapshot = None
        self._updated = time.time()
        if self._on_append is not None:
            try:
                self._on_append(self, stamped)
            except BaseException:
                # Invariant: a record the store refused is not part of the session.
                self._records.pop()
                raise
        return stamped

    def statistics(self) -> SessionStatistics:
        """A frozen snapshot of this session."""
        return SessionStatistics(
            records=len(self._records),
            flushed_seq=self._flushed_seq,
            live=self._state is SessionState.LIVE,
        )

    def __repr__(self) -> str:
        return f"<Session {self._id} {self._state.value} records={len(self._records)}>"
