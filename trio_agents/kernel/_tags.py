"""Tag registries: the one rule for naming the classes of a serialized tagged union.

Rules:
- A tag is a snake_case identifier (``turn_ended``); by default a class's own name in
  snake_case (``TurnEnded`` -> ``turn_ended``).
- A tag names one class and a class has one tag: registering a taken tag, or a registered
  class under another tag, is refused; registering a class again under its own tag is a no-op.
- A refused registration changes nothing.
"""

from __future__ import annotations

import re
from typing import Generic, TypeVar, final

__all__ = ["TagRegistry", "snake_case"]

T = TypeVar("T")

_TAG = re.compile(r"[a-z][a-z0-9_]*")


def snake_case(name: str) -> str:
    """``TurnEnded`` -> ``turn_ended``: the default tag of a class."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@final
class TagRegistry(Generic[T]):
    """The classes of one tagged union by tag, and their tags by class.

    Args:
        kind: what the union holds, for messages (``"record"``, ``"cause"``).
        example: a valid tag of this union, for the message about a malformed one.
    """

    __slots__ = ("_by_class", "_by_tag", "_example", "_kind")

    def __init__(self, kind: str, example: str) -> None:
        self._kind = kind
        self._example = example
        # Invariant: the two maps are inverse of each other.
        self._by_tag: dict[str, type[T]] = {}
        self._by_class: dict[type[T], str] = {}

    def add(self, cls: type[T], tag: str | None = None) -> str:
        """Register ``cls`` under ``tag`` (its snake_case name by default) and return the tag.

        Raises:
            ValueError: the tag is malformed, or taken by another class (or the class has
                another tag); nothing is registered.
        """
        tag = snake_case(cls.__name__) if tag is None else tag
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise ValueError(
                f"{self._kind} tags are snake_case identifiers such as {self._example!r}; "
                f"got {tag!r}"
            )
        owner = self._by_tag.get(tag)
        if owner is not None and owner is not cls:
            raise ValueError(
                f"{self._kind} tag {tag!r} is already used by {owner.__qualname__}; "
                f"choose another tag"
            )
        current = self._by_class.get(cls)
        if current is not None and current != tag:
            raise ValueError(f"{cls.__qualname__} is already registered as {current!r}")
        self._by_tag[tag] = cls
        self._by_class[cls] = tag
        return tag

    def tag_of(self, cls: type[T]) -> str | None:
        """The tag of ``cls``, or ``None`` if it is not registered."""
        return self._by_class.get(cls)

    def class_of(self, tag: str) -> type[T] | None:
        """The class registered under ``tag``, or ``None``."""
        return self._by_tag.get(tag)

    def tags(self) -> tuple[str, ...]:
        """Every registered tag, sorted."""
        return tuple(sorted(self._by_tag))
