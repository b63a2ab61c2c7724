"""One turn: steps of model request, streamed output and concurrent tool calls.

Rules:
- A turn is ``TurnStarted`` → steps → ``TurnEnded``; ``TurnEnded`` is written and flushed on
  every path (completed, cancelled, error, max steps), shielded from cancellation.
- Each step records the messages it claimed (the turn's own, then the next-step lane's),
  compacts the history first when the request would not fit the policy's share of the
  window (``_compaction.fit_window``), asks the model with the history rebuilt from the
  session's records, records what the model said, and runs the tool calls it asked for
  concurrently inside the turn's cancel scope. A model that answers "context too long"
  has the history compacted and the request sent once more (``_compaction.compact_after``).
- A tool call cancelled before it began is recorded ``started=False`` (no side effects); one
  cancelled while running is ``started=True`` (side effects possible).
- Stop reason of a cancelled turn: ``blocked`` for a :class:`HookCancel`, else ``cancelled``;
  the cause is ``DisposedCancel`` whenever the agent is being disposed (:meth:`Turn.dispose`).
- A turn asked for a typed answer offers the final-answer tool, and ends ``completed`` when
  an answer is accepted or ``error`` after too many refusals (``_output``).
- A :class:`Turn` reaches its agent through :class:`AgentParts` only.
- Budgets (``_budget``) are checked before each model request and each tool call; a spent one
  cancels its owner with ``BudgetExhausted`` and this turn's scope with it. A tool call it
  refuses is recorded not started.
"""

from __future__ import annotations

import logging
from typing import final

import attrs
import trio

from .. import tracing
from ..cancel import CancelCause, CauseScope, DisposedCancel, HookCancel, current_cause
from ..model import (
    Finished,
    ModelError,
    ModelRequest,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
)
from ..session import (
    AssistantMessage,
    ImageAttached,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from . import _hook_calls as hook_calls
from ._budget import tool_refusal, within_budget
from ._caller import Caller
from ._compaction import CompactionError, compact_after, fit_window
from ._events import AgentOutput, AgentThought
from ._hook_points import POST_MODEL, POST_TOOL, PRE_MODEL, PRE_TOOL, TURN_END, TURN_START
from ._inbox import QueuedMessage
from ._output import OutputFailed, TurnOutput, turn_output
from ._parts import AgentParts
from ._results import ToolResult
from ._snapshot import TurnSnapshot, turn_snapshot
from ._usage import usage_record

log = logging.getLogger("trio_agents")


@final
@attrs.define(eq=False, repr=False)
class Turn:
    """One turn of an agent, from its ``TurnStarted`` to its recorded end.

    Attributes:
        id: the turn's id (``t-1``, ``t-2``, ...).
        scope: the turn's cancel scope; its tools see it as ``ctx.scope``.
        ending: the turn left its cancel scope and is recording its end, so a cancel from
            now on has nothing to abort.
    """

    _parts: AgentParts
    id: str
    _claimed: list[QueuedMessage]
    scope: CauseScope = attrs.field(factory=CauseScope, init=False)
    ending: bool = attrs.field(default=False, init=False)
    _disposed: bool = attrs.field(default=False, init=False)
    # The tool calls asked for and not answered yet, and those of them that began; made at
    # the first call (most turns call no tool, and each object alive across a turn's
    # checkpoints is one more for the cyclic collector to traverse, issue #17).
    _open: dict[str, ToolCallRequested] | None = attrs.field(default=None, init=False)
    # The calls that began, with when (trio's clock; a snapshot's running_for).
    _started: dict[str, float] | None = attrs.field(default=None, init=False)
    # Who calls the turn's tools: made at the first call, shared by every call.
    _caller: Caller | None = attrs.field(default=None, init=False)
    # The typed answer the turn must give (``ask(output=)``, ``_output``), or None.
    _output: TurnOutput | None = attrs.field(init=False)
    #: When the turn began, on trio's clock.
    since: float = attrs.field(factory=trio.current_time, init=False)

    def __attrs_post_init__(self) -> None:
        self._output = turn_output(self._parts.outputs, self._parts.session, self.id, self._claimed)

    def describe(self, now: float) -> TurnSnapshot:
        """The turn and its tool calls in flight, for a snapshot of the ownership tree."""
        return turn_snapshot(self.id, self.since, now, self._open, self._started)

    def abort(self, cause: CancelCause) -> None:
        """Cancel the turn with ``cause`` (the first cause given is the one recorded)."""
        self.scope.cancel(cause)

    def dispose(self) -> None:
        """Cancel the turn because its agent is being disposed: it ends with that cause."""
        self._disposed = True
        self.scope.cancel(DisposedCancel())

    async def run(self) -> None:
        """Run the turn to its recorded end; a process-level exception propagates after it."""
        # Invariant: no checkpoint before the claimed messages are recorded (see Agent.cancel).
        self._parts.session.append(TurnStarted(turn_id=self.id))
        self._record_claimed(self._claimed)
        if self._parts.budget is not None:
            self._parts.budget.turn_started()
        stop = StopReason.COMPLETED
        error: str | None = None
        cause: CancelCause | None = None
        scope = self.scope
        try:
            with scope:
                stop = await self._steps()
                if self._parts.hooks.at(TURN_END):
                    await hook_calls.turn_ending(self._parts, self, stop)
            if scope.cancelled_caught:
                cause = scope.cause
        except (ModelError, CompactionError, OutputFailed) as exc:
            stop, error = StopReason.ERROR, str(exc)
            cause = hook_calls.vetoed_by(exc)  # a compaction a hook refused: blocked
        except Exception as exc:
            log.exception("turn %s of agent %s failed", self.id, self._parts.id)
            # The failure itself, not the group a nursery of tool calls wraps it in.
            leaf = _first_leaf(exc)
            stop, error = StopReason.ERROR, f"{type(leaf).__name__}: {leaf}"
        except BaseException as exc:
            # Not the turn's own failure but the process's (an outer cancellation, a
            # KeyboardInterrupt): close the turn durably, then let it propagate.
            leaf = _first_leaf(exc)
            if isinstance(leaf, trio.Cancelled):
                # Cancelled from outside the turn: its owner is going away. A typed cause
                # above says why; a plain trio cancel (the application's own scope around
                # the runtime) is the runtime's exit, so the turn is disposed.
                cause = DisposedCancel() if self._disposed else current_cause() or DisposedCancel()
                stop = self._stop_reason(cause)
            else:
                stop, error = StopReason.ERROR, f"interrupted by {type(leaf).__name__}"
            await self._end(stop, error, cause)
            raise
        if cause is not None or scope.cancelled_caught:
            cause = DisposedCancel() if self._disposed else cause
            stop = self._stop_reason(cause)
        await self._end(stop, error, cause)

    def _record_claimed(self, messages: list[QueuedMessage]) -> None:
        """Record the messages this turn took from the inbox as its user messages."""
        append = self._parts.session.append
        for message in messages:
            append(UserMessage(message_id=message.id, content=message.content, turn_id=self.id))

    def _stop_reason(self, cause: CancelCause | None) -> StopReason:
        if isinstance(cause, HookCancel) and not self._disposed:
            return StopReason.BLOCKED
        return StopReason.CANCELLED

    async def _end(self, stop: StopReason, error: str | None, cause: CancelCause | None) -> None:
        """Record the turn's end and make it durable; no cancellation stops it (the one
        await is shielded, and everything before it is synchronous)."""
        self.ending = True
        append = self._parts.session.append
        if self._open:
            started = self._started if self._started is not None else {}
            for call_id, call in self._open.items():
                ran = call_id in started
                append(
                    ToolCallEnded(
                        turn_id=self.id,
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
        self._open = None
        append(TurnEnded(turn_id=self.id, stop_reason=stop, cause=cause, error=error))
        # A store with nothing to wait for (MemoryStore) flushes without a checkpoint: a turn
        # is 3 scheduler passes instead of 4 (test_a_turn_on_a_memory_store_is_three_passes),
        # 768,597 -> 728,364 instructions a turn and 453,731 -> 413,067 a cancel
        # (bench_instructions). The TurnEnded is as durable as that store makes anything.
        if not self._parts.flush_nowait():
            # Shielded: the close is made durable whatever cancelled the turn. Only this
            # await needs the shield; entering one for every turn cost 405,387 -> 355,714
            # instructions per cancel, 729,255 -> 677,624 per turn (python -m benchmarks
            # --only instructions; test_turn_close.py checks the close durable on JSONL).
            with trio.CancelScope(shield=True):
                await self._parts.flush_quietly()

    async def _steps(self) -> StopReason:
        parts = self._parts
        if parts.hooks.at(TURN_START):
            await hook_calls.turn_started(parts, self, [m.content for m in self._claimed])
        for step in range(parts.max_steps):
            if step > 0:
                self._record_claimed(parts.inbox.claim_step())
            await within_budget(parts.budget, self.scope, first=step == 0)
            await fit_window(parts, self.id)
            try:
                calls = await self._ask_model()
            except ModelError as exc:
                if not await compact_after(parts, self.id, exc):
                    raise
                calls = await self._ask_model()  # once: a second "too long" ends the turn
            if self._output is not None:
                calls = self._output.review(calls, self._open)
                if calls:
                    await self._call_tools(calls)
                if self._output.accepted:
                    return StopReason.COMPLETED
                continue
            if calls:
                await self._call_tools(calls)
                continue
            if parts.inbox.has_step_input:
                continue
            return StopReason.COMPLETED
        return StopReason.MAX_STEPS

    async def _ask_model(self) -> list[ToolCallRequested]:
        """One model request: stream its text out, record what it said; the calls it asked
        for (recorded, and open until answered)."""
        parts = self._parts
        session = parts.session
        request = ModelRequest(
            messages=parts.history.update(session).messages(), tools=parts.tool_specs()
        )
        if self._output is not None:
            request = self._output.request(request)
        if parts.hooks.at(PRE_MODEL):
            request = await hook_calls.before_model(parts, self, request)
        text: list[str] = []
        calls: list[ToolCallRequested] = []
        finished: Finished | None = None
        streamed = False
        stream = tracing.chat(parts.model, request)
        try:
            # aclosing() spelled out: its object and its two calls on every request cost
            # 340,427 -> 338,473 instructions per cancel (bench_instructions); the stream is
            # closed the same way (test_a_model_stream_left_at_its_finish_is_closed).
            try:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                        if parts.listens(AgentOutput):
                            parts.emit(
                                AgentOutput(agent_id=parts.id, turn_id=self.id, text=event.text)
                            )
                    elif isinstance(event, ThoughtDelta):
                        if parts.listens(AgentThought):
                            parts.emit(
                                AgentThought(agent_id=parts.id, turn_id=self.id, text=event.text)
                            )
                    elif isinstance(event, ToolCallRequested):
                        calls.append(event)
                    elif isinstance(event, Finished):
                        finished = event
                        break
            finally:
                await stream.aclose()
            streamed = True
        finally:
            # What was streamed to the user is kept, also when the stream was cut: the
            # session holds what the user saw (no checkpoint here, so a cancel cannot lose it).
            if text:
                session.append(
                    AssistantMessage(
                        turn_id=self.id, content="".join(text), interrupted=not streamed
                    )
                )
        if finished is not None:
            parts.record_usage(usage_record(self.id, finished, parts.model, parts.prices))
        for call in calls:
            session.append(
                ToolCall(
                    turn_id=self.id,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=dict(call.arguments),
                )
            )
            if self._open is None:
                self._open = {}
            self._open[call.call_id] = call
        if parts.hooks.at(POST_MODEL):
            await hook_calls.after_model(parts, self, text, calls)
        return calls

    async def _call_tools(self, calls: list[ToolCallRequested]) -> None:
        if len(calls) == 1:
            # One call runs in the turn's own task, inside the same cancel scope: a nursery
            # and a task would only add cost (the call is recorded, and cancels, the same).
            await self._call_tool(calls[0])
            return
        async with trio.open_nursery() as nursery:
            for call in calls:
                nursery.start_soon(self._call_tool, call)

    def _start(self, call_id: str) -> None:
        if self._started is None:
            self._started = {}
        self._started[call_id] = trio.current_time()

    async def _call_tool(self, call: ToolCallRequested) -> None:
        if self.scope.cancel_called:
            return  # recorded as not started when the turn ends
        parts = self._parts
        allowed = parts.allowed
        if not parts.may_call(call.name):
            assert allowed is not None
            result = ToolResult(
                content=f"tool {call.name!r} is not available to this agent; "
                f"available: {', '.join(sorted(allowed)) or 'none'}",
                is_error=True,
                started=False,
            )
        elif (refused := tool_refusal(parts.budget, self.scope)) is not None:
            result = refused
        else:
            caller = self._caller
            if caller is None:
                caller = self._caller = parts.caller(self.id, self.scope)
            arguments, answer = call.arguments, None
            if parts.hooks.at(PRE_TOOL):
                arguments, answer = await hook_calls.before_tool(parts, self.id, call)
            result = answer or await parts.tools.invoke(
                call.name,
                arguments,
                caller,
                call_id=call.call_id,
                on_start=lambda: self._start(call.call_id),
            )
            if parts.hooks.at(POST_TOOL):
                result = await hook_calls.after_tool(parts, self.id, call, arguments, result)
        if self._open is not None:
            self._open.pop(call.call_id, None)
        for image in result.images:  # before the result they go with (see _history)
            parts.session.append(
                ImageAttached(call_id=call.call_id, mime_type=image.mime_type, data=image.data)
            )
        parts.session.append(
            ToolCallEnded(
                turn_id=self.id,
                call_id=call.call_id,
                name=call.name,
                content=result.content,
                is_error=result.is_error,
                started=result.started,
            )
        )


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
