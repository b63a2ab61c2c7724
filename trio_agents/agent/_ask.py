"""Following one prompted message to its answer: a fold over the agent's session records.

Rules:
- The message is found by its id. An ``InboxSpliced`` ``remove`` of it (discarded, or cleared
  by a cancel before a turn claimed it) ends the fold with :class:`MessageDroppedError`.
- Its ``UserMessage`` names the turn that claimed it; from then on only that turn's records
  count. Its ``TurnEnded`` ends the fold: ``completed`` answers with the text the model said
  after the turn's last ``ToolCall`` (a tool-calling step's own text is preamble, not the
  answer; ``""`` if the final step said nothing), any other stop reason raises
  :class:`TurnFailedError` carrying the record.
- A turn asked for a typed answer (``_output``) answers with the JSON text of its accepted
  ``OutputProduced`` (:attr:`AnswerFold.output`); ended ``error`` after a refused one, it
  raises :class:`OutputError` with that last answer.
- :meth:`AnswerFold.feed` takes records in ``seq`` order, each once; it never blocks. The
  waiting is :meth:`Agent.ask`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import final

import attrs

from ..session import (
    AssistantMessage,
    InboxSpliced,
    OutputProduced,
    Record,
    StopReason,
    ToolCall,
    TurnEnded,
    UserMessage,
)
from ._errors import MessageDroppedError, TurnFailedError
from ._output import OutputError


@final
@attrs.define(eq=False, repr=False)
class AnswerFold:
    """The answer to message ``message_id`` of agent ``agent_id``, as far as the records go."""

    _agent_id: str
    _message_id: str
    _turn_id: str | None = attrs.field(default=None, init=False)
    _answer: str = attrs.field(default="", init=False)
    #: The turn's latest typed answer (the accepted one, once there is one), or ``None``.
    output: OutputProduced | None = attrs.field(default=None, init=False)

    @property
    def turn_id(self) -> str | None:
        """The turn that claimed the message, once one has."""
        return self._turn_id

    def feed(self, records: Iterable[Record]) -> str | None:
        """Fold in ``records``; return the answer once the turn has completed, else ``None``.

        Raises:
            MessageDroppedError: the message was removed before a turn claimed it.
            TurnFailedError: the turn that claimed it ended any other way than ``completed``.
        """
        for record in records:
            if self._turn_id is None:
                self._before_claim(record)
            elif getattr(record, "turn_id", None) == self._turn_id:
                if isinstance(record, AssistantMessage):
                    self._answer = record.content
                elif isinstance(record, ToolCall):
                    self._answer = ""
                elif isinstance(record, OutputProduced):
                    if self.output is None or self.output.problems:
                        self.output = record
                elif isinstance(record, TurnEnded):
                    return self._ended(record)
        return None

    def _before_claim(self, record: Record) -> None:
        if isinstance(record, UserMessage) and record.message_id == self._message_id:
            self._turn_id = record.turn_id
        elif (
            isinstance(record, InboxSpliced)
            and record.op == "remove"
            and record.message_id == self._message_id
        ):
            reason = record.reason or "removed"
            raise MessageDroppedError(
                f"message {self._message_id} of agent {self._agent_id} was {reason} "
                f"before a turn ran it, so it has no answer",
                self._message_id,
                record.reason,
            )

    def _ended(self, record: TurnEnded) -> str:
        output = self.output
        if record.stop_reason is StopReason.COMPLETED:
            if output is not None and not output.problems:
                return json.dumps(output.answer, ensure_ascii=False)
            return self._answer
        if record.stop_reason is StopReason.ERROR and output is not None and output.problems:
            raise OutputError(
                f"turn {record.turn_id} of agent {self._agent_id} ended error: {record.error} "
                f"(the last answer: {_clip(json.dumps(output.answer, ensure_ascii=False))})",
                record,
                output.answer,
                output.problems,
            )
        why = f" by {record.cause!r}" if record.cause is not None else ""
        detail = f": {record.error}" if record.error else ""
        raise TurnFailedError(
            f"turn {record.turn_id} of agent {self._agent_id} ended "
            f"{record.stop_reason.value}{why}{detail} (message {self._message_id} has no "
            f"answer; the agent's session records show what the turn did)",
            record,
        )


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"
