"""Tag registries: the one rule for naming the classes of a serialized tagged union.

Rules:
- A tag is a snake_case identifier (``turn_ended``); by default a class's own name in
  snake_case (``TurnEnded`` -> ``turn_ended``).
- A tag names one class and a class has one tag: registering a taken tag, or a registered
  class under another tag, is refused; registering a class again under its own tag is a no-op.
- A tag names an attrs subclass of the union's base class; anything else is refused.
- A refused registration changes nothing.
- Serializing a class that is not registered is refused with the one message that names the
  registering function (:meth:`TagRegistry.tag_for`).
"""

from __future__ import annotations

import re
from typing import Generic, TypeVar, final

import attrs

T = TypeVar("T")

_TAG = re.compile(r"[a-z][a-z0-9_]*")


def snake_case(name: str) -> str:
    """``TurnEnded`` -> ``turn_ended``: the default tag of a class."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@final
@attrs.define(eq=False, repr=False)
class TagRegistry(Generic[T]):
    """The classes of one tagged union by tag, and their tags by class.

    Args:
        kind: what the union's tags name, for messages (``"record"``, ``"cause"``).
        example: a valid tag of this union, for the message about a malformed one.
        base: the class every member subclasses (``object``: any attrs class).
        noun: what one member is called in messages (``"record class"``).
        register: the public function that registers a member, for messages
            (``"register_record"``), and ``shape``: how a member is declared, shown when a
            class that is not one is registered.
    """

    _kind: str
    _example: str
    _base: type[T] | None = attrs.field(default=None, kw_only=True)
    _noun: str = attrs.field(kw_only=True)
    _register: str = attrs.field(default="register", kw_only=True)
    _shape: str = attrs.field(default="", kw_only=True)
    # Invariant: the two maps are inverse of each other.
    _by_tag: dict[str, type[T]] = attrs.field(factory=dict, init=False)
    _by_class: dict[type[T], str] = attrs.field(factory=dict, init=False)

    @_noun.default
    def _noun_default(self) -> str:
        return f"{self._kind} class"

    def add(self, cls: type[T], tag: str | None = None) -> str:
        """Register ``cls`` under ``tag`` (its snake_case name by default) and return the tag.

        Raises:
            TypeError: ``cls`` is not an attrs subclass of the union's base class.
            ValueError: the tag is malformed, or taken by another class (or the class has
                another tag); nothing is registered.
        """
        base = self._base
        if base is not None and not (
            isinstance(cls, type) and issubclass(cls, base) and attrs.has(cls)
        ):
            raise TypeError(
                f"{self._register}() takes an attrs subclass of {base.__name__}"
                f"{self._shape}; got {cls!r}"
            )
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

    def tag_for(self, cls: type[T], why: str = "") -> str:
        """The tag of ``cls``, which must be registered.

        Args:
            why: what needs the tag, for the message (``", so the turn ... could not record
                it"``).

        Raises:
            TypeError: ``cls`` is not registered; the message names the function to call.
        """
        tag = self._by_class.get(cls)
        if tag is None:
            raise TypeError(
                f"{self._noun} {cls.__qualname__} is not registered{why}; call "
                f"{self._register}({cls.__name__}) first"
            )
        return tag

    def class_of(self, tag: str) -> type[T] | None:
        """The class registered under ``tag``, or ``None``."""
        return self._by_tag.get(tag)

    def tags(self) -> tuple[str, ...]:
        """Every registered tag, sorted."""
        return tuple(sorted(self._by_tag))
