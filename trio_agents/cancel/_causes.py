"""Typed cancel causes: why a region of work was stopped, as a value rather than a string."""

from __future__ import annotations

import attrs

__all__ = [
    "CancelCause",
    "DisposedCancel",
    "HookCancel",
    "LeaseLost",
    "ParentCancel",
    "UserCancel",
    "check_cause",
]


@attrs.frozen
class CancelCause:
    """Base of every cancel cause. New causes are new frozen subclasses, never free strings."""

    def describe(self) -> str:
        """A short human-readable form, used as trio's ``Cancelled.reason``."""
        return repr(self)


@attrs.frozen
class UserCancel(CancelCause):
    """A person (or their client, e.g. ACP ``session/cancel``) asked to stop."""


@attrs.frozen
class ParentCancel(CancelCause):
    """The parent agent was cancelled; the cancel reached this child through ownership."""

    parent_id: str


@attrs.frozen
class DisposedCancel(CancelCause):
    """The owner is being torn down (fiber unload, handle dispose, runtime exit)."""


@attrs.frozen
class HookCancel(CancelCause):
    """A plugin hook vetoed the work; ``reason`` says why."""

    reason: str


@attrs.frozen
class LeaseLost(CancelCause):
    """The worker lost the lease of the agent's session: another worker took the session
    over (this one was stopped or cut off from the database longer than the lease lasts).
    The agent stops at once and is disposed; it lives on where the session was taken over.

    ``holder`` is the lease owner id (``host:pid:random``) under which this worker held the
    session, so that the logs of many workers say which one stopped.
    """

    holder: str


def check_cause(cause: object) -> CancelCause:
    """Return ``cause`` if it is a :class:`CancelCause`, else raise a :exc:`TypeError`."""
    if not isinstance(cause, CancelCause):
        raise TypeError(
            f"cancel causes are CancelCause instances such as UserCancel(); "
            f"got {type(cause).__name__} {cause!r}"
        )
    return cause
