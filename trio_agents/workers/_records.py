"""What the work queue writes into a session, and the causes it records.

Rules:
- A worker that runs prompt ``P`` appends :class:`PromptClaimed` and queues the prompt's text
  in the same step (no checkpoint between), so the two are in one write batch: durable
  together or not at all. The ``InboxSpliced`` add that follows a ``PromptClaimed`` is that
  attempt's message; the turn that claims the message is the attempt's turn. So the session's
  records alone say which turn ran which prompt.
- A turn that a worker's death left open is closed by the store's repair as ``interrupted``;
  the next owner then appends :class:`TurnInterrupted` with the cause, ``WorkerLost``.
- A prompt the worker gives up on (its policy) ends with :class:`PromptFailed`; a client's
  cancel that the worker applies is :class:`CancelRequested` before the turn is cancelled.
"""

from __future__ import annotations

from typing import Literal

import attrs

from ..cancel import CancelCause
from ..session import Record, register_cause, register_record

#: What happens to a prompt whose worker died mid-turn: run it again (while retries are
#: left), or report it failed.
Policy = Literal["retry", "fail"]


@register_cause
@attrs.frozen
class WorkerLost(CancelCause):
    """The worker running the turn died or stopped past its lease (``worker`` is its id);
    the next owner of the session closed the turn."""

    worker: str


@register_cause
@attrs.frozen
class WorkerDrained(CancelCause):
    """The worker running the turn was drained (SIGTERM) and handed the prompt back to the
    queue; another worker runs it again."""

    worker: str


@register_record
@attrs.frozen(kw_only=True)
class PromptClaimed(Record):
    """Attempt ``attempt`` of queue prompt ``prompt_id`` starts here, on ``worker``; the next
    ``InboxSpliced`` add is its message."""

    prompt_id: str
    attempt: int
    worker: str


@register_record
@attrs.frozen(kw_only=True)
class TurnInterrupted(Record):
    """Why turn ``turn_id`` was interrupted (its ``TurnEnded`` came from crash repair)."""

    turn_id: str
    cause: CancelCause


@register_record
@attrs.frozen(kw_only=True)
class PromptFailed(Record):
    """Queue prompt ``prompt_id`` ends without an answer: ``reason`` says why."""

    prompt_id: str
    reason: str
    cause: CancelCause | None = None


@register_record
@attrs.frozen(kw_only=True)
class CancelRequested(Record):
    """A client asked to cancel queue prompt ``prompt_id`` with ``cause``."""

    prompt_id: str
    cause: CancelCause


@attrs.frozen(kw_only=True)
class AgentTemplate:
    """How a worker creates the agent of a session that is not stored yet.

    Attributes:
        model: a model spec (``"echo?delay=0.05"``, ``"openai:gpt-4o-mini"``), or ``None``
            for the worker's default model.
        instructions: the system text.
        tools: the names of the tools the agent may call; ``None`` means all.
        max_steps: the most model requests one turn may make.
    """

    model: str | None = None
    instructions: str | None = None
    tools: list[str] | None = None
    max_steps: int = 50
