"""What an agent takes back from its session's records when it is made or resumed.

Rules:
- The inbox is the messages added and neither removed nor claimed by a turn, each in its
  lane with its id; new ids continue after the highest seen.
- The turn counter continues after the highest turn started; the usage totals add up every
  ``ModelUsage``. One pass over the records does all three.
"""

from __future__ import annotations

from ..session import InboxSpliced, ModelUsage, Session, TurnStarted, UserMessage
from ._inbox import Inbox, MessageId
from ._usage import AgentUsage

# Trick: frozen, so every session without a ModelUsage shares one (88 B of every idle agent:
# python -m benchmarks --only memory).
_NO_USAGE = AgentUsage()


def restore(session: Session) -> tuple[Inbox, int, AgentUsage]:
    """Rebuild the pending inbox, the next turn's number and the usage totals from the
    session's records, in one pass."""
    pending: dict[str, InboxSpliced] = {}
    highest = 0
    turns = 0
    usage = _NO_USAGE
    for record in session.records:
        if isinstance(record, InboxSpliced):
            highest = max(highest, _number(record.message_id))
            if record.op == "add":
                pending[record.message_id] = record
            else:
                pending.pop(record.message_id, None)
        elif isinstance(record, UserMessage):
            pending.pop(record.message_id, None)
        elif isinstance(record, TurnStarted):
            turns = max(turns, _number(record.turn_id))
        elif isinstance(record, ModelUsage):
            usage = usage.plus(record)
    inbox = Inbox(next_number=highest + 1)
    for record in pending.values():
        inbox.add(
            record.lane, record.content or "", wake=record.wake, id=MessageId(record.message_id)
        )
    return inbox, turns + 1, usage


def _number(ident: str) -> int:
    _, _, digits = ident.partition("-")
    return int(digits) if digits.isdigit() else 0
