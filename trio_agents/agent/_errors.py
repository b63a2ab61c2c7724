"""Errors of the agent layer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._errors import TrioAgentsError

if TYPE_CHECKING:
    from ..session import TurnEnded


class AgentIdInUseError(TrioAgentsError, ValueError):
    """A live agent already has this id.

    Attributes:
        elsewhere: the agent (its session) is live outside this process: another worker of
            a shared store holds it (``False``: a live agent of this runtime).
    """

    def __init__(self, message: str, *, elsewhere: bool = False) -> None:
        super().__init__(message)
        self.elsewhere = elsewhere


class ModelRequiredError(TrioAgentsError, ValueError):
    """A resume needs a model: the agent was created with a model object, which its session
    cannot hold (pass one: ``agents.resume(id, model=...)``)."""


class AgentClosedError(TrioAgentsError, trio.ClosedResourceError):
    """The agent is being disposed (or is disposed) and takes no more messages."""


class TurnFailedError(TrioAgentsError, RuntimeError):
    """The turn that ran a message ended without completing (cancelled, error, max steps...).

    Attributes:
        record: the turn's ``TurnEnded`` record (its stop reason, typed cause and error).
    """

    def __init__(self, message: str, record: TurnEnded) -> None:
        super().__init__(message)
        self.record = record


class MessageDroppedError(TrioAgentsError, RuntimeError):
    """A queued message was removed (discarded or cancelled) before any turn ran it.

    Attributes:
        message_id: the message's id.
        reason: why it was removed (``"discarded"`` or ``"cancelled"``).
    """

    def __init__(self, message: str, message_id: str, reason: str | None) -> None:
        super().__init__(message)
        self.message_id = message_id
        self.reason = reason
