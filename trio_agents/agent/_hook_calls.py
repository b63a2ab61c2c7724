"""Where an agent's work calls its hooks: one function per point, and what a veto does there.

Rules:
- A call site asks ``hooks.at(POINT)`` first and calls in here only when the tuple is not
  empty, so an agent with no hooks builds no event.
- In a turn, a veto (``turn_start``, ``pre_model``, ``post_model``, ``turn_end``) aborts the
  turn with the :class:`HookCancel` and lets the cancel land: the turn ends ``blocked`` with
  it as the recorded cause.
- A vetoed tool call is an error result the model reads: ``started=False`` at ``pre_tool``
  (the tool did not run), the call's own ``started`` at ``post_tool`` (it ran).
- A vetoed message or child agent raises :class:`HookRefusedError` before anything of it is
  stored. ``child_end`` and ``agent_dispose`` run in the agent's teardown, shielded (each hook
  is bounded by its timeout) and only tell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..cancel import CancelCause, HookCancel
from ..model import ModelRequest, ToolCallRequested
from ..session import AssistantMessage, Compacted, StopReason, ToolCall, TurnStarted
from ._hook_points import (
    AGENT_DISPOSE,
    CHILD_END,
    CHILD_START,
    POST_COMPACT,
    POST_MODEL,
    POST_TOOL,
    PRE_COMPACT,
    PRE_MODEL,
    PRE_TOOL,
    PROMPT_ACCEPTED,
    TURN_END,
    TURN_START,
    AgentDispose,
    ChildEnd,
    ChildStart,
    PostCompact,
    PostModel,
    PostTool,
    PreCompact,
    PreModel,
    PreTool,
    PromptAccepted,
    TurnEnd,
    TurnStart,
)
from ._hooks import HookRefusedError, HookRegistry
from ._results import ToolResult

if TYPE_CHECKING:
    from ..session import Session
    from ._meter import ContextUsage


class _Turn(Protocol):
    """What a veto stops: the running turn (``Turn``)."""

    @property
    def id(self) -> str: ...

    def abort(self, cause: CancelCause) -> None: ...


class _Parts(Protocol):
    """What the calls read of an agent: its parts (``AgentParts``)."""

    id: str
    session: Session
    hooks: HookRegistry


async def _block(turn: _Turn, cause: HookCancel) -> None:
    turn.abort(cause)
    await trio.lowlevel.checkpoint()  # the cancel lands here: the turn ends blocked


async def turn_started(parts: _Parts, turn: _Turn, messages: Sequence[str]) -> None:
    """``turn_start``: the turn claimed ``messages``."""
    event = TurnStart(parts.id, parts.id, turn.id, tuple(messages))
    _, stop = await parts.hooks.run(TURN_START, event)
    if isinstance(stop, HookCancel):
        await _block(turn, stop)


async def before_model(parts: _Parts, turn: _Turn, request: ModelRequest) -> ModelRequest:
    """``pre_model``: the request to send (as the hooks edited it)."""
    event, stop = await parts.hooks.run(PRE_MODEL, PreModel(parts.id, parts.id, turn.id, request))
    if isinstance(stop, HookCancel):
        await _block(turn, stop)
    return event.request


async def after_model(
    parts: _Parts, turn: _Turn, text: Sequence[str], calls: Sequence[ToolCallRequested]
) -> None:
    """``post_model``: the model said ``text`` and asked for ``calls``."""
    event = PostModel(parts.id, parts.id, turn.id, "".join(text), tuple(calls))
    _, stop = await parts.hooks.run(POST_MODEL, event)
    if isinstance(stop, HookCancel):
        await _block(turn, stop)


async def before_tool(
    parts: _Parts, turn_id: str, call: ToolCallRequested
) -> tuple[Mapping[str, Any], ToolResult | None]:
    """``pre_tool``: the arguments to call with, or the call's answer instead of running it."""
    event = PreTool(parts.id, parts.id, turn_id, call.call_id, call.name, call.arguments)
    event, stop = await parts.hooks.run(PRE_TOOL, event)
    if isinstance(stop, HookCancel):
        refusal = f"tool call {call.name!r} was blocked by a hook: {stop.reason}"
        return event.arguments, ToolResult(refusal, is_error=True, started=False)
    return event.arguments, stop


async def after_tool(
    parts: _Parts,
    turn_id: str,
    call: ToolCallRequested,
    arguments: Mapping[str, Any],
    result: ToolResult,
) -> ToolResult:
    """``post_tool``: the result the model reads (as the hooks edited it)."""
    event = PostTool(parts.id, parts.id, turn_id, call.call_id, call.name, arguments, result)
    event, stop = await parts.hooks.run(POST_TOOL, event)
    if isinstance(stop, HookCancel):
        withheld = f"the result of tool {call.name!r} was withheld by a hook: {stop.reason}"
        return ToolResult(withheld, is_error=True, started=result.started)
    return event.result


async def turn_ending(parts: _Parts, turn: _Turn, stop_reason: StopReason) -> None:
    """``turn_end``: the turn's steps are over; a veto blocks it."""
    event = TurnEnd(parts.id, parts.id, turn.id, stop_reason, _answer(parts.session, turn.id))
    _, stop = await parts.hooks.run(TURN_END, event)
    if isinstance(stop, HookCancel):
        await _block(turn, stop)


def _answer(session: Session, turn_id: str) -> str:
    """The text of the turn's final step (what ``ask`` answers), from its records.

    Read from the end in growing windows: a snapshot of the whole session per turn would
    make a long session's turns cost its length (``bench_hooks``).
    """
    end, size = session.last_seq + 1, 16
    while True:
        start = max(0, end - size)
        for record in reversed(session.records_since(start)):
            if getattr(record, "turn_id", None) != turn_id:
                continue
            if isinstance(record, AssistantMessage):
                return record.content
            if isinstance(record, ToolCall | TurnStarted):
                return ""
        if start == 0:
            return ""
        size *= 4


async def before_compact(
    parts: _Parts, turn_id: str | None, context: ContextUsage
) -> HookCancel | None:
    """``pre_compact``: the veto, if a hook vetoed the compaction."""
    _, stop = await parts.hooks.run(PRE_COMPACT, PreCompact(parts.id, parts.id, turn_id, context))
    return stop if isinstance(stop, HookCancel) else None


async def after_compact(parts: _Parts, turn_id: str | None, record: Compacted) -> None:
    """``post_compact``: the compaction was recorded (it only tells)."""
    await parts.hooks.run(POST_COMPACT, PostCompact(parts.id, parts.id, turn_id, record))


def message_accepted(hooks: HookRegistry, agent_id: str, lane: str, content: str) -> None:
    """``prompt_accepted``, synchronously.

    Raises:
        HookRefusedError: a hook vetoed the message.
    """
    veto = hooks.run_sync(PROMPT_ACCEPTED, PromptAccepted(agent_id, agent_id, lane, content))
    if veto is not None:
        raise HookRefusedError(
            f"agent {agent_id} refused the message: {veto.reason} (a prompt_accepted hook "
            f"vetoed it; nothing was queued)",
            veto,
        )


async def child_starting(hooks: HookRegistry, parent_id: str, child_id: str) -> None:
    """``child_start``, before anything of the child is built.

    Raises:
        HookRefusedError: a hook vetoed the child.
    """
    _, stop = await hooks.run(CHILD_START, ChildStart(parent_id, parent_id, child_id))
    if isinstance(stop, HookCancel):
        raise HookRefusedError(
            f"child agent {child_id} of agent {parent_id} was refused: {stop.reason} (a "
            f"child_start hook vetoed it; nothing was created)",
            stop,
        )


async def agent_gone(hooks: HookRegistry, agent_id: str, parent_id: str | None) -> None:
    """``child_end`` (for a child) then ``agent_dispose``, in the agent's teardown."""
    with trio.CancelScope(shield=True):
        if parent_id is not None and hooks.at(CHILD_END):
            await hooks.run(CHILD_END, ChildEnd(parent_id, parent_id, agent_id))
        if hooks.at(AGENT_DISPOSE):
            await hooks.run(AGENT_DISPOSE, AgentDispose(agent_id, agent_id))


def vetoed_by(error: BaseException) -> HookCancel | None:
    """The hook veto a failure carries (a compaction a hook refused), if any."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, HookCancel) else None
