"""Typed cancel causes: why a region of work was stopped, as a value rather than a string."""

from __future__ import annotations

import attrs

#: Per cause class: the text of a class without fields (all its instances read the same),
#: or ``None`` for one whose text depends on its fields. Made once: every cancel describes
#: its cause for trio's ``Cancelled.reason``, and attrs' repr is the costliest step of
#: ``Agent.cancel`` itself: 360,844 -> 356,124 instructions per cancel (bench_instructions;
#: test_a_cause_without_fields_is_described_once_per_class).
_FIXED_TEXT: dict[type[CancelCause], str | None] = {}


@attrs.frozen
class CancelCause:
    """Base of every cancel cause. New causes are new frozen subclasses, never free strings."""

    def describe(self) -> str:
        """A short human-readable form, used as trio's ``Cancelled.reason``.

        A cause without fields always reads the same (``UserCancel()``): its text is made
        once per class.
        """
        cls = type(self)
        try:
            text = _FIXED_TEXT[cls]
        except KeyError:
            text = _FIXED_TEXT[cls] = None if attrs.fields(cls) else repr(self)
        return repr(self) if text is None else text

    def for_child(self, parent_id: str) -> CancelCause:
        """The cause with which this cancel reaches a child of the agent ``parent_id``:
        :class:`ParentCancel` unless the cause says otherwise (:class:`BudgetExhausted`)."""
        return ParentCancel(parent_id=parent_id)


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


@attrs.frozen
class BudgetExhausted(CancelCause):
    """A budget on the path from an agent to the root of its tree is spent: the work under
    the agent that owns the budget stops. The same cause reaches every descendant, so each
    stopped turn records whose budget and which limit stopped it.

    Attributes:
        owner_id: the agent whose budget is spent (the root of the stopped subtree).
        limit: which limit of the budget: ``"input_tokens"``, ``"output_tokens"``,
            ``"tokens"``, ``"requests"``, ``"tool_calls"``, ``"turns"``, ``"seconds"`` or
            ``"cost"``.
        spent: what was spent of it when the check stopped the work.
        allowed: the limit's value (``Budget.output_tokens``, ...).
    """

    owner_id: str
    limit: str
    spent: float
    allowed: float = 0.0

    def describe(self) -> str:
        """``output_tokens budget 100 spent (117)``: which budget and what was spent."""
        return f"{self.limit} budget {_number(self.allowed)} spent ({_number(self.spent)})"

    def for_child(self, parent_id: str) -> CancelCause:
        """The subtree of the owner stops with the owner's own cause."""
        return self


def _number(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}"


def check_cause(cause: object) -> CancelCause:
    """Return ``cause`` if it is a :class:`CancelCause`, else raise a :exc:`TypeError`."""
    if not isinstance(cause, CancelCause):
        raise TypeError(
            f"cancel causes are CancelCause instances such as UserCancel(); "
            f"got {type(cause).__name__} {cause!r}"
        )
    return cause
