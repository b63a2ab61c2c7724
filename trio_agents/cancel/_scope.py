"""Cause-carrying cancel scopes and :func:`current_cause`.

Rules:
- A :class:`CauseScope` wraps one :class:`trio.CancelScope`. The first cause given to
  :meth:`CauseScope.cancel` is kept; later ones are ignored (but still cancel, which is
  idempotent in trio).
- trio's :exc:`trio.Cancelled` carries ``reason = cause.describe()``.
- :func:`current_cause` answers, from inside a region, the cause of the *outermost* cancelled
  :class:`CauseScope` enclosing the current task: an outer stop supersedes an inner one, just as
  trio unwinds to the outermost cancelled scope.
"""

from __future__ import annotations

import contextvars
import math
from types import TracebackType
from typing import final

import attrs
import trio

from ._causes import CancelCause, check_cause

# Invariant: the tuple lists the CauseScopes entered in this task (and inherited by the tasks it
# spawned), outermost first. Tasks whose owner is not their spawner reset it (see the kernel).
_SCOPES: contextvars.ContextVar[tuple[CauseScope, ...]] = contextvars.ContextVar(
    "trio_agents_cause_scopes", default=()
)


@final
@attrs.define(eq=False, repr=False, init=False)
class CauseScope:
    """A :class:`trio.CancelScope` that remembers *why* it was cancelled.

    Use it like a cancel scope::

        with ta.CauseScope() as scope:
            ...  # elsewhere: scope.cancel(ta.UserCancel())
        if scope.cancelled_caught:
            print(scope.cause)

    Args:
        deadline: passed to :class:`trio.CancelScope`; a deadline expiry leaves ``cause`` as
            ``None``.
        shield: passed to :class:`trio.CancelScope`.
    """

    _scope: trio.CancelScope
    _cause: CancelCause | None = None
    # While entered: what restores the enclosing scopes on exit.
    _token: contextvars.Token[tuple[CauseScope, ...]] | None = None

    def __init__(self, *, deadline: float = math.inf, shield: bool = False) -> None:
        self.__attrs_init__(trio.CancelScope(deadline=deadline, shield=shield))

    def __enter__(self) -> CauseScope:
        self._token = _SCOPES.set((*_SCOPES.get(), self))
        self._scope.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        try:
            return self._scope.__exit__(exc_type, exc, tb)
        finally:
            if self._token is not None:
                _SCOPES.reset(self._token)
                self._token = None

    def cancel(self, cause: CancelCause) -> None:
        """Cancel the region with ``cause``; only the first cause is kept."""
        check_cause(cause)
        if self._cause is None:
            self._cause = cause
        self._scope.cancel(reason=self._cause.describe())

    @property
    def cause(self) -> CancelCause | None:
        """The first cause given to :meth:`cancel`, or ``None``."""
        return self._cause

    @property
    def cancel_called(self) -> bool:
        """Whether :meth:`cancel` was called (or the deadline passed)."""
        return self._scope.cancel_called

    @property
    def cancelled_caught(self) -> bool:
        """Whether this scope caught the :exc:`trio.Cancelled` it caused."""
        return self._scope.cancelled_caught

    @property
    def deadline(self) -> float:
        """The underlying scope's deadline."""
        return self._scope.deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        self._scope.deadline = value

    @property
    def shield(self) -> bool:
        """The underlying scope's shield flag."""
        return self._scope.shield

    @shield.setter
    def shield(self, value: bool) -> None:
        self._scope.shield = value

    def __repr__(self) -> str:
        return f"<CauseScope cause={self._cause!r} cancel_called={self.cancel_called}>"


def current_cause() -> CancelCause | None:
    """The typed cause of the cancellation the current task is inside, or ``None``.

    Readable from anywhere inside the cancelled region: a tool, a model call, a cleanup under a
    shield. The outermost cancelled :class:`CauseScope` wins.
    """
    for scope in _SCOPES.get():
        if scope.cause is not None:
            return scope.cause
    return None


def forget_inherited_scopes() -> None:
    """Forget the cause scopes the current task inherited from the task that spawned it.

    For a task whose owner is not its spawner (the kernel calls it first thing in each task a
    fiber owns): :func:`current_cause` then answers only for the scopes this task enters, not
    for a scope of the spawner that has nothing to do with it.
    """
    _SCOPES.set(())
