"""Session records: the durable, model-visible history of a session.

Rules:
- Every record is a frozen attrs class, keyword-only, deriving from :class:`Record`.
- ``seq`` is ``-1`` until :meth:`Session.append` stamps it with the record's index.
- Each record class has one tag (``"type"`` in the serialized form); :func:`register_record`
  adds a class to the union that the converter reads and writes.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from operator import attrgetter
from typing import Any, Literal, TypeVar

import attrs

from .._base import TagRegistry, still_open
from ..cancel import CancelCause

R = TypeVar("R", bound="type[Record]")


@attrs.frozen(kw_only=True)
class Record:
    """Base of every session record.

    Attributes:
        seq: the record's index in its session, assigned by ``Session.append``
            (``-1`` before that).
    """

    seq: int = -1


class StopReason(enum.StrEnum):
    """Why a turn ended. ``interrupted`` only comes from crash repair on load."""

    COMPLETED = "completed"
    CANCELLED = "cancelled"
    ERROR = "error"
    MAX_STEPS = "max_steps"
    BLOCKED = "blocked"
    INTERRUPTED = "interrupted"


@attrs.frozen(kw_only=True)
class InboxSpliced(Record):
    """A change to an agent's inbox: a message added to, or removed from, one lane.

    An ``add`` carries ``content``; a ``remove`` carries ``reason`` (``"discarded"`` or
    ``"cancelled"``). Replaying these records restores the pending work of a resumed agent.
    """

    op: Literal["add", "remove"]
    lane: Literal["next_turn", "next_step"]
    message_id: str
    content: str | None = None
    wake: bool = True
    reason: str | None = None


@attrs.frozen(kw_only=True)
class UserMessage(Record):
    """A queued message claimed into a turn; from here on the model sees it."""

    message_id: str
    content: str
    turn_id: str


@attrs.frozen(kw_only=True)
class ImageAttached(Record):
    """An image that goes with a user message or a tool call's result (written before it).

    It names ``message_id`` (the queued message it was prompted with) or ``call_id`` (the
    call whose result it is part of); the model reads it with that message or result. The
    image is stored whole: base64 ``data`` and its ``mime_type`` (bounded by
    :data:`trio_agents.model.MAX_IMAGE_BYTES` where images are made).
    """

    message_id: str | None = None
    call_id: str | None = None
    mime_type: str
    data: str = attrs.field(repr=False)


@attrs.frozen(kw_only=True)
class AssistantMessage(Record):
    """The model's text output of one step.

    ``interrupted`` marks the text of a step whose stream was cut (a cancel, a model error):
    what had been streamed to the user when it stopped. It stays part of the history.
    """

    turn_id: str
    content: str
    interrupted: bool = False


@attrs.frozen(kw_only=True)
class ToolCall(Record):
    """The model asked for a tool call."""

    turn_id: str
    call_id: str
    name: str
    arguments: dict[str, Any]


@attrs.frozen(kw_only=True)
class ToolCallEnded(Record):
    """The outcome of a tool call (tag ``tool_result``).

    ``started=False`` means it was cancelled before it ran. The tool's own answer, before it
    is recorded, is :class:`trio_agents.agent.ToolResult`.
    """

    turn_id: str
    call_id: str
    name: str
    content: str
    is_error: bool = False
    started: bool = True


@attrs.frozen(kw_only=True)
class ToolApproval(Record):
    """Someone answered whether a tool call marked *ask* may run (tag ``tool_approval``).

    Written just before the call runs or is refused; a call cancelled while its question was
    open has none. ``allow_always`` and ``reject_always`` stand for the rest of the session
    (a resumed agent restores them) for calls of the same tool name.

    Attributes:
        turn_id: the turn of the call (``None`` for a call outside every turn).
        call_id: the model's id of the call, or ``None``.
        name: the tool's name.
        decision: ``allow_once``, ``allow_always``, ``reject_once``, ``reject_always`` or
            ``cancel`` (stop the turn).
        by: who answered: the approver's ``name`` (``"acp client"``, ``"terminal"``,
            ``"run --yes"``), or ``"standing answer"`` for an earlier ``*_always``.
    """

    turn_id: str | None = None
    call_id: str | None = None
    name: str
    decision: Literal["allow_once", "allow_always", "reject_once", "reject_always", "cancel"]
    by: str


@attrs.frozen(kw_only=True)
class ModelUsage(Record):
    """The token usage the model reported for one request of a turn.

    Attributes:
        input_tokens: every token the model read, the cached ones included.
        cache_creation_tokens: of those, the ones written to the provider's prompt cache.
        cache_read_tokens: of those, the ones read from the provider's prompt cache.
        model: the name of the model that answered (of a fallback chain, the member), or
            ``None`` in records written before it was recorded.
        cost: what the request cost in US dollars, by the runtime's price table, or
            ``None`` when the model's price is unknown (or the record predates costs).
    """

    turn_id: str
    input_tokens: int
    output_tokens: int
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    model: str | None = None
    cost: float | None = None


@attrs.frozen(kw_only=True)
class TurnStarted(Record):
    """A turn began."""

    turn_id: str


@attrs.frozen(kw_only=True)
class TurnEnded(Record):
    """A turn ended, on every path; it keeps the stop reason and the typed cancel cause."""

    turn_id: str
    stop_reason: StopReason
    cause: CancelCause | None = None
    error: str | None = None


@attrs.frozen(kw_only=True)
class Compacted(Record):
    """The model-visible history was compacted; nothing was removed from the session.

    From this record on, the conversation a model sees is the system text, then ``summary``
    (as system text), then what the records from ``kept_from_seq`` on say. Every record before
    it stays in the session (``sessions show`` prints them all, with this as a marker).

    Attributes:
        summary: what stands for the records before ``kept_from_seq`` (it includes what an
            earlier compaction's summary said); empty when they are simply dropped.
        kept_from_seq: the ``seq`` of the first record still seen as it is: the
            ``TurnStarted`` of the oldest turn kept (or the seq of this record: none kept).
        turn_id: the turn that needed the compaction, or ``None`` for one asked for on demand
            (``await agent.compact()``).
        tokens_before: the estimated size of the conversation before, in tokens.
        tokens_after: the estimated size after, in tokens.
    """

    summary: str
    kept_from_seq: int
    turn_id: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0


@attrs.frozen(kw_only=True)
class ChildStarted(Record):
    """The agent started a child agent through its ``task`` tool.

    Attributes:
        turn_id: the turn whose tool call started it.
        call_id: that tool call's id.
        child_id: the child's agent (and session) id.
        definition: the name of the agent definition it was made from.
        background: whether the call answered at once (the child runs on alone).
    """

    turn_id: str | None = None
    call_id: str | None = None
    child_id: str
    definition: str
    background: bool = False


@attrs.frozen(kw_only=True)
class ChildEnded(Record):
    """A child the agent started (:class:`ChildStarted`) ended its work.

    Attributes:
        child_id: the child's id.
        stop_reason: how the child's turn ended; ``interrupted`` when the process ended
            while it ran (written when the parent is resumed).
        cause: the typed cause of a cancelled child, or ``None``.
        error: the child's error, or ``None``.
        input_tokens: the tokens the child's model requests read.
        output_tokens: the tokens they wrote.
        requests: how many model requests the child made.
        cost: what they cost in US dollars, ``None`` when no price was known.
        turns: how many turns the child ran.
        tool_calls: how many of its tool calls started.

    What the child spent counts against its ancestors' budgets; a resumed parent folds it
    from this record (the child's own session holds the details).
    """

    child_id: str
    stop_reason: StopReason
    cause: CancelCause | None = None
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cost: float | None = None
    turns: int = 0
    tool_calls: int = 0


@attrs.frozen(kw_only=True)
class FileEdited(Record):
    """A file tool changed a file (``write_file``, ``edit_file``), or ``/undo`` put it back.

    The texts are kept so a change can be shown and undone from the session alone.

    Attributes:
        turn_id: the turn of the call, or ``None``.
        call_id: the call's id, or ``None``.
        path: the file's absolute path.
        old_text: its text before, or ``None``: the file did not exist.
        new_text: its text after, or ``None``: the file was removed (an undone creation).
        undo_of: the ``seq`` of the change this one undoes, or ``None``.
    """

    turn_id: str | None = None
    call_id: str | None = None
    path: str
    old_text: str | None = None
    new_text: str | None = None
    undo_of: int | None = None


@attrs.frozen(kw_only=True)
class AgentConfigured(Record):
    """What defines the agent of this session; the latest one is in force.

    Written when the agent is created, and again whenever a resume changes any of it, so a
    resumed agent is the same agent: same instructions, tool allow-list, step limit, model and
    working directory.

    Attributes:
        instructions: the system text, or ``None``.
        tools: the names of the tools the agent may call; ``None`` means every tool.
        max_steps: the most model requests one turn may make.
        model: the model spec (``"openai:gpt-4o-mini"``) the agent was given, or ``None`` for
            the runtime's default (also when it was given a model object, see ``model_name``).
        model_name: the model's ``name``, for display.
        model_object: the agent was given a model object, which the session cannot hold: a
            resume must be given a model (``resume(id, model=...)``).
        parent_id: the id of the parent agent, for a child agent.
        cwd: the absolute working directory of the agent's shell commands, or ``None`` for the
            process's own.
        ask: the names of the tools whose calls need approval in this agent (besides the
            tools marked ``ask`` themselves), sorted.
        budget: the agent's budget, its limits by name (``{"output_tokens": 100}``), or
            ``None`` for none (see ``trio_agents.agent.Budget``).
        created_at: when the agent was first created, in seconds since the epoch (wall
            clock; what a ``seconds`` budget counts from), or ``None`` in older records.
    """

    instructions: str | None = None
    tools: list[str] | None = None
    max_steps: int = 50
    model: str | None = None
    model_name: str | None = None
    parent_id: str | None = None
    cwd: str | None = None
    ask: list[str] = attrs.Factory(list)
    model_object: bool = False
    budget: dict[str, float] | None = None
    created_at: float | None = None


@attrs.frozen(kw_only=True)
class ModeChanged(Record):
    """The agent's mode changed (tag ``mode_changed``); the latest one is in force.

    A mode (``ask``, ``edit``, ``plan``: ``trio_agents.agent.MODES``) says which tool calls
    run unasked, which are asked about and which are refused; a resumed agent is in the mode
    its session's latest ``ModeChanged`` names (its first mode without one).

    Attributes:
        mode: the id of the mode now in force.
        turn_id: the turn running when it changed, or ``None`` (it applies from the next
            tool call).
    """

    mode: str
    turn_id: str | None = None


@attrs.frozen(kw_only=True)
class OutputProduced(Record):
    """A typed final answer the model gave in a turn that asked for one (``ask(output=)``).

    Every answer is recorded, the refused ones too; the turn's typed output is its accepted
    one (``problems`` empty), which ends the turn.

    Attributes:
        turn_id: the turn.
        answer: the JSON the model answered with; the text itself when it was not JSON.
        problems: why it was refused, one line each with its path; empty when accepted.
        call_id: the call of the final-answer tool that carried it, or ``None`` for an
            answer in the model's text (the model is told the problems in a user message).
    """

    turn_id: str
    answer: Any
    problems: list[str] = attrs.Factory(list)
    call_id: str | None = None


_RECORDS: TagRegistry[Record] = TagRegistry(
    "record",
    "turn_ended",
    base=Record,
    register="register_record",
    shape=" (@attrs.frozen(kw_only=True) class X(Record))",
)


def register_record(cls: R, tag: str | None = None) -> R:
    """Add a record class to the serialized union, under ``tag`` (its snake_case name by default).

    Usable as a decorator. Registering the same class under the same tag again is a no-op.

    Args:
        cls: a frozen attrs subclass of :class:`Record`.
        tag: the ``"type"`` value that names it in the serialized form.

    Returns:
        ``cls``.

    Raises:
        TypeError: ``cls`` is not an attrs subclass of :class:`Record`.
        ValueError: the tag is malformed, or taken by another class (or the class has another).
    """
    _RECORDS.add(cls, tag)
    return cls


def record_tag(cls: type[Record]) -> str:
    """The tag of a registered record class.

    Raises:
        TypeError: the class is not registered.
    """
    return _RECORDS.tag_for(cls)


def record_class(tag: str) -> type[Record] | None:
    """The record class registered under ``tag``, or ``None``."""
    return _RECORDS.class_of(tag)


def record_tags() -> tuple[str, ...]:
    """Every registered tag, sorted."""
    return _RECORDS.tags()


for _cls in (
    AgentConfigured,
    InboxSpliced,
    ImageAttached,
    UserMessage,
    AssistantMessage,
    ToolCall,
    ToolApproval,
    ModelUsage,
    TurnStarted,
    TurnEnded,
    Compacted,
    ChildStarted,
    ChildEnded,
    FileEdited,
    OutputProduced,
    ModeChanged,
):
    register_record(_cls)
# The tool's answer is ``agent.ToolResult``; the record of it kept its format-1 tag.
register_record(ToolCallEnded, "tool_result")


def open_turns(records: Sequence[Record]) -> list[str]:
    """The ids of turns that started and never ended, in the order they started."""
    spans = still_open(records, TurnStarted, TurnEnded, attrgetter("turn_id"))
    return [started.turn_id for started in spans]
