"""The hook points of an agent's life, and the typed event each one hands its hooks.

Rules:
- A :class:`HookPoint` is a name, the class of its event, the answer its hooks may give
  besides a veto, and what a veto there does. The module-level points are the only ones;
  ``HOOK_POINTS`` maps each name to its point (the config file names points by these names).
- Every event is a frozen attrs class carrying the ids it concerns (``agent_id``,
  ``session_id``, and ``turn_id``, ``call_id``, ``tool`` or ``child_id`` where they apply).
- What a hook answers: ``None`` (go on), a :class:`HookCancel` (a veto), or at an editing
  point the edited value: a :class:`ModelRequest` at ``pre_model``; new arguments (a mapping)
  or an answer instead of the call (a :class:`ToolResult`) at ``pre_tool``; a replacement
  :class:`ToolResult` at ``post_tool``. Anything else is the hook failing (its policy
  decides).
- ``prompt_accepted`` runs synchronously, since ``agent.prompt()`` never blocks: its hooks
  are plain functions. Every other point awaits its hooks, each under its timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Generic, Literal, TypeVar

import attrs

from ..model import ModelRequest, ToolCallRequested
from ..session import Compacted, StopReason
from ._meter import ContextUsage
from ._results import ToolResult

E = TypeVar("E")
R = TypeVar("R")

#: What a veto at a point does.
Veto = Literal["refuse", "block", "error_result", "ignored"]


@attrs.frozen
class HookPoint(Generic[E, R]):
    """A point of an agent's life where hooks run.

    Attributes:
        name: the point's name (``pre_tool``), as the config file writes it.
        event: the class of the event its hooks receive.
        answers: the classes of the edits its hooks may answer with (besides a veto).
        veto: what a veto does: ``refuse`` the prompt, ``block`` the turn (it ends
            ``blocked``), answer the model with an ``error_result``, or nothing
            (``ignored``: the point only tells).
        matches: the event field that a hook's ``match`` is tested against, or ``None``.
        sync: its hooks are plain functions (``prompt_accepted``).
    """

    name: str
    event: type[E] = attrs.field(repr=False)
    answers: tuple[type, ...] = attrs.field(repr=False)
    veto: Veto = attrs.field(repr=False)
    matches: str | None = attrs.field(default=None, repr=False)
    sync: bool = attrs.field(default=False, repr=False)


@attrs.frozen
class PromptAccepted:
    """A message is about to be queued (``prompt``, ``steer`` or ``inject``)."""

    agent_id: str
    session_id: str
    lane: str
    content: str


@attrs.frozen
class TurnStart:
    """A turn began; ``messages`` are the texts it claimed from the inbox."""

    agent_id: str
    session_id: str
    turn_id: str
    messages: tuple[str, ...]


@attrs.frozen
class PreModel:
    """A model request is about to be sent; a hook may answer an edited ``request``."""

    agent_id: str
    session_id: str
    turn_id: str
    request: ModelRequest = attrs.field(repr=False)


@attrs.frozen
class PostModel:
    """The model answered: its ``text`` and the tool ``calls`` it asked for (recorded)."""

    agent_id: str
    session_id: str
    turn_id: str
    text: str
    calls: tuple[ToolCallRequested, ...]


@attrs.frozen
class _ToolCallEvent:
    """The fields of both tool-call points: which call, of which tool, with what arguments."""

    agent_id: str
    session_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: Mapping[str, Any]


@attrs.frozen
class PreTool(_ToolCallEvent):
    """A tool call is about to run; a hook may veto it, edit ``arguments`` or answer it."""


@attrs.frozen
class PostTool(_ToolCallEvent):
    """A tool call produced ``result``; a hook may replace it."""

    result: ToolResult


@attrs.frozen
class TurnEnd:
    """A turn's steps are over (``completed`` or ``max_steps``), before its end is recorded;
    ``answer`` is the text of its final step (what ``ask`` returns)."""

    agent_id: str
    session_id: str
    turn_id: str
    stop_reason: StopReason
    answer: str


@attrs.frozen
class PreCompact:
    """A compaction is about to ask its policy (``turn_id`` ``None``: ``agent.compact()``)."""

    agent_id: str
    session_id: str
    turn_id: str | None
    context: ContextUsage = attrs.field(repr=False)


@attrs.frozen
class PostCompact:
    """A compaction was recorded."""

    agent_id: str
    session_id: str
    turn_id: str | None
    record: Compacted = attrs.field(repr=False)


@attrs.frozen
class ChildStart:
    """A child agent ``child_id`` of agent ``agent_id`` is about to be created (or resumed)."""

    agent_id: str
    session_id: str
    child_id: str


@attrs.frozen
class ChildEnd:
    """The child agent ``child_id`` of agent ``agent_id`` was disposed."""

    agent_id: str
    session_id: str
    child_id: str


@attrs.frozen
class AgentDispose:
    """The agent was disposed: its loop stopped and its scope unwound."""

    agent_id: str
    session_id: str


PROMPT_ACCEPTED: Final[HookPoint[PromptAccepted, None]] = HookPoint(
    "prompt_accepted", PromptAccepted, (), "refuse", sync=True
)
TURN_START: Final[HookPoint[TurnStart, None]] = HookPoint("turn_start", TurnStart, (), "block")
PRE_MODEL: Final[HookPoint[PreModel, ModelRequest]] = HookPoint(
    "pre_model", PreModel, (ModelRequest,), "block"
)
POST_MODEL: Final[HookPoint[PostModel, None]] = HookPoint("post_model", PostModel, (), "block")
PRE_TOOL: Final[HookPoint[PreTool, Mapping[str, Any] | ToolResult]] = HookPoint(
    "pre_tool", PreTool, (Mapping, ToolResult), "error_result", matches="tool"
)
POST_TOOL: Final[HookPoint[PostTool, ToolResult]] = HookPoint(
    "post_tool", PostTool, (ToolResult,), "error_result", matches="tool"
)
TURN_END: Final[HookPoint[TurnEnd, None]] = HookPoint("turn_end", TurnEnd, (), "block")
PRE_COMPACT: Final[HookPoint[PreCompact, None]] = HookPoint("pre_compact", PreCompact, (), "block")
POST_COMPACT: Final[HookPoint[PostCompact, None]] = HookPoint(
    "post_compact", PostCompact, (), "ignored"
)
CHILD_START: Final[HookPoint[ChildStart, None]] = HookPoint(
    "child_start", ChildStart, (), "refuse", matches="child_id"
)
CHILD_END: Final[HookPoint[ChildEnd, None]] = HookPoint(
    "child_end", ChildEnd, (), "ignored", matches="child_id"
)
AGENT_DISPOSE: Final[HookPoint[AgentDispose, None]] = HookPoint(
    "agent_dispose", AgentDispose, (), "ignored"
)

#: Every point by name, in the order of an agent's life.
HOOK_POINTS: Final[Mapping[str, HookPoint[Any, Any]]] = {
    point.name: point
    for point in (
        PROMPT_ACCEPTED,
        TURN_START,
        PRE_MODEL,
        POST_MODEL,
        PRE_TOOL,
        POST_TOOL,
        TURN_END,
        PRE_COMPACT,
        POST_COMPACT,
        CHILD_START,
        CHILD_END,
        AGENT_DISPOSE,
    )
}
