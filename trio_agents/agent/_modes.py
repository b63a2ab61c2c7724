"""Modes: which of an agent's tool calls run unasked, which are asked about, which are refused.

Rules:
- A mode sorts the tools by what they do (:func:`tool_kind`): ``read`` (a tool marked
  ``read_only``, and the built-in readers :data:`READ_TOOLS`), ``edit`` (:data:`EDIT_TOOLS`,
  the file tools that change files) and ``change`` (everything else: ``bash``, ``bash_kill``,
  MCP tools not marked read-only, a plugin's tools).
- ``ask`` (the first mode, every agent's until it changes): the approval rules as they are
  (:mod:`._approval`: the front end asks before ``bash``, ``write_file``, ``edit_file`` and
  MCP tools unless it is configured otherwise). ``edit``: the same, but the ``edit`` tools
  run unasked. ``plan``: only ``read`` tools run; a call of any other tool is refused before
  anything runs (an error result, ``started=False``) with a line naming the mode and how to
  leave it.
- An agent's mode is its session's latest :class:`~trio_agents.session.ModeChanged` (so a
  resumed or loaded agent is back in it); a child agent without one of its own follows its
  parent's, as it is at the time of the call.
- Changing the mode records a ``ModeChanged`` and applies from the next tool call (a call
  already asked about, or running, is not touched); the running turn goes on.
- The model switch (:func:`switched_model`, ``Agent.set_model``) is the other thing a user
  changes in a running agent: the model is resolved and checked (its API key) first, then
  a new ``AgentConfigured`` is recorded (the latest is in force, so a resume rebuilds the
  new model from its spec), and the agent's next model request goes to it.
- Each mode names the sandbox policy its commands run under when sandboxing is on
  (``plan``: ``read-only``; ``ask`` and ``edit``: ``workspace-write``); the shell reads it
  (never loosening its own). A tool marked ``sandboxed`` (``bash`` under a sandboxed shell)
  is not refused by ``plan``: it runs there read-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal, TypeAlias

import attrs

from .._errors import TrioAgentsError
from ..model import Model, model_from_spec, preflight
from ..session import ModeChanged, Record
from ._config import AgentConfig

ToolKind: TypeAlias = Literal["read", "edit", "change"]

#: The built-in tools that only read (besides every tool marked ``read_only``). ``task`` and
#: ``task_cancel`` count as reading: a child follows its parent's mode, so the children of an
#: agent in ``plan`` only read too (as Claude Code's plan mode runs research subagents).
READ_TOOLS: Final = frozenset(
    {
        "read_file",
        "list_files",
        "glob",
        "grep",
        "plan",
        "bash_output",
        "task",
        "task_output",
        "task_cancel",
    }
)
#: The built-in tools that change files and nothing else.
EDIT_TOOLS: Final = frozenset({"write_file", "edit_file"})


class UnknownModeError(TrioAgentsError, ValueError):
    """A mode id that is not one of :data:`MODES`."""


@attrs.frozen
class Mode:
    """One mode an agent can be in (see the module rules).

    Attributes:
        id: what selects it (``/mode plan``, ACP's ``modeId``).
        name: its name for a person.
        description: one line for a person.
        unasked: the kinds of tool that run without asking, whatever the approval rules say.
        refused: the kinds of tool that are refused.
        sandbox: the sandbox policy of its shell commands when sandboxing is on.
    """

    id: str
    name: str
    description: str
    unasked: frozenset[ToolKind] = frozenset()
    refused: frozenset[ToolKind] = frozenset()
    sandbox: str = "workspace-write"

    def runs_unasked(self, name: str, *, read_only: bool = False) -> bool:
        """Whether a call of tool ``name`` runs without asking in this mode."""
        # The first mode runs nothing unasked: every tool call of an agent in it pays one test.
        return bool(self.unasked) and tool_kind(name, read_only=read_only) in self.unasked

    def refusal(self, name: str, *, read_only: bool = False, sandboxed: bool = False) -> str | None:
        """The error result of a call of tool ``name`` this mode refuses, or ``None``. A
        ``sandboxed`` tool runs under this mode's sandbox policy instead: a mode whose
        policy is ``read-only`` lets it run (it can change nothing)."""
        if not self.refused:  # as above: the first mode refuses nothing
            return None
        kind = tool_kind(name, read_only=read_only)
        if kind not in self.refused or (sandboxed and self.sandbox == "read-only"):
            return None
        what = "changes files" if kind == "edit" else "can change something"
        return (
            f"tool {name!r} is not available in the {self.id!r} mode ({self.description}): it "
            f"{what}, and it did not run. Read, search and plan; the user can switch to the "
            f"'ask' or 'edit' mode to let changes run"
        )


#: The modes, in the order a front end cycles through them (Shift-Tab in ``chat``).
MODES: Final = (
    Mode(
        "ask",
        "Ask",
        "asks before commands, file edits and MCP tools that change something",
    ),
    Mode(
        "edit",
        "Edit",
        "edits files without asking; asks before commands",
        unasked=frozenset({"edit"}),
    ),
    Mode(
        "plan",
        "Plan",
        "read-only: reads, searches and plans; refuses every tool that changes something",
        refused=frozenset({"edit", "change"}),
        sandbox="read-only",
    ),
)
_BY_ID: Final = {mode.id: mode for mode in MODES}


def tool_kind(name: str, *, read_only: bool = False) -> ToolKind:
    """What the tool ``name`` does, as the modes see it (see the module rules)."""
    if read_only or name in READ_TOOLS:
        return "read"
    return "edit" if name in EDIT_TOOLS else "change"


def mode_named(mode: str | Mode) -> Mode:
    """The mode of id ``mode`` (a :class:`Mode` is itself).

    Raises:
        UnknownModeError: no mode has that id; the message lists them.
    """
    if isinstance(mode, Mode):
        return mode
    found = _BY_ID.get(mode) if isinstance(mode, str) else None
    if found is None:
        known = ", ".join(m.id for m in MODES)
        raise UnknownModeError(f"unknown mode {mode!r}; the modes are {known}")
    return found


def recorded_mode(records: Iterable[Record]) -> Mode | None:
    """The mode the latest ``ModeChanged`` of ``records`` names, or ``None`` (none, or one
    of a mode this version does not know, which leaves the agent in its first mode)."""
    latest: str | None = None
    for record in records:
        if isinstance(record, ModeChanged):
            latest = record.mode
    return _BY_ID.get(latest) if latest is not None else None


def switched_model(config: AgentConfig, model: Model | str) -> tuple[AgentConfig, Model]:
    """The definition of an agent of ``config`` switched to ``model`` (a spec or a
    :class:`Model`), and the model resolved.

    Raises:
        ModelSpecError: ``model`` is a bad spec.
        ModelError: the model cannot answer as configured (a missing API key).
    """
    resolved = model_from_spec(model) if isinstance(model, str) else model
    preflight(resolved)
    return attrs.evolve(config.given(model=model), model_name=resolved.name), resolved
