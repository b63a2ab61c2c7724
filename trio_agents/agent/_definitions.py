"""Agent definitions: named templates the ``task`` tool starts children from.

Rules:
- A definition is an effect of the fiber that defines it (``await ctx.agents.define(...)``,
  or an ``[[agent_definitions]]`` table of the configuration, owned by the agent loop): it is
  gone when that fiber unloads and, since a reload unloads then applies, replaced on reload.
- Names are unique while defined: a second definition of a live name is refused (undefine
  it, or unload the fiber that defined it, first), as tool names are.
- Whoever needs to know (the ``task`` tool, whose description lists the definitions) is told
  of every change by a listener called synchronously after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import final

import attrs
import trio

from .._errors import TrioAgentsError
from ..kernel import Entry, current_context
from ..model import Model
from ._budget import Budget

#: The tools that start and reach children (``_task.py``); each is ``explicit``.
TASK_TOOLS = ("task", "task_output", "task_cancel")

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class DefinitionNameInUseError(TrioAgentsError, ValueError):
    """An agent definition of that name is defined already."""


def _check_name(_: object, __: object, name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"an agent definition's name is 1-64 of letters, digits, '_', '.', '-'; got {name!r}"
        )


def _check_steps(_: object, __: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_steps is the most model requests per turn, >= 1; got {value!r}")


def _check_budget(_: object, __: object, value: Budget | None) -> None:
    if value is not None and not isinstance(value, Budget):
        raise TypeError(f"an agent definition's budget is a Budget or None; got {value!r}")


def _names(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"tool names are a collection of names, not one string; got {value!r}")
    return tuple(sorted(set(value)))


def _check_description(_: object, __: object, value: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"an agent definition's description is text; got {value!r}")


@final
@attrs.frozen(kw_only=True)
class AgentDefinition:
    """A named template of a child agent.

    Attributes:
        name: what the ``task`` tool's ``agent`` argument names it by.
        description: what it is for, for the model deciding which to start.
        instructions: the child's system prompt.
        model: the child's model (a spec or a :class:`Model`), ``None``: the runtime's default.
        tools: the tools the child may call; ``None``: every tool not marked ``explicit``
            (so not ``task``: a child starts children only if its definition lists ``task``).
        ask: the tools whose calls need approval in the child (its approver is its parent's).
        max_steps: the most model requests one turn of the child may make.
        budget: what each child started from it (and its own children) may spend; its
            spending counts against its parent's budget too.
    """

    name: str = attrs.field(validator=_check_name)
    description: str = attrs.field(validator=_check_description)
    instructions: str | None = None
    model: Model | str | None = None
    tools: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    ask: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    max_steps: int = attrs.field(default=50, validator=_check_steps)
    budget: Budget | None = attrs.field(default=None, validator=_check_budget)


@final
@attrs.define(eq=False, repr=False)
class Definitions:
    """The agent definitions in force, each owned by the fiber that defined it."""

    # Invariant: dict order is definition order (the task tool lists them so).
    _defined: dict[str, AgentDefinition] = attrs.field(factory=dict, init=False)
    _listeners: list[Callable[[], object]] = attrs.field(factory=list, init=False)

    def get(self, name: str) -> AgentDefinition | None:
        """The definition named ``name``, or ``None``."""
        return self._defined.get(name)

    def list(self) -> tuple[AgentDefinition, ...]:
        """Every definition, in the order they were defined."""
        return tuple(self._defined.values())

    def on_change(self, listener: Callable[[], object]) -> None:
        """Call ``listener()`` after every definition or undefinition."""
        self._listeners.append(listener)

    def define(self, definition: AgentDefinition) -> Entry:
        """Define ``definition`` for as long as the calling fiber is loaded.

        Returns:
            The calling fiber's entry; ``await entry.close()`` undefines it early.

        Raises:
            DefinitionNameInUseError: a definition of that name is in force.
            FiberClosedError: the calling fiber is unloading.
        """
        if not isinstance(definition, AgentDefinition):
            raise TypeError(f"define() takes an AgentDefinition; got {definition!r}")
        if definition.name in self._defined:
            raise DefinitionNameInUseError(
                f"agent definition {definition.name!r} is defined already; unload the fiber "
                f"that defined it (or close its entry) first"
            )
        entry = current_context().defer(self._undefine, definition)
        self._defined[definition.name] = definition
        self._changed()
        return entry

    async def _undefine(self, definition: AgentDefinition) -> None:
        if self._defined.get(definition.name) is definition:
            del self._defined[definition.name]
            self._changed()
        await trio.lowlevel.checkpoint()

    def _changed(self) -> None:
        for listener in self._listeners:
            listener()
