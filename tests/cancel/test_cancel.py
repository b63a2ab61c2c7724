"""Typed cancel causes and CauseScope (DESIGN.md §4)."""

from __future__ import annotations

import attrs
import pytest
import trio

from trio_agents.cancel import (
    CancelCause,
    CauseScope,
    DisposedCancel,
    HookCancel,
    ParentCancel,
    UserCancel,
    current_cause,
)
from trio_agents.cancel._causes import check_cause
from trio_agents.cancel._scope import forget_inherited_scopes


async def test_first_cause_wins_and_names_trios_cancelled_reason() -> None:
    """The first cause is kept; trio's Cancelled.reason is its description."""
    reasons: list[str | None] = []
    with CauseScope() as scope:
        scope.cancel(UserCancel())
        scope.cancel(HookCancel("later"))
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            reasons.append(exc.reason)
            raise
    assert scope.cause == UserCancel()
    assert scope.cancelled_caught
    assert scope.cancel_called
    assert reasons == ["UserCancel()"]


async def test_current_cause_is_readable_inside_and_under_a_shielded_cleanup() -> None:
    """current_cause() names the cause inside the region, also in a shielded finally."""
    seen: list[CancelCause | None] = [current_cause()]
    with CauseScope() as scope:
        seen.append(current_cause())
        scope.cancel(ParentCancel("agent-1"))
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.lowlevel.checkpoint()
                seen.append(current_cause())
    seen.append(current_cause())
    assert seen == [None, None, ParentCancel("agent-1"), None]


async def test_outermost_cancelled_scope_wins() -> None:
    """With an inner and an outer scope cancelled, current_cause() is the outer's cause."""
    seen: list[CancelCause | None] = []
    with CauseScope() as outer, CauseScope() as inner:
        inner.cancel(HookCancel("inner"))
        seen.append(current_cause())
        outer.cancel(DisposedCancel())
        try:
            await trio.lowlevel.checkpoint()
        finally:
            seen.append(current_cause())
    assert seen == [HookCancel("inner"), DisposedCancel()]
    assert outer.cancelled_caught
    assert not inner.cancelled_caught


async def test_non_cause_is_rejected_with_type_error() -> None:
    """Free strings (or anything not a CancelCause) are not causes."""
    scope = CauseScope()
    with pytest.raises(
        TypeError,
        match=r"^cancel causes are CancelCause instances such as UserCancel\(\); "
        r"got str 'user'$",
    ):
        scope.cancel("user")  # type: ignore[arg-type]
    assert scope.cause is None
    assert not scope.cancel_called
    assert check_cause(UserCancel()) == UserCancel()


async def test_deadline_expiry_leaves_the_cause_none(autojump_clock: trio.abc.Clock) -> None:
    """A deadline is trio's own cancellation: no typed cause."""
    with CauseScope(deadline=trio.current_time() + 5) as scope:
        assert scope.deadline == trio.current_time() + 5
        await trio.sleep(10)
    assert scope.cancelled_caught
    assert scope.cause is None


async def test_deadline_and_shield_are_passed_through() -> None:
    """deadline and shield read and write the wrapped trio scope."""
    scope = CauseScope(shield=True)
    assert scope.shield
    scope.shield = False
    assert not scope.shield
    later = trio.current_time() + 100
    scope.deadline = later
    assert scope.deadline == later
    assert repr(scope) == "<CauseScope cause=None cancel_called=False>"
    scope.cancel(UserCancel())
    assert repr(scope) == "<CauseScope cause=UserCancel() cancel_called=True>"


async def test_shielded_cause_scope_is_not_cancelled_from_outside() -> None:
    """A shielded CauseScope keeps its body running under an outer cancel."""
    ran: list[str] = []
    with trio.CancelScope() as outer:
        outer.cancel()
        with CauseScope(shield=True):
            await trio.lowlevel.checkpoint()
            ran.append("shielded body ran")
    assert ran == ["shielded body ran"]


async def test_spawned_tasks_inherit_the_scopes_of_their_spawner() -> None:
    """A task started inside a CauseScope reads that scope's cause."""
    seen: list[CancelCause | None] = []
    with CauseScope() as scope:
        async with trio.open_nursery() as nursery:

            async def child() -> None:
                try:
                    await trio.sleep_forever()
                finally:
                    seen.append(current_cause())

            nursery.start_soon(child)
            await trio.lowlevel.checkpoint()
            scope.cancel(UserCancel())
    assert seen == [UserCancel()]


def test_causes_are_frozen_values() -> None:
    """Causes compare by value, are hashable and immutable, and describe themselves."""
    assert ParentCancel("a") == ParentCancel("a") != ParentCancel("b")
    assert len({UserCancel(), UserCancel(), DisposedCancel()}) == 2
    assert HookCancel("veto").describe() == "HookCancel(reason='veto')"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        HookCancel("veto").reason = "other"  # type: ignore[misc]
    assert all(
        issubclass(c, CancelCause) for c in (UserCancel, ParentCancel, DisposedCancel, HookCancel)
    )


async def test_forget_inherited_scopes_hides_the_spawners_cancelled_scope() -> None:
    """A task that forgets its inherited scopes no longer reports its spawner's cause."""
    seen: list[CancelCause | None] = []

    async def owned_elsewhere() -> None:
        seen.append(current_cause())
        forget_inherited_scopes()
        seen.append(current_cause())

    with CauseScope() as scope:
        scope.cancel(UserCancel())
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(owned_elsewhere)
        assert current_cause() == UserCancel()
    assert seen == [UserCancel(), None]


@attrs.frozen
class _Counted(CancelCause):
    """A cause without fields whose repr counts its calls."""

    def __repr__(self) -> str:
        _REPRS.append(type(self).__name__)
        return "_Counted()"


_REPRS: list[str] = []


def test_a_cause_without_fields_is_described_once_per_class() -> None:
    """Every instance of a cause without fields reads the same, so its text is made once."""
    _REPRS.clear()
    assert [_Counted().describe() for _ in range(3)] == ["_Counted()"] * 3
    assert _REPRS == ["_Counted"]
    assert HookCancel("a").describe() == "HookCancel(reason='a')"
    assert HookCancel("b").describe() == "HookCancel(reason='b')"
