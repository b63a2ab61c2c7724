"""The tools ``task``, ``task_output`` and ``task_cancel``: subagents the model starts.

Rules:
- The three are ``explicit`` tools: an agent sees them only if its ``tools`` name them, so a
  child (whose definition does not list ``task``) starts no children of its own.
- ``task {"agent": NAME, "prompt": TEXT}`` starts a child of the calling agent from the
  definition ``NAME`` (``ctx.start_child``: owned by the caller, ``ParentCancel`` reaches
  it), asks it ``TEXT`` and answers with the child's answer and usage; the child is disposed
  when its turn ends, and its session stays stored under the parent. With ``"background":
  true`` the call answers at once with the child's id, the child runs on in a task of the
  parent's scope, and its end is a notice injected into the parent. ``"resume": ID`` asks an
  earlier child of the caller again, with its history.
- The parent's session records each child's start (:class:`ChildStarted`, appended with no
  checkpoint after the child is created, so a cancel at any checkpoint of the start leaves
  either nothing or a started child whose end is recorded) and end (:class:`ChildEnded`).
- A cancelled ``task`` call (its turn cancelled, its agent disposed) cancels the child with
  ``ParentCancel`` and waits, shielded, until the child's turn has recorded its end: the
  parent's turn ends after its children's. A child's failure is the call's error result,
  never the parent's failure.
- Who owns a child is read in one place: the child's own definition (its ``parent_id``, live
  or stored). ``task_output`` and ``task_cancel`` refuse a child of another agent.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from ..cancel import ParentCancel
from ..kernel import Context
from ..session import (
    ChildStarted,
    SessionClosedError,
    SessionIdInUseError,
    SessionNotFoundError,
    StopReason,
)
from ._children import ChildOutcome, child_ended, child_outcome, parent_of
from ._errors import AgentClosedError, MessageDroppedError, TurnFailedError
from ._events import TaskEnded, TaskStarted
from ._hooks import HookRefusedError
from ._results import ToolResult
from ._tool_schema import ArgumentsError, params_schema, structure_arguments
from ._tools import Tool, ToolContext

if TYPE_CHECKING:
    from ._agent import Agent
    from ._definitions import AgentDefinition, Definitions
    from ._handle import AgentHandle
    from ._registry import AgentRegistry
    from ._tools import ToolRegistry


@attrs.frozen
class TaskArgs:
    """The arguments of ``task``."""

    agent: str = attrs.field(metadata={"description": "the name of the agent definition"})
    prompt: str = attrs.field(metadata={"description": "what the child agent is asked"})
    background: bool = attrs.field(
        default=False,
        metadata={
            "description": "answer at once with the child's id and let it run on; you are "
            "told when it ends (read its answer with task_output)"
        },
    )
    resume: str | None = attrs.field(
        default=None,
        metadata={"description": "the id of an earlier child of yours to ask again"},
    )


@attrs.frozen
class TaskIdArgs:
    """The arguments of ``task_output`` and ``task_cancel``."""

    task_id: str = attrs.field(metadata={"description": "the child's id, as task answered"})


def _usage_line(child: Agent) -> str:
    usage = child.usage
    return (
        f"[{child.id}: {usage.requests} model requests, {usage.input_tokens} input and "
        f"{usage.output_tokens} output tokens]"
    )


def _failure(outcome: ChildOutcome) -> str:
    why = f" by {outcome.cause!r}" if outcome.cause is not None else ""
    detail = f": {outcome.error}" if outcome.error else ""
    state = outcome.stop_reason.value if outcome.stop_reason is not None else "no turn"
    return f"ended {state}{why}{detail}"


@final
class TaskTools:
    """The task tools of one agent loop: they start children through its registry."""

    def __init__(
        self,
        ctx: Context,
        agents: AgentRegistry[Any],
        definitions: Definitions,
        tools: ToolRegistry,
    ) -> None:
        self._ctx = ctx
        self._agents = agents
        self._definitions = definitions
        self._tools = tools

    def register(self) -> None:
        """Register the three tools, owned by the calling fiber; ``task``'s description
        follows the definitions from now on."""
        self._tools.register(self._task_tool())
        self._tools.register(
            Tool(
                "task_output",
                "Read the state of a child agent you started with task: running, or how "
                "it ended and its answer.",
                TaskIdArgs,
                self.task_output,
                explicit=True,
            )
        )
        self._tools.register(
            Tool(
                "task_cancel",
                "Cancel a running child agent you started with task, and wait for it to stop.",
                TaskIdArgs,
                self.task_cancel,
                explicit=True,
            )
        )
        self._definitions.on_change(self._refresh)

    def _refresh(self) -> None:
        with contextlib.suppress(KeyError):  # unregistered by the loop's unload
            self._tools.replace(self._task_tool())

    def _task_tool(self) -> Tool:
        schema = params_schema(TaskArgs)
        definitions = self._definitions.list()
        names = [d.name for d in definitions]
        schema["properties"]["agent"] = {
            "type": "string",
            "description": "the name of the agent definition",
            **({"enum": names} if names else {}),
        }
        listed = "".join(f"\n- {d.name}: {d.description}" for d in definitions)
        return Tool(
            "task",
            "Start a child agent from a definition and ask it one prompt; answers with its "
            "answer (or, with background, its id at once). Agents:"
            + (listed or " none defined yet"),
            None,
            self.task,
            schema=schema,
            explicit=True,
        )

    # -- task -----------------------------------------------------------------------------------

    async def task(self, call: ToolContext[Any], arguments: dict[str, Any]) -> ToolResult:
        """The ``task`` tool (see the module rules)."""
        await trio.lowlevel.checkpoint()
        try:
            args: TaskArgs = structure_arguments(TaskArgs, arguments)
        except ArgumentsError as exc:
            problems = "; ".join(exc.problems)
            return ToolResult(
                f"invalid arguments for 'task': {problems}", is_error=True, started=False
            )
        parent = call.agent
        if parent is None:
            return ToolResult(
                "task starts a child of the calling agent, and this call has none",
                is_error=True,
                started=False,
            )
        listed = parent.config.tools
        if listed is None or "task" not in listed:
            return ToolResult(
                f"agent {parent.id} may not start children: task is given only to agents "
                f"whose tools name it",
                is_error=True,
                started=False,
            )
        definition = self._definitions.get(args.agent)
        if definition is None:
            known = ", ".join(d.name for d in self._definitions.list()) or "none"
            return ToolResult(
                f"no agent definition {args.agent!r}; defined: {known}",
                is_error=True,
                started=False,
            )
        try:
            handle = await self._start(call, parent, definition, args.resume)
        except (_Refused, HookRefusedError) as exc:  # a child_start hook may veto the child
            return ToolResult(str(exc), is_error=True, started=False)
        child = handle.agent
        # Invariant: no checkpoint between the child's creation and its recorded start.
        parent.session.append(
            ChildStarted(
                turn_id=call.turn_id,
                call_id=call.call_id,
                child_id=child.id,
                definition=definition.name,
                background=args.background,
            )
        )
        self._ctx.emit(
            TaskStarted(parent.id, call.call_id, child.id, definition.name, args.background)
        )
        if args.background:
            self._agents.scope_of(parent).start_soon(
                self._run_background, parent, handle, args.prompt, call.call_id
            )
            return ToolResult(
                f"started {child.id} ({definition.name}) in the background; you are told when "
                f'it ends (task_output(task_id="{child.id}") reads it)'
            )
        outcome = await self._run(parent, handle, args.prompt, call.call_id)
        if outcome.stop_reason is StopReason.COMPLETED:
            return ToolResult(f"{outcome.answer}\n\n{_usage_line(child)}")
        return ToolResult(
            f"child {child.id} ({definition.name}) {_failure(outcome)}\n{_usage_line(child)}",
            is_error=True,
        )

    async def _start(
        self,
        call: ToolContext[Any],
        parent: Agent,
        definition: AgentDefinition,
        resume: str | None,
    ) -> AgentHandle[Agent]:
        if resume is None:
            return await call.start_child(
                definition.model,
                tools=definition.tools,
                instructions=definition.instructions,
                max_steps=definition.max_steps,
                ask=definition.ask,
                cwd=parent.cwd,  # the child works where its parent does
                budget=definition.budget,
            )
        if self._agents.get(resume) is not None:
            raise _Refused(f"child {resume} is running; ask it when it has ended")
        stored = await self._stored_parent(resume)
        if stored != parent.id:
            raise _Refused(f"{resume} is not a child of yours")
        handle: AgentHandle[Agent] = await self._agents.resume(resume, parent=parent)
        return handle

    async def _stored_parent(self, child_id: str) -> str | None:
        """The parent id the stored session of ``child_id`` names (``None``: not stored,
        or not a child)."""
        outcome = await self._read(child_id)
        return None if outcome is None else outcome[0]

    async def _read(self, child_id: str) -> tuple[str | None, ChildOutcome] | None:
        store = self._agents.store
        try:
            session = await store.load(child_id)
        except (SessionNotFoundError, SessionIdInUseError, ValueError):
            return None
        try:
            records = session.records
            return parent_of(records), child_outcome(records)
        finally:
            with trio.CancelScope(shield=True):
                await store.abandon(session)

    async def _run(
        self, parent: Agent, handle: AgentHandle[Agent], prompt: str, call_id: str | None
    ) -> ChildOutcome:
        """Ask the child, dispose it, record its end; the outcome of its turn."""
        child = handle.agent
        outcome: ChildOutcome | None = None
        try:
            try:
                outcome = ChildOutcome(StopReason.COMPLETED, await child.ask(prompt))
            except TurnFailedError as exc:
                end = exc.record
                outcome = ChildOutcome(end.stop_reason, "", end.cause, end.error)
            except (AgentClosedError, MessageDroppedError) as exc:
                outcome = ChildOutcome(StopReason.CANCELLED, "", None, str(exc))
        finally:
            with trio.CancelScope(shield=True):
                if outcome is None and not child.done:
                    # Cancelled (or failed) while the child ran: it stops with its parent's
                    # cause, and its end is recorded before the parent's turn records its own.
                    child.cancel(ParentCancel(parent_id=parent.id))
                    await child.when_idle()
                    outcome = child_outcome(child.session.records)
                await handle.dispose()
                if outcome is None:
                    outcome = ChildOutcome(StopReason.CANCELLED, error="disposed before it ran")
                self._ended(parent, child, call_id, outcome)
        return outcome

    def _ended(
        self, parent: Agent, child: Agent, call_id: str | None, outcome: ChildOutcome
    ) -> None:
        stop = outcome.stop_reason or StopReason.CANCELLED
        ended = child_ended(child.id, child.session.records, stop, outcome.cause, outcome.error)
        with contextlib.suppress(SessionClosedError):  # the parent is gone already
            parent.session.append(ended)
        self._ctx.emit(TaskEnded(parent.id, call_id, child.id, stop, outcome.cause))

    async def _run_background(
        self, parent: Agent, handle: AgentHandle[Agent], prompt: str, call_id: str | None
    ) -> None:
        outcome = await self._run(parent, handle, prompt, call_id)
        state = (
            _failure(outcome)
            if outcome.stop_reason is not StopReason.COMPLETED
            else ("ended completed")
        )
        with contextlib.suppress(AgentClosedError):  # a closing parent has nobody to tell
            parent.inject(
                f"background task {handle.agent.id} {state}; read its answer with "
                f'task_output(task_id="{handle.agent.id}")'
            )

    # -- task_output, task_cancel ------------------------------------------------------------------

    async def task_output(self, call: ToolContext[Any], args: TaskIdArgs) -> ToolResult:
        """The ``task_output`` tool."""
        live = self._agents.get(args.task_id)
        if live is not None:
            await trio.lowlevel.checkpoint()
            owner = live.parent.id if live.parent is not None else None
            refused = self._refusal(call, args.task_id, owner)
            return refused or ToolResult(f"{args.task_id} is running ({live.status.value})")
        read = await self._read(args.task_id)
        if read is None:
            return ToolResult(f"no child {args.task_id!r}", is_error=True)
        refused = self._refusal(call, args.task_id, read[0])
        if refused is not None:
            return refused
        outcome = read[1]
        if outcome.stop_reason is StopReason.COMPLETED:
            return ToolResult(f"{args.task_id} ended completed:\n{outcome.answer}")
        return ToolResult(f"{args.task_id} {_failure(outcome)}", is_error=True)

    async def task_cancel(self, call: ToolContext[Any], args: TaskIdArgs) -> ToolResult:
        """The ``task_cancel`` tool."""
        live = self._agents.get(args.task_id)
        if live is None:
            read = await self._read(args.task_id)
            if read is None:
                return ToolResult(f"no child {args.task_id!r}", is_error=True)
            refused = self._refusal(call, args.task_id, read[0])
            return refused or ToolResult(f"{args.task_id} had already ended")
        owner = live.parent.id if live.parent is not None else None
        refused = self._refusal(call, args.task_id, owner)
        if refused is not None or owner is None:
            await trio.lowlevel.checkpoint()
            return refused or ToolResult(f"{args.task_id} is not a child", is_error=True)
        live.cancel(ParentCancel(parent_id=owner))
        await live.when_idle()
        return ToolResult(f"{args.task_id} cancelled")

    def _refusal(
        self, call: ToolContext[Any], child_id: str, owner: str | None
    ) -> ToolResult | None:
        caller = call.agent.id if call.agent is not None else None
        if owner is None or owner != caller:
            return ToolResult(f"{child_id} is not a child of yours", is_error=True)
        return None


class _Refused(Exception):
    """A ``task`` call the tool refuses before starting anything."""
