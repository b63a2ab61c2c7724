"""What defines an agent, and how a resume combines the stored definition with new values.

Rules:
- ``create()`` records an :class:`AgentConfigured` with every value it was given (or its
  default). ``resume()`` starts from the latest stored one; each keyword it was given
  overrides that value, and a changed definition is recorded again, so the next resume keeps
  it.
- A model given as a spec string is recorded as that spec and rebuilt from it on resume; a
  model object is recorded by its ``name`` only (``model_object``), so a resume must be given
  a model (the object again, a spec, or ``None`` for the runtime's default): it is refused
  otherwise, never silently switched to the default. ``None`` (the runtime's default) is
  recorded as such, and a resume uses the default of the runtime that resumes it.
- A session stored before definitions were recorded has none: it resumes with the defaults.
- ``cwd`` is stored absolute; ``ask`` (like ``tools``) sorted and without duplicates.
- ``budget`` is stored as its limits by name; ``created_at`` (the wall clock at creation) is
  set once by ``create()`` and kept by every resume.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeAlias, TypeVar

import attrs

from ..model import Model
from ..session import AgentConfigured, Record
from ._budget import Budget


class Unset(enum.Enum):
    """The type of :data:`UNSET`: "not given, keep what is stored"."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: A keyword that ``resume()`` was not given: the stored value stays.
UNSET: Final = Unset.UNSET

#: In an agent's ``tools``, every tool not marked ``explicit``: ``tools=["*", "task"]`` is
#: every tool and the ``task`` tool, which ``tools=None`` does not give.
ALL_TOOLS: Final = "*"

T = TypeVar("T")
Maybe: TypeAlias = "T | Unset"

ToolNames: TypeAlias = "frozenset[str] | set[str] | list[str] | tuple[str, ...] | None"


def _tools(value: Iterable[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"tools is a collection of tool names, not one string; got {value!r}")
    names = tuple(sorted(set(value)))
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"tool names are strings; got {type(name).__name__} {name!r}")
    return names


def _cwd(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.path.abspath(os.fspath(value))


def _max_steps(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_steps is the most model requests per turn, >= 1; got {value!r}")
    return value


@attrs.frozen
class AgentConfig:
    """The definition of an agent, as recorded in its session.

    Attributes:
        instructions: the system text, or ``None``.
        tools: the sorted names of the tools the agent may call; ``None`` means every tool.
        max_steps: the most model requests one turn may make.
        model: the model spec, or ``None`` for the runtime's default.
        model_name: the name of the model the agent runs with.
        model_object: the agent was given a model object, which a resume cannot rebuild.
        parent_id: the parent agent's id, for a child agent.
        cwd: the absolute working directory of its shell commands, or ``None``.
        ask: the sorted names of the tools whose calls need approval in this agent (besides
            the tools marked ``ask``).
        budget: what the agent and its descendants may spend, or ``None``.
        created_at: when the agent was created (seconds since the epoch), or ``None``.
    """

    instructions: str | None = None
    tools: tuple[str, ...] | None = None
    max_steps: int = 50
    model: str | None = None
    model_name: str | None = None
    parent_id: str | None = None
    cwd: str | None = None
    ask: tuple[str, ...] = ()
    model_object: bool = False
    budget: Budget | None = None
    created_at: float | None = None

    @classmethod
    def of(cls, record: AgentConfigured | None) -> AgentConfig:
        """The definition a record holds (the defaults for ``None``)."""
        if record is None:
            return cls()
        return cls(
            instructions=record.instructions,
            tools=_tools(record.tools),
            max_steps=record.max_steps,
            model=record.model,
            model_name=record.model_name,
            parent_id=record.parent_id,
            cwd=record.cwd,
            ask=_tools(record.ask) or (),
            model_object=record.model_object,
            budget=Budget.of(record.budget) if record.budget else None,
            created_at=record.created_at,
        )

    def record(self) -> AgentConfigured:
        """The session record of this definition."""
        return AgentConfigured(
            instructions=self.instructions,
            tools=list(self.tools) if self.tools is not None else None,
            max_steps=self.max_steps,
            model=self.model,
            model_name=self.model_name,
            parent_id=self.parent_id,
            cwd=self.cwd,
            ask=list(self.ask),
            model_object=self.model_object,
            budget=self.budget.limits() if self.budget else None,
            created_at=self.created_at,
        )

    def given(
        self,
        *,
        model: Maybe[Model | str | None] = UNSET,
        tools: Maybe[ToolNames] = UNSET,
        instructions: Maybe[str | None] = UNSET,
        parent_id: Maybe[str | None] = UNSET,
        max_steps: Maybe[int] = UNSET,
        cwd: Maybe[str | os.PathLike[str] | None] = UNSET,
        ask: Maybe[ToolNames] = UNSET,
        budget: Maybe[Budget | None] = UNSET,
    ) -> AgentConfig:
        """This definition with every value that was given replaced (checked)."""
        changes: dict[str, Any] = {}
        if not isinstance(model, Unset):
            changes["model"] = model if isinstance(model, str) else None
            # Not isinstance(model, Model): a model object of an application that predates
            # Model.context_window still has its name recorded.
            changes["model_name"] = None if model is None or isinstance(model, str) else model.name
            changes["model_object"] = model is not None and not isinstance(model, str)
        if not isinstance(tools, Unset):
            changes["tools"] = _tools(tools)
        if not isinstance(instructions, Unset):
            if instructions is not None and not isinstance(instructions, str):
                raise TypeError(
                    f"instructions are text (str) or None; got {type(instructions).__name__}"
                )
            changes["instructions"] = instructions
        if not isinstance(parent_id, Unset):
            changes["parent_id"] = parent_id
        if not isinstance(max_steps, Unset):
            changes["max_steps"] = _max_steps(max_steps)
        if not isinstance(cwd, Unset):
            changes["cwd"] = _cwd(cwd)
        if not isinstance(ask, Unset):
            changes["ask"] = _tools(ask) or ()
        if not isinstance(budget, Unset):
            if budget is not None and not isinstance(budget, Budget):
                raise TypeError(f"budget is a Budget or None; got {type(budget).__name__}")
            changes["budget"] = budget if budget else None
        return attrs.evolve(self, **changes)


def latest_config(records: Sequence[Record]) -> AgentConfigured | None:
    """The latest :class:`AgentConfigured` of a session's records, or ``None``."""
    for record in reversed(records):
        if isinstance(record, AgentConfigured):
            return record
    return None
