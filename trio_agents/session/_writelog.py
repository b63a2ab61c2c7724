"""One session's write log, sans-IO: what a batching backend has written of a session.

Every backend that writes in batches (JSONL, SQLite, PostgreSQL) keeps one per session; the
backend does the I/O, the log only counts.

Rules:
- A record's line is ``add``-ed in ``seq`` order: it is *pending*. The first pending line is
  record ``written_seq + 1`` (after the lines of a batch in flight).
- ``take()`` moves every pending line into the batch *in flight*; a session has at most one
  batch in flight. The backend writes those lines, then settles the batch, exactly once:
- ``settle(synced=True)``: the batch made everything written durable: ``written_seq`` moves
  on by its lines, ``synced_seq`` catches up with it, nothing is *unsynced*.
  ``settle(synced=False)``: the lines are written, not durable: ``written_seq`` moves on, and
  (when the log keeps them) the lines wait in ``unsynced`` until a later synced batch.
- ``fail()``: the batch wrote nothing that counts; its lines go back in front of the pending
  ones, in order. ``fail(rewound=True)``: the backend also cut what was written since the last
  sync away (a file cut back to its durable end): the unsynced lines go back too, in front,
  and ``written_seq`` falls back to ``synced_seq``.
- ``discard()`` drops pending and unsynced lines (an abandoned session); a batch in flight
  still settles.
- An illegal move (``take`` while a batch is in flight, ``settle`` or ``fail`` with none)
  raises ``RuntimeError`` and changes nothing.
"""

from __future__ import annotations

from typing import Generic, TypeVar, final

import attrs

L = TypeVar("L")


@final
@attrs.define(eq=False, repr=False)
class WriteLog(Generic[L]):
    """The write bookkeeping of one session (see the module's rules).

    Args:
        written_seq: the ``seq`` of the last record written (``-1``: none); a loaded
            session's are all written, and durable.
        synced_seq: the ``seq`` of the last durable record (by default ``written_seq``).
        keep_unsynced: keep the lines of unsynced batches, so a ``fail(rewound=True)`` can
            queue them again (a backend that may lose them, as a file cut back does).
    """

    written_seq: int = -1
    synced_seq: int = attrs.field(
        default=attrs.Factory(lambda self: self.written_seq, takes_self=True)
    )
    keep_unsynced: bool = attrs.field(default=False, kw_only=True)
    pending: list[L] = attrs.field(init=False, factory=list)
    #: Lines written since the last sync (only with ``keep_unsynced``).
    unsynced: list[L] = attrs.field(init=False, factory=list)
    _batch: list[L] | None = attrs.field(init=False, default=None)

    @property
    def in_flight(self) -> bool:
        """Whether a batch of this session's lines is being written."""
        return self._batch is not None

    @property
    def clean(self) -> bool:
        """Whether everything added is durable: nothing pending, in flight or unsynced."""
        return not self.pending and self._batch is None and self.synced_seq == self.written_seq

    def add(self, line: L) -> None:
        """Queue the line of the next record."""
        self.pending.append(line)

    def take(self) -> list[L]:
        """Move every pending line into the batch in flight, and return them.

        Raises:
            RuntimeError: a batch is in flight already.
        """
        if self._batch is not None:
            raise RuntimeError("a batch of this session is in flight already; settle it first")
        batch, self.pending = self.pending, []
        self._batch = batch
        return batch

    def _end(self) -> list[L]:
        batch = self._batch
        if batch is None:
            raise RuntimeError("no batch of this session is in flight; take() one first")
        self._batch = None
        return batch

    def settle(self, *, synced: bool) -> None:
        """The batch in flight is written; with ``synced``, everything written is durable.

        Raises:
            RuntimeError: no batch is in flight.
        """
        batch = self._end()
        self.written_seq += len(batch)
        if synced:
            self.synced_seq = self.written_seq
            self.unsynced = []
        elif self.keep_unsynced:
            self.unsynced.extend(batch)

    def fail(self, *, rewound: bool = False) -> None:
        """The batch in flight wrote nothing that counts; with ``rewound``, nothing since the
        last sync counts either. The lines go back, in order, in front of the pending ones.

        Raises:
            RuntimeError: no batch is in flight.
        """
        batch = self._end()
        if rewound:
            batch = [*self.unsynced, *batch]
            self.unsynced = []
            self.written_seq = self.synced_seq
        self.pending[:0] = batch

    def discard(self) -> None:
        """Drop the pending and unsynced lines (the session was abandoned)."""
        self.pending.clear()
        self.unsynced.clear()

    def __repr__(self) -> str:
        flight = len(self._batch) if self._batch is not None else "-"
        return (
            f"<WriteLog written={self.written_seq} synced={self.synced_seq} "
            f"pending={len(self.pending)} in_flight={flight} unsynced={len(self.unsynced)}>"
        )
