"""What an agent's session says about the children its ``task`` tool started.

Rules:
- A child is open from its :class:`ChildStarted` until its :class:`ChildEnded`, both in the
  parent's session. A parent whose process ended with children open is repaired when it is
  resumed: each open child's stored session is loaded (which closes its open turn as
  ``interrupted``, as every load does), written back, and the parent records the child's end
  as ``interrupted``; the parent may then start (or resume) it again.
- A child's session that is live elsewhere (resumed by another owner) is left alone: its
  owner closes it.
- The answer of a child is read from its own session: the text the model said after the last
  tool call of its latest turn, as ``ask`` returns it.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import attrs
import trio

from .._base import still_open
from ..cancel import CancelCause
from ..session import (
    AgentConfigured,
    AssistantMessage,
    ChildEnded,
    ChildStarted,
    ModelUsage,
    Record,
    Session,
    SessionIdInUseError,
    SessionNotFoundError,
    SessionStore,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
)
from ._usage import AgentUsage


@attrs.frozen
class ChildOutcome:
    """How a child's latest turn ended, and what it answered.

    Attributes:
        stop_reason: its stop reason, or ``None`` while no turn has ended.
        answer: the text after its last tool call (``""`` if none).
        cause: the typed cause of a cancelled turn.
        error: the turn's error.
    """

    stop_reason: StopReason | None = None
    answer: str = ""
    cause: CancelCause | None = None
    error: str | None = None


def open_children(records: Sequence[Record]) -> list[ChildStarted]:
    """The children started and not ended, in the order they started."""
    return still_open(records, ChildStarted, ChildEnded, attrgetter("child_id"))


def parent_of(records: Sequence[Record]) -> str | None:
    """The parent id of the latest definition in ``records``, or ``None``."""
    for record in reversed(records):
        if isinstance(record, AgentConfigured):
            return record.parent_id
    return None


def child_outcome(records: Sequence[Record]) -> ChildOutcome:
    """How the latest turn of a child's session ended (see the module rules)."""
    end: TurnEnded | None = None
    for record in reversed(records):
        if isinstance(record, TurnEnded):
            end = record
            break
    if end is None:
        return ChildOutcome()
    answer = ""
    for record in records:
        if getattr(record, "turn_id", None) != end.turn_id:
            continue
        if isinstance(record, TurnStarted | ToolCall):
            answer = ""
        elif isinstance(record, AssistantMessage):
            answer = record.content
    return ChildOutcome(end.stop_reason, answer, end.cause, end.error)


def child_ended(
    child_id: str,
    records: Sequence[Record],
    stop_reason: StopReason,
    cause: CancelCause | None = None,
    error: str | None = None,
) -> ChildEnded:
    """The parent's record of a child's end, with what the child's ``records`` say it spent
    (its own requests, turns and started tool calls)."""
    usage = AgentUsage()
    for record in records:
        if isinstance(record, ModelUsage):
            usage = usage.plus(record)
    return ChildEnded(
        child_id=child_id,
        stop_reason=stop_reason,
        cause=cause,
        error=error,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        requests=usage.requests,
        cost=usage.cost,
        turns=sum(isinstance(r, TurnStarted) for r in records),
        tool_calls=sum(isinstance(r, ToolCallEnded) and r.started for r in records),
    )


async def close_open_children(store: SessionStore, parent: Session) -> None:
    """Repair the children ``parent``'s records leave open (see the module rules)."""
    for started in open_children(parent.records):
        try:
            child = await store.load(started.child_id)
        except SessionNotFoundError:
            # Its creation never reached the disk: nothing of it ran.
            parent.append(
                ChildEnded(
                    child_id=started.child_id,
                    stop_reason=StopReason.INTERRUPTED,
                    error="the process ended before the child's session was stored",
                )
            )
            continue
        except SessionIdInUseError:
            continue
        try:
            await store.enter(child)
        except BaseException:
            with trio.CancelScope(shield=True):
                await store.abandon(child)
            raise
        with trio.CancelScope(shield=True):
            await store.detach(child)
        # A child whose turn ended before the process did keeps its own stop reason.
        outcome = child_outcome(child.records)
        stop = outcome.stop_reason or StopReason.INTERRUPTED
        parent.append(
            child_ended(started.child_id, child.records, stop, outcome.cause, outcome.error)
        )
