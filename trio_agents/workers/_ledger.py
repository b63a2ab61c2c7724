"""Which turn ran which queue prompt, and what to do next: a fold over a session's records.

Rules:
- A :class:`PromptClaimed` opens an attempt; the next ``InboxSpliced`` add is its message;
  the ``UserMessage`` of that message names its turn; that turn's ``TurnEnded`` ends it. The
  answer is the text after the turn's last ``ToolCall`` (as ``Agent.ask`` answers).
- :func:`decide` is the whole policy, a pure function of the attempts and the prompt's
  row: settle a prompt whose last attempt ended, adopt a message still queued (a resumed
  inbox runs it), or start a new attempt. A turn a worker's loss interrupted counts against
  the ``retry`` policy's retries; a turn cancelled by a drain or a lost lease does not (the
  prompt was handed back); a client's cancel settles the prompt ``cancelled``.
- :meth:`Ledger.feed` takes records in ``seq`` order, each once; it never blocks. A worker
  keeps one ledger per session it holds and feeds it only the records since the last feed,
  so a prompt costs the same however long the session's history.
- ``unexplained`` holds the attempts whose turn the store's repair closed (``interrupted``)
  and that no :class:`TurnInterrupted` explains yet: what the next owner records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from ..cancel import CancelCause
from ..session import (
    AssistantMessage,
    InboxSpliced,
    Record,
    StopReason,
    ToolCall,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from ._records import CancelRequested, PromptClaimed, PromptFailed, TurnInterrupted, WorkerLost


@attrs.define
class Attempt:
    """One run of a queue prompt, as the session's records tell it."""

    prompt_id: str
    number: int
    worker: str
    message_id: str | None = None
    turn_id: str | None = None
    answer: str = ""
    ended: TurnEnded | None = None
    dropped: bool = False
    interrupted_by: CancelCause | None = None


@attrs.define
class Ledger:
    """The attempts of every queue prompt of one session, and the turns' order."""

    attempts: dict[str, list[Attempt]] = attrs.field(factory=dict)
    failed: dict[str, PromptFailed] = attrs.field(factory=dict)
    cancels: dict[str, CancelCause] = attrs.field(factory=dict)
    #: Every turn in the order it started, and whether a turn started inside another.
    turns: list[str] = attrs.field(factory=list)
    overlapping: bool = False
    unexplained: list[Attempt] = attrs.field(factory=list)
    _open_turn: str | None = None
    _awaiting: Attempt | None = None
    _by_message: dict[str, Attempt] = attrs.field(factory=dict)
    _by_turn: dict[str, Attempt] = attrs.field(factory=dict)

    def feed(self, records: Iterable[Record]) -> None:
        for record in records:
            self._feed(record)

    def last(self, prompt_id: str) -> Attempt | None:
        found = self.attempts.get(prompt_id)
        return found[-1] if found else None

    def _feed(self, record: Record) -> None:
        if isinstance(record, PromptClaimed):
            attempt = Attempt(record.prompt_id, record.attempt, record.worker)
            self.attempts.setdefault(record.prompt_id, []).append(attempt)
            self._awaiting = attempt
        elif isinstance(record, InboxSpliced):
            self._inbox(record)
        elif isinstance(record, UserMessage):
            claimed = self._by_message.get(record.message_id)
            if claimed is not None:
                claimed.turn_id = record.turn_id
                self._by_turn[record.turn_id] = claimed
        elif isinstance(record, TurnStarted):
            self.overlapping |= self._open_turn is not None
            self._open_turn = record.turn_id
            self.turns.append(record.turn_id)
        elif isinstance(record, TurnEnded):
            if self._open_turn == record.turn_id:
                self._open_turn = None
            ended = self._by_turn.get(record.turn_id)
            if ended is not None and ended.ended is None:
                ended.ended = record
                if record.stop_reason is StopReason.INTERRUPTED and ended.interrupted_by is None:
                    self.unexplained.append(ended)
        elif isinstance(record, AssistantMessage | ToolCall):
            running = self._by_turn.get(record.turn_id)
            if running is not None and running.ended is None:
                running.answer = record.content if isinstance(record, AssistantMessage) else ""
        else:
            self._queue_record(record)

    def _inbox(self, record: InboxSpliced) -> None:
        if record.op == "add":
            if self._awaiting is not None and record.lane == "next_turn":
                self._awaiting.message_id = record.message_id
                self._by_message[record.message_id] = self._awaiting
            self._awaiting = None
            return
        attempt = self._by_message.get(record.message_id)
        if attempt is not None and attempt.turn_id is None:
            attempt.dropped = True

    def _queue_record(self, record: Record) -> None:
        if isinstance(record, TurnInterrupted):
            attempt = self._by_turn.get(record.turn_id)
            if attempt is not None:
                attempt.interrupted_by = record.cause
                if attempt in self.unexplained:
                    self.unexplained.remove(attempt)
        elif isinstance(record, PromptFailed):
            self.failed.setdefault(record.prompt_id, record)
        elif isinstance(record, CancelRequested):
            self.cancels.setdefault(record.prompt_id, record.cause)


@attrs.frozen
class Decision:
    """What a worker does with a claimed prompt: ``start`` attempt ``attempt``, ``adopt``
    the queued message of the last attempt, ``wait`` for its running turn, or ``settle`` it
    (``state`` ``completed``, ``failed`` or ``cancelled``, with the answer or the error)."""

    action: Literal["start", "adopt", "wait", "settle"]
    attempt: int = 0
    state: Literal["completed", "failed", "cancelled"] | None = None
    answer: str | None = None
    error: str | None = None
    #: The cause a failure records (``WorkerLost`` of the worker whose turn was interrupted).
    cause: CancelCause | None = None


def _lost_turns(attempts: list[Attempt]) -> int:
    return sum(
        1 for a in attempts if a.ended is not None and a.ended.stop_reason is StopReason.INTERRUPTED
    )


def decide(
    ledger: Ledger, prompt_id: str, *, policy: str, retries: int, cancelled: bool
) -> Decision:
    """The next step for ``prompt_id`` (see the module's rules)."""
    attempts = ledger.attempts.get(prompt_id, [])
    failed = ledger.failed.get(prompt_id)
    if failed is not None:
        return Decision("settle", state="failed", error=failed.reason, cause=failed.cause)
    last = attempts[-1] if attempts else None
    cancelled = cancelled or prompt_id in ledger.cancels
    if last is None or last.message_id is None:
        if cancelled:
            return Decision("settle", state="cancelled")
        return Decision("start", attempt=len(attempts) + 1)
    if last.ended is None:
        if last.turn_id is not None:
            return Decision("wait")
        if last.dropped:
            if cancelled:
                return Decision("settle", state="cancelled")
            return Decision("start", attempt=len(attempts) + 1)
        return Decision("adopt")
    reason = last.ended.stop_reason
    if reason is StopReason.COMPLETED:
        return Decision("settle", state="completed", answer=last.answer)
    if cancelled:
        return Decision("settle", state="cancelled")
    if reason is StopReason.INTERRUPTED:
        cause = last.interrupted_by or WorkerLost(worker=last.worker)
        if policy == "fail" or _lost_turns(attempts) > retries:
            runs = "once" if len(attempts) == 1 else f"{len(attempts)} times"
            return Decision(
                "settle",
                state="failed",
                error=f"its worker was lost mid-turn ({cause!r}) {runs}, and its policy is "
                f"{policy!r}" + (f" with {retries} retries" if policy == "retry" else ""),
                cause=cause,
            )
        return Decision("start", attempt=len(attempts) + 1)
    if reason is StopReason.CANCELLED:
        return Decision("start", attempt=len(attempts) + 1)  # handed back: drained, lease lost
    detail = f": {last.ended.error}" if last.ended.error else ""
    return Decision(
        "settle", state="failed", error=f"its turn ended {reason.value}{detail}", cause=None
    )
