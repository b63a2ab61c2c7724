"""Typed service keys: a service's name together with, for the type checker, its type.

Rules:
- A :class:`ServiceKey` is a name and a type parameter; ``ctx.get(key)`` returns ``T | None``,
  ``ctx.service(key)`` returns ``T`` and ``ctx.provide(key, service)`` accepts only a ``T``, so
  mypy checks the code on both sides of a service (trio's ``TaskStatus[T]`` is the model).
- A key is only a name at run time: ``ctx.get(AGENTS)`` and ``ctx.get("agents")`` are the same
  lookup, and a plugin's ``inject`` may list keys or names.
- Each layer defines the keys of the services it provides, beside their types.
"""

from __future__ import annotations

from typing import Generic, TypeVar, final

import attrs

T = TypeVar("T")


@final
@attrs.frozen
class ServiceKey(Generic[T]):
    """The key of a service of type ``T``: ``AGENTS: Final[ServiceKey[AgentRegistry]]``.

    Args:
        name: the service's name (an identifier, so ``ctx.<name>`` works too).
    """

    name: str

    def __str__(self) -> str:
        return self.name


def service_name(key: ServiceKey[T] | str) -> str:
    """The name a key or a name stands for."""
    return key.name if isinstance(key, ServiceKey) else key
