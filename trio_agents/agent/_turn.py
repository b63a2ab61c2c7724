"""The turn driver: steps of model request, streamed output and concurrent tool calls.

Rules:
- A turn is ``TurnStarted`` → steps → ``TurnEnded``; ``TurnEnded`` is written and flushed on
  every path (completed, cancelled, error, max steps), shielded from cancellation.
- Each step claims the next-step lane, compacts the history first when the request would
  not fit the policy's share of the window (``_compaction.fit_window``), asks the model with
  the history rebuilt from the session's records, records what the model said, and runs the
  tool calls it asked for concurrently inside the turn's cancel scope.
- A tool call cancelled before it began is recorded ``started=False`` (no side effects); one
  cancelled while running is ``started=True`` (side effects possible).
- Stop reason of a cancelled turn: ``blocked`` for a :class:`HookCancel`, else ``cancelled``;
  the cause is ``DisposedCancel`` whenever the agent is being disposed.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from typing import TYPE_CHECKING

import trio

from ..cancel import CancelCause, CauseScope, DisposedCancel, HookCancel, current_cause
from ..model import Finished, ModelError, ModelRequest, TextDelta, ToolCallRequested
from ..session import (
    AssistantMessage,
    ModelUsage,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
)
from ._compaction import CompactionError, fit_window
from ._events import AgentOutput
from ._inbox import QueuedMessage
from ._tools import ToolResult

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["run_turn"]

log = logging.getLogger("trio_agents")


async def run_turn(
    agent: Agent, turn_id: str, scope: CauseScope, claimed: list[QueuedMessage]
) -> None:
    """Run one turn of ``agent`` to its recorded end."""
    session = agent.session
    # Invariant: no checkpoint before the claimed messages are recorded (see Agent.cancel).
    session.append(TurnStarted(turn_id=turn_id))
    agent._claim(claimed, turn_id)
    stop = StopReason.COMPLETED
    error: str | None = None
    cause: CancelCause | None = None
    open_calls: dict[str, ToolCallRequested] = {}
    started: set[str] = set()
    try:
        with scope:
            stop = await _steps(agent, turn_id, scope, open_calls, started)
        if scope.cancelled_caught:
            cause = scope.cause
    except (ModelError, CompactionError) as exc:
        stop, error = StopReason.ERROR, str(exc)
    except Exception as exc:
        log.exception("turn %s of agent %s failed", turn_id, agent.id)
        stop, error = StopReason.ERROR, f"{type(exc).__name__}: {exc}"
    except BaseException as exc:
        # Not the turn's own failure but the process's (an outer cancellation, a
        # KeyboardInterrupt): close the turn durably, then let it propagate.
        leaf = _first_leaf(exc)
        if isinstance(leaf, trio.Cancelled):
            cause = DisposedCancel() if agent._closing else current_cause()
            stop = _classify(agent, cause)
        else:
            stop, error = StopReason.ERROR, f"interrupted by {type(leaf).__name__}"
        with trio.CancelScope(shield=True):
            await _close(agent, turn_id, stop, error, cause, open_calls, started)
        raise
    if cause is not None or scope.cancelled_caught:
        cause = DisposedCancel() if agent._closing else cause
        stop = _classify(agent, cause)
    with trio.CancelScope(shield=True):
        await _close(agent, turn_id, stop, error, cause, open_calls, started)


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _classify(agent: Agent, cause: CancelCause | None) -> StopReason:
    if isinstance(cause, HookCancel) and not agent._closing:
        return StopReason.BLOCKED
    return StopReason.CANCELLED


async def _close(
    agent: Agent,
    turn_id: str,
    stop: StopReason,
    error: str | None,
    cause: CancelCause | None,
    open_calls: dict[str, ToolCallRequested],
    started: set[str],
) -> None:
    agent._turn_closing()
    for call_id, call in open_calls.items():
        ran = call_id in started
        agent.session.append(
            ToolCallEnded(
                turn_id=turn_id,
                call_id=call_id,
                name=call.name,
                content=(
                    "cancelled while running (it may have had effects)"
                    if ran
                    else "cancelled before it started"
                ),
                is_error=True,
                started=ran,
            )
        )
    open_calls.clear()
    agent.session.append(TurnEnded(turn_id=turn_id, stop_reason=stop, cause=cause, error=error))
    await agent._flush_quietly()


async def _steps(
    agent: Agent,
    turn_id: str,
    scope: CauseScope,
    open_calls: dict[str, ToolCallRequested],
    started: set[str],
) -> StopReason:
    for step in range(agent.max_steps):
        if step > 0:
            agent._claim(agent._inbox.claim_step(), turn_id)
        await fit_window(agent, turn_id)
        request = ModelRequest(
            messages=agent._history.update(agent.session).messages(),
            tools=agent._tool_specs,
        )
        text: list[str] = []
        calls: list[ToolCallRequested] = []
        finished: Finished | None = None
        streamed = False
        try:
            async with aclosing(agent.model.stream(request)) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                        agent._emit(
                            AgentOutput(agent_id=agent.id, turn_id=turn_id, text=event.text)
                        )
                    elif isinstance(event, ToolCallRequested):
                        calls.append(event)
                    elif isinstance(event, Finished):
                        finished = event
                        break
            streamed = True
        finally:
            # What was streamed to the user is kept, also when the stream was cut: the
            # session holds what the user saw (no checkpoint here, so a cancel cannot lose it).
            if text:
                agent.session.append(
                    AssistantMessage(
                        turn_id=turn_id, content="".join(text), interrupted=not streamed
                    )
                )
        if finished is not None:
            agent._record_usage(_usage_record(turn_id, finished))
        for call in calls:
            agent.session.append(
                ToolCall(
                    turn_id=turn_id,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=dict(call.arguments),
                )
            )
            open_calls[call.call_id] = call
        if calls:
            async with trio.open_nursery() as nursery:
                for call in calls:
                    nursery.start_soon(_call_tool, agent, turn_id, scope, call, open_calls, started)
            continue
        if agent._inbox.has_step_input:
            continue
        return StopReason.COMPLETED
    return StopReason.MAX_STEPS


def _usage_record(turn_id: str, finished: Finished) -> ModelUsage:
    return ModelUsage(
        turn_id=turn_id,
        input_tokens=finished.usage.input_tokens,
        output_tokens=finished.usage.output_tokens,
    )


async def _call_tool(
    agent: Agent,
    turn_id: str,
    scope: CauseScope,
    call: ToolCallRequested,
    open_calls: dict[str, ToolCallRequested],
    started: set[str],
) -> None:
    if scope.cancel_called:
        return  # recorded as not started when the turn closes
    if agent._tool_names is not None and call.name not in agent._tool_names:
        result = ToolResult(
            content=f"tool {call.name!r} is not available to this agent; "
            f"available: {', '.join(sorted(agent._tool_names)) or 'none'}",
            is_error=True,
            started=False,
        )
    else:
        result = await agent._tools.invoke(
            call.name,
            call.arguments,
            agent,
            call_id=call.call_id,
            scope=scope,
            on_start=lambda: started.add(call.call_id),
        )
    open_calls.pop(call.call_id, None)
    agent.session.append(
        ToolCallEnded(
            turn_id=turn_id,
            call_id=call.call_id,
            name=call.name,
            content=result.content,
            is_error=result.is_error,
            started=result.started,
        )
    )
