"""One ``Agent.compact()`` call: queued for the agent's loop, then run like a turn of its own.

Rules:
- While it runs it is the agent's running work, like a :class:`~._turn.Turn`: it has an
  ``id`` (``compact-1``, ...), a cancel ``scope``, ``abort`` and ``dispose``.
- It ends exactly once (:meth:`CompactJob.settle` or :meth:`CompactJob.fail`): ``done`` is
  set, with the ``Compacted`` record (or ``None``: nothing to compact) or the error.
- A cancel leaves the history as it was (see ``_compaction``) and ends the job with a
  :class:`CompactionError` carrying the cause; ``DisposedCancel`` when the agent is being
  disposed.
"""

from __future__ import annotations

from typing import final

import attrs
import trio

from .. import tracing
from ..cancel import CancelCause, CauseScope, DisposedCancel
from ..session import Compacted
from ._compaction import CompactionError, compact_history
from ._parts import AgentParts


@final
@attrs.define(eq=False, repr=False)
class CompactJob:
    """One ``compact()`` call (see the module rules)."""

    #: The compaction is appending its record: a cancel from then on (an observer of the
    #: record, say) has nothing left to abort, so it is not running work any more.
    ending: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)
    finished: bool = False
    id: str = ""
    scope: CauseScope = attrs.field(factory=CauseScope)
    record: Compacted | None = None
    error: BaseException | None = None
    _disposed: bool = False

    def abort(self, cause: CancelCause) -> None:
        """Cancel the running compaction with ``cause``."""
        self.scope.cancel(cause)

    def dispose(self) -> None:
        """Cancel the running compaction because its agent is being disposed."""
        self._disposed = True
        self.scope.cancel(DisposedCancel())

    async def run(self, parts: AgentParts, job_id: str) -> None:
        """Compact ``parts``' history with the policy in force; the outcome is kept, not
        raised (``settle`` then ends the job)."""
        self.id = job_id
        try:
            with self.scope, tracing.compaction(parts.id, None):
                self.record = await compact_history(
                    parts, parts.compactor(), None, recording=self._recording
                )
                self.finished = True
            if self.scope.cancelled_caught:
                cause = DisposedCancel() if self._disposed else self.scope.cause
                self.error = CompactionError(f"compaction cancelled by {cause!r}", cause)
        except CompactionError as exc:  # compact_history wraps every failure of the policy
            self.error = exc

    def _recording(self) -> None:
        self.ending = True

    def settle(self) -> None:
        """End the job after :meth:`run`, however ``run`` left it."""
        if not self.finished and self.error is None:
            self.error = CompactionError("compaction interrupted; the history is unchanged")
        self.done.set()

    def fail(self, error: BaseException) -> None:
        """End the job, unrun, with ``error``."""
        self.error = error
        self.done.set()
