"""Errors of the work queue."""

from __future__ import annotations

from .._errors import TrioAgentsError
from ..cancel import CancelCause


class QueueFormatError(TrioAgentsError, ValueError):
    """The database's work queue was made by a newer trio_agents."""


class PromptIdInUseError(TrioAgentsError, ValueError):
    """A prompt id was submitted again with another session or content."""


class PromptNotFoundError(TrioAgentsError, LookupError):
    """No prompt has this id."""


class PromptFailedError(TrioAgentsError, RuntimeError):
    """The prompt has no answer: its turn failed, or its worker was lost and its policy
    (``fail``, or ``retry`` with no retries left) gave up. ``state`` is ``failed``."""


class PromptCancelledError(TrioAgentsError, RuntimeError):
    """The prompt was cancelled before it answered.

    Attributes:
        cause: the cancel cause its client gave.
    """

    def __init__(self, message: str, cause: CancelCause | None) -> None:
        super().__init__(message)
        self.cause = cause
