"""The tag registry behind register_record and register_cause: one rule for both unions."""

from __future__ import annotations

import attrs
import pytest

from trio_agents._base import TagRegistry, snake_case
from trio_agents.cancel import CancelCause
from trio_agents.session import register_cause


class _A:
    pass


class _B:
    pass


def test_the_default_tag_is_the_class_name_in_snake_case() -> None:
    """TurnEnded -> turn_ended; a registered class is found both ways."""
    assert snake_case("TurnEnded") == "turn_ended"
    registry: TagRegistry[object] = TagRegistry("thing", "some_thing")

    class TurnEnded:
        pass

    assert registry.add(TurnEnded) == "turn_ended"
    assert registry.tag_of(TurnEnded) == "turn_ended"
    assert registry.class_of("turn_ended") is TurnEnded
    assert registry.tags() == ("turn_ended",)


def test_registering_again_under_the_same_tag_is_a_no_op() -> None:
    """The same class under the same tag twice leaves one entry."""
    registry: TagRegistry[object] = TagRegistry("thing", "some_thing")
    registry.add(_A, "a")
    registry.add(_A, "a")
    assert registry.tags() == ("a",)


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ((_A, "a"), (_B, "a"), r"^thing tag 'a' is already used by _A; choose another tag$"),
        ((_A, "a"), (_A, "b"), r"^_A is already registered as 'a'$"),
        (
            (_A, "a"),
            (_B, "B-1"),
            r"^thing tags are snake_case identifiers such as 'some_thing'; got 'B-1'$",
        ),
    ],
)
def test_a_refused_registration_says_why_and_changes_nothing(
    first: tuple[type, str], second: tuple[type, str], message: str
) -> None:
    """A taken tag, a second tag for a class and a malformed tag are refused; nothing moves."""
    registry: TagRegistry[object] = TagRegistry("thing", "some_thing")
    registry.add(*first)
    with pytest.raises(ValueError, match=message):
        registry.add(*second)
    assert registry.tags() == ("a",)
    assert registry.tag_of(_B) is None
    assert registry.tag_of(_A) == "a"


@attrs.frozen
class OddCancel(CancelCause):
    """A cause registered under a malformed tag in the test below."""


def test_register_cause_validates_tags_like_register_record() -> None:
    """A cause tag is a snake_case identifier too (it used to be taken as given)."""
    with pytest.raises(
        ValueError, match=r"^cause tags are snake_case identifiers such as 'user_cancel'; "
    ):
        register_cause(OddCancel, "Odd Cancel")
    with pytest.raises(ValueError, match=r"^cause tag 'user_cancel' is already used by"):
        register_cause(OddCancel, "user_cancel")


def test_a_registry_with_a_base_refuses_other_classes_and_names_its_function() -> None:
    """Only attrs subclasses of the base are registered; a missing one names the fix."""
    registry: TagRegistry[CancelCause] = TagRegistry(
        "cause", "user_cancel", base=CancelCause, noun="cancel cause", register="register_it"
    )
    with pytest.raises(TypeError, match=r"^register_it\(\) takes an attrs subclass of "):
        registry.add(_A)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError,
        match=r"^cancel cause OddCancel is not registered, for a test; call "
        r"register_it\(OddCancel\) first$",
    ):
        registry.tag_for(OddCancel, ", for a test")
    assert registry.add(OddCancel) == "odd_cancel"
    assert registry.tag_for(OddCancel) == "odd_cancel"
