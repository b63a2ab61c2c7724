"""The agent: an inbox, a loop that runs turns, and the one public stop.

Rules:
- ``prompt``/``steer``/``inject`` enqueue synchronously and record an ``InboxSpliced``; they
  never block. ``discard`` removes exactly one queued message.
- ``cancel`` is the single public stop. When effective it emits ``AgentCancelRequested``
  *before* clearing the inbox or aborting the turn. A message is claimed by a turn in the same
  synchronous step that makes the turn visible, so a cancel either finds it queued (and removes
  it: it never runs) or finds the turn (and aborts it): there is no gap between the two.
- ``when_idle`` returns when the agent is idle with nothing wakeable queued (or is closed).
- ``ask`` is ``prompt`` plus a wait on the session records for that message's turn
  (``_ask.AnswerFold``); the loop notifies after every turn, removal and exit. Its
  ``output=`` is the typed answer of that message's turn alone (``_output``), set before the
  next checkpoint, so before a turn can claim the message; it stays with the message when
  the caller stops waiting, until a turn claims the message or it is removed.
- ``compact()`` queues a compaction for the loop, which runs it between turns like a turn of
  its own: ``cancel`` aborts it (or withdraws it while queued) and the history stays as it was.
  A compaction that a turn needs runs inside that turn (see ``_compaction``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, final, overload

import attrs
import trio

from .. import tracing
from .._base import Signal, Wake
from ..cancel import CancelCause, UserCancel, current_cause
from ..model import DEFAULT_PRICES, ImagePart, Model, PriceTable
from ..session import (
    Compacted,
    ImageAttached,
    InboxSpliced,
    Session,
    SessionStore,
    check_recordable_cause,
)
from ._approval import Approvals, Approver
from ._ask import AnswerFold
from ._budget import Ledger
from ._caller import Caller
from ._compact_job import CompactJob
from ._compaction import CompactionError, Compactor
from ._config import AgentConfig
from ._driver import AgentDriver, Built
from ._errors import AgentClosedError
from ._events import AgentCancelRequested, AgentStatusChanged
from ._history import History
from ._hook_calls import message_accepted
from ._hook_points import PROMPT_ACCEPTED
from ._hooks import NO_HOOKS, HookRegistry
from ._inbox import Lane, MessageId, QueuedMessage
from ._meter import ContextUsage
from ._modes import Mode, switched_model
from ._output import (
    DEFAULT_RETRIES,
    OutputKind,
    Outputs,
    OutputSchema,
    OutputType,
    check_retries,
    latest_output,
    output_of,
)
from ._parts import AgentParts
from ._restore import restore
from ._snapshot import AgentSnapshot, TurnSnapshot, agent_snapshot
from ._status import AgentStatus, check_status
from ._turn import Turn
from ._usage import AgentUsage

if TYPE_CHECKING:
    from ._caller import ChildAgents, ToolCalls

T = TypeVar("T")


@attrs.frozen
class AgentStatistics:
    """A snapshot of an agent, for tests and debugging."""

    id: str
    status: AgentStatus
    queued: tuple[MessageId, ...]
    turns: int
    running_turn: str | None
    children: tuple[str, ...]


def _anyone(event_type: type) -> bool:
    """Without a ``listens`` check every event is built and emitted."""
    return True


@final
@attrs.define(eq=False, repr=False, kw_only=True)
class Agent:
    """A long-lived agent. Made by ``ctx.agents.create``/``resume``, never directly."""

    session: Session
    _config: AgentConfig
    _parts: AgentParts
    parent: Agent | None = None
    _next_turn: int = 1
    _status: AgentStatus = attrs.field(default=AgentStatus.IDLE, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    # The running work (a turn or a compaction), until it records its end.
    _work: Turn | CompactJob | None = attrs.field(default=None, init=False)
    _turns: int = attrs.field(default=0, init=False)
    _wake: Wake = attrs.field(factory=Wake, init=False)
    # Trick: made when someone first waits for the next change, as most changes nobody
    # awaits (a trio.Event is 272 B of every idle agent: python -m benchmarks --only memory).
    _changed: trio.Event | None = attrs.field(default=None, init=False)
    # Trick: made when someone first waits for quiescence (272 B, as _changed); set only by
    # a change that leaves the agent quiescent, so a waiter wakes once per wait.
    _idle: trio.Event | None = attrs.field(default=None, init=False)
    _done: Signal = attrs.field(factory=Signal, init=False)
    _children: dict[str, Agent] = attrs.field(factory=dict, init=False)
    _compact_jobs: list[CompactJob] = attrs.field(factory=list, init=False)
    _compactions: int = attrs.field(default=0, init=False)

    # -- identity and state -----------------------------------------------------------------

    @property
    def id(self) -> str:
        """The agent's id, which is its session's id."""
        return self.session.id

    @property
    def _history(self) -> History:
        # Read by tests; the parts hold it (the agent keeps no second reference).
        return self._parts.history

    @property
    def _approvals(self) -> Approvals:
        return self._parts.approvals

    @property
    def model(self) -> Model:
        """The model the agent's turns ask."""
        return self._parts.model

    @model.setter
    def model(self, model: Model) -> None:
        self._parts.model = model

    @property
    def config(self) -> AgentConfig:
        """The agent's definition, as recorded in its session."""
        return self._config

    @property
    def instructions(self) -> str | None:
        """The system text, or ``None``."""
        return self._config.instructions

    @property
    def max_steps(self) -> int:
        """The most model requests one turn may make."""
        return self._config.max_steps

    @property
    def cwd(self) -> str | None:
        """The absolute working directory of the agent's shell commands, or ``None``."""
        return self._config.cwd

    @property
    def approver(self) -> Approver | None:
        """Who is asked before a call that needs approval runs (see :doc:`/tools`), or
        ``None``: such calls are refused. The front end that shows the agent sets it; a child
        agent without one of its own has its parent's."""
        return self._parts.approvals.approver

    @approver.setter
    def approver(self, approver: Approver | None) -> None:
        if approver is not None and not isinstance(approver, Approver):
            raise TypeError(
                f"an approver has 'async def approve(request) -> Decision'; got {approver!r}"
            )
        self._parts.approvals.approver = approver

    @property
    def usage(self) -> AgentUsage:
        """Token usage summed over every model request of the session, resumed ones too."""
        return self._parts.usage

    @property
    def mode(self) -> Mode:
        """The agent's mode (``ask``, ``edit``, ``plan``: see :mod:`._modes`)."""
        return self._parts.approvals.mode

    def set_mode(self, mode: str | Mode) -> Mode:
        """Put the agent in ``mode`` from its next tool call on (recorded: a resumed agent is
        in it). Raises :class:`UnknownModeError` for an id that is no mode."""
        turn = self._turn
        return self._parts.approvals.set_mode(mode, turn.id if turn is not None else None)

    def set_model(self, model: Model | str) -> Model:
        """Make ``model`` (a spec or a :class:`Model`) the agent's from its next model request
        on, recorded as its definition (see :func:`._modes.switched_model`); returns it."""
        self._config, self._parts.model = switched_model(self._config, model)
        self.session.append(self._config.record())
        return self._parts.model

    def caller(self) -> Caller:
        """The record of this agent calling a tool outside its turns' own calls (a script's
        ``tools.invoke(name, arguments, agent)``): approval asks its approver, and is
        recorded against the running turn, if any."""
        turn, parts = self._turn, self._parts
        turn_id = turn.id if turn is not None else None
        approvals = self._parts.approvals
        return Caller(self, self.id, turn_id, None, approvals, parts.deps, parts, parts.agents)

    @property
    def context_window(self) -> int | None:
        """The model's context window in tokens, or ``None`` when it is unknown."""
        window: int | None = getattr(self.model, "context_window", None)
        return window

    @property
    def context(self) -> ContextUsage:
        """The size of the next model request, against the window (see the token meter)."""
        return self._parts.context()

    async def compact(self) -> Compacted | None:
        """Compact the history now, with the ``compaction`` policy, between turns.

        It waits for a running turn to end, then runs like a turn of its own: ``cancel()``
        aborts it. Cancelling the caller withdraws it (or aborts it, with the caller's cause).

        Returns:
            The ``Compacted`` record, or ``None`` if there was nothing to compact.

        Raises:
            CompactionError: it failed or was cancelled (its ``cause``); the history is
                unchanged and the agent goes on.
            AgentClosedError: the agent is being disposed.
        """
        if self._closing:
            raise AgentClosedError(
                f"agent {self.id} is {self._status.value}; it cannot compact any more"
            )
        job = CompactJob()
        self._compact_jobs.append(job)
        self._wake.set()
        self._notify()
        try:
            await job.done.wait()
        except BaseException:
            if job in self._compact_jobs:
                self._compact_jobs.remove(job)
            elif self._work is job:
                job.abort(current_cause() or UserCancel())
            raise
        if job.error is not None:
            raise job.error
        return job.record

    @property
    def status(self) -> AgentStatus:
        """The current :class:`AgentStatus`."""
        return self._status

    @property
    def children(self) -> tuple[Agent, ...]:
        """Live child agents, oldest first."""
        return tuple(self._children.values())

    @property
    def done(self) -> bool:
        """Whether the agent's loop has exited for good."""
        return self._done.is_set()

    async def wait_done(self) -> None:
        """Wait until the loop has exited (the agent is being or has been disposed)."""
        await self._done.wait()

    def queued(self) -> tuple[QueuedMessage, ...]:
        """The messages waiting in the inbox, in arrival order."""
        return self._parts.inbox.queued()

    def statistics(self) -> AgentStatistics:
        """A frozen snapshot of this agent."""
        return AgentStatistics(
            id=self.id,
            status=self._status,
            queued=tuple(m.id for m in self._parts.inbox.queued()),
            turns=self._turns,
            running_turn=self._turn.id if self._turn is not None else None,
            children=tuple(self._children),
        )

    def describe(self, now: float) -> AgentSnapshot:
        """What the agent is doing now, for a snapshot of the ownership tree (``now`` is
        trio's clock; see :meth:`Context.snapshot`)."""
        work = self._work
        turn = work.describe(now) if isinstance(work, Turn) else None
        if isinstance(work, CompactJob):
            turn = TurnSnapshot(work.id, None)
        return agent_snapshot(self, turn, self._parts.inbox.queued(), self.children)

    def __repr__(self) -> str:
        return f"<Agent {self.id} {self._status.value}>"

    # -- the inbox ------------------------------------------------------------------------------

    def prompt(self, content: str, *, images: Iterable[ImagePart] = ()) -> MessageId:
        """Queue ``content`` as the input of a turn of its own; wakes the agent.

        ``images`` go with it (each an ``ImageAttached`` record): a model whose API takes
        images sees them, another reads a line saying each was attached.

        ``steer`` and ``inject`` raise the same errors; a refused message is not queued.

        Raises:
            TypeError: ``content`` is not a ``str``.
            UnstorableRecordError: ``content`` is not Unicode text (it holds a lone
                surrogate), so the session could not record it (a ``ValueError``).
            AgentClosedError: the agent is being disposed.
            HookRefusedError: a ``prompt_accepted`` hook vetoed it (see :doc:`/hooks`).
        """
        return self._enqueue("next_turn", content, wake=True, images=tuple(images))

    def steer(self, content: str) -> MessageId:
        """Queue ``content`` for the next step of the running turn; wakes an idle agent."""
        return self._enqueue("next_step", content, wake=True)

    def inject(self, content: str) -> MessageId:
        """Queue ``content`` for the next step, without waking an idle agent."""
        return self._enqueue("next_step", content, wake=False)

    def discard(self, message_id: MessageId) -> bool:
        """Remove one queued message; ``False`` if it was already claimed or is unknown, or
        the agent is being disposed (its queued messages stay recorded for a resume)."""
        if self._closing:
            return False
        removed = self._parts.inbox.discard(message_id)
        if removed is None:
            return False
        self._record_removal(removed, "discarded")
        self._notify()
        return True

    @overload
    async def ask(self, content: str, *, output: None = None) -> str: ...

    @overload
    async def ask(
        self, content: str, *, output: type[T], output_retries: int | None = None
    ) -> T: ...

    @overload
    async def ask(
        self, content: str, *, output: OutputSchema, output_retries: int | None = None
    ) -> Any: ...

    async def ask(
        self, content: str, *, output: OutputKind | None = None, output_retries: int | None = None
    ) -> Any:
        """Prompt ``content``, wait for the turn that runs it to end, and return its answer.

        The answer is the text the model said after the turn's last tool call (the reply to
        the tool results), ``""`` if that final step said nothing; the JSON text of its typed
        answer when the agent has an :attr:`output`. Cancelling the caller stops the wait
        only: the message stays queued or its turn keeps running, typed as asked
        (``agent.cancel`` stops those).

        Args:
            content: the prompt.
            output: an attrs class (or an :class:`OutputSchema`): the turn must answer with
                it, through the final-answer tool or the provider's JSON-schema mode, and
                ``ask`` returns it structured (see :doc:`/agents`, "Typed output").
            output_retries: how many refused answers the turn retries; by default the
                agent's :attr:`output_retries`.

        Raises:
            AgentClosedError: the agent is being disposed, before or while waiting.
            HookRefusedError: a ``prompt_accepted`` hook vetoed the message.
            MessageDroppedError: the message was discarded or cancelled before it ran.
            OutputError: the model's answer was refused once more than ``output_retries``.
            TurnFailedError: the turn ended cancelled, in error, blocked or at max steps.
            TypeError: ``output`` is not an attrs class or :class:`OutputSchema` (nothing
                is queued).
        """
        typed = output_of(output) if output is not None else None
        outputs = self._outputs() if typed is not None else None
        retries = outputs.retries if outputs is not None else 0
        if output_retries is not None:
            retries = check_retries(output_retries)
        seen = self.session.statistics().records
        message_id = self.prompt(content)
        fold = AnswerFold(self.id, message_id)
        if outputs is not None and typed is not None:
            # Invariant: set before the next checkpoint, so before any turn can claim it.
            outputs.asked[message_id] = (typed, retries)
        return await self._answer(fold, seen, content, typed)

    async def _answer(
        self, fold: AnswerFold, seen: int, content: str, typed: OutputType[Any] | None
    ) -> Any:
        while True:
            new = self.session.records_since(seen)
            seen += len(new)
            answer = fold.feed(new)
            if answer is not None:
                await trio.lowlevel.checkpoint()
                if typed is not None and fold.output is not None:
                    return typed.structure(fold.output.answer)
                return answer
            if self._done.is_set():
                await trio.lowlevel.checkpoint()
                raise AgentClosedError(
                    f"agent {self.id} was disposed before it answered {content!r}; a queued "
                    f"message stays in its session (resume the agent to run it)"
                )
            await self._change().wait()

    # -- typed output -----------------------------------------------------------------------

    def _outputs(self) -> Outputs:
        outputs = self._parts.outputs
        if outputs is None:
            outputs = self._parts.outputs = Outputs()
        return outputs

    @property
    def output(self) -> OutputKind | None:
        """The typed answer every turn gives unless ``ask(output=)`` asks for another: an
        attrs class, an :class:`OutputSchema`, or ``None`` (a text answer). Not recorded:
        set it again on a resumed agent (``create(output=)`` sets it).

        Raises:
            TypeError: (setting) neither an attrs class nor an :class:`OutputSchema`.
        """
        outputs = self._parts.outputs
        default = outputs.default if outputs is not None else None
        return default.kind if default is not None else None

    @output.setter
    def output(self, output: OutputKind | None) -> None:
        typed = output_of(output) if output is not None else None
        if typed is not None or self._parts.outputs is not None:
            self._outputs().default = typed

    @property
    def output_retries(self) -> int:
        """How many refused typed answers a turn retries (2 unless set).

        Raises:
            ValueError: (setting) not a whole number >= 0.
        """
        outputs = self._parts.outputs
        return outputs.retries if outputs is not None else DEFAULT_RETRIES

    @output_retries.setter
    def output_retries(self, retries: int) -> None:
        self._outputs().retries = check_retries(retries)

    @overload
    def last_output(self, output: type[T]) -> T | None: ...

    @overload
    def last_output(self, output: OutputSchema) -> Any: ...

    def last_output(self, output: OutputKind) -> Any:
        """The latest accepted typed answer of the session (resumed ones too), structured
        as ``output``; ``None`` when there is none.

        Raises:
            TypeError: ``output`` is not an attrs class or :class:`OutputSchema`.
            ArgumentsError: the recorded answer does not structure as ``output``.
        """
        typed = output_of(output)
        record = latest_output(self.session.records)
        return typed.structure(record.answer) if record is not None else None

    def _enqueue(
        self, lane: Lane, content: str, *, wake: bool, images: tuple[ImagePart, ...] = ()
    ) -> MessageId:
        if not isinstance(content, str):
            raise TypeError(f"messages are text (str); got {type(content).__name__}")
        if self._closing:
            raise AgentClosedError(
                f"agent {self.id} is {self._status.value}; it takes no more messages "
                f"(create or resume an agent to continue)"
            )
        if self._parts.hooks.at(PROMPT_ACCEPTED):
            message_accepted(self._parts.hooks, self.id, lane, content)
        message = self._parts.inbox.add(lane, content, wake=wake)
        try:
            for image in images:
                self.session.append(
                    ImageAttached(message_id=message.id, mime_type=image.mime_type, data=image.data)
                )
            self.session.append(
                InboxSpliced(op="add", lane=lane, message_id=message.id, content=content, wake=wake)
            )
        except BaseException:
            # Invariant: every queued message is recorded, so one the session refuses (text
            # that is not Unicode) is not queued either.
            self._parts.inbox.discard(message.id)
            raise
        if wake:
            self._wake.set()
        self._notify()
        return message.id

    def _record_removal(self, message: QueuedMessage, reason: str) -> None:
        outputs = self._parts.outputs
        if outputs is not None:
            outputs.asked.pop(message.id, None)
        self.session.append(
            InboxSpliced(op="remove", lane=message.lane, message_id=message.id, reason=reason)
        )

    # -- stopping -------------------------------------------------------------------------------

    def cancel(self, cause: CancelCause | None = None, *, keep_inbox: bool = False) -> bool:
        """Stop: clear both lanes (unless ``keep_inbox``) and abort the running turn, here and
        in every child agent (as :class:`ParentCancel`; see ``CancelCause.for_child``).

        Args:
            cause: why; ``UserCancel()`` by default. Its class must be serializable
                (registered with :func:`trio_agents.session.register_cause`), since the
                cancelled turn records it.
            keep_inbox: keep queued messages; only the running turns are aborted.

        Returns:
            Whether anything was cleared or aborted, in this agent or any child. A turn that
            has already recorded its end is not aborted, and an agent being disposed is not
            touched. A call that does nothing emits nothing.

        Raises:
            TypeError: ``cause`` is not a registered :class:`CancelCause`; nothing changed.
        """
        cause = check_recordable_cause(cause if cause is not None else UserCancel())
        if self._closing or not self._has_work(keep_inbox):
            # A disposing agent's turn is already being stopped, and its queued messages
            # stay recorded for a resume: there is nothing more to stop.
            return False
        self._cancel(cause, keep_inbox)
        return True

    def _has_work(self, keep_inbox: bool) -> bool:
        """Whether a cancel would clear or abort anything here or in a child."""
        if self._turn is not None or (
            not keep_inbox and (len(self._parts.inbox) > 0 or self._compact_jobs)
        ):
            return True
        return any(child._has_work(keep_inbox) for child in self._children.values())

    def _cancel(self, cause: CancelCause, keep_inbox: bool) -> None:
        # Invariant: called only when _has_work() is true, so the event announces real work.
        # Built only when someone listens, as AgentStatusChanged is: 413,127 -> 405,387
        # instructions per cancel (python -m benchmarks --only instructions; a listener
        # still sees it: test_cancel_requested_event_is_emitted_once_before_clearing).
        if self._parts.listens(AgentCancelRequested):
            self._parts.emit(AgentCancelRequested(agent_id=self.id, cause=cause))
        if not keep_inbox:
            inbox = self._parts.inbox
            # An empty inbox (the usual cancel: the running turn claimed its prompt) is not
            # cleared: 356,124 -> 353,181 instructions per cancel (bench_instructions).
            if len(inbox) > 0:
                for message in inbox.clear():
                    self._record_removal(message, "cancelled")
            if self._compact_jobs:
                self._fail_jobs(CompactionError(f"compaction cancelled by {cause!r}", cause))
        if self._turn is not None:
            self._turn.abort(cause)
        for child in list(self._children.values()):
            if child._has_work(keep_inbox):
                child._cancel(cause.for_child(self.id), keep_inbox)
        self._notify()

    async def when_idle(self) -> None:
        """Return when the agent is idle with nothing wakeable queued, or closed.

        Follows a successor turn that starts before idleness could be observed; after a cancel
        it returns once the cancelled turn has ended and been recorded.
        """
        if self._quiescent():
            await trio.lowlevel.checkpoint()
            return
        # Event.wait is a checkpoint: no second one after a wait.
        while True:
            idle = self._idle
            if idle is None:
                idle = self._idle = trio.Event()
            await idle.wait()
            if self._quiescent():
                return

    def _quiescent(self) -> bool:
        if self._done.is_set():
            return True
        return (
            self._status is AgentStatus.IDLE
            and self._turn is None
            and not self._parts.inbox.wakeable
            and not self._compact_jobs
        )

    # -- the loop's steps (its driver runs them) ----------------------------------------------

    def _set_status(self, new: AgentStatus) -> None:
        if new is self._status:
            return
        old, self._status = self._status, check_status(self._status, new)
        if self._parts.listens(AgentStatusChanged):
            self._parts.emit(AgentStatusChanged(agent_id=self.id, old=old, new=new))
        self._notify()

    def _change(self) -> trio.Event:
        """The event the next change of state sets."""
        changed = self._changed
        if changed is None:
            changed = self._changed = trio.Event()
        return changed

    def _notify(self) -> None:
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()
        idle = self._idle
        if idle is not None and self._quiescent():
            self._idle = None
            idle.set()

    def _fail_jobs(self, error: BaseException) -> None:
        for job in self._compact_jobs:
            job.fail(error)
        self._compact_jobs.clear()

    @property
    def _turn(self) -> Turn | CompactJob | None:
        """The running work a cancel aborts: ``None`` once it is recording its end."""
        work = self._work
        return None if work is None or work.ending else work

    async def _run_compaction(self, job: CompactJob) -> None:
        self._compactions += 1
        self._work = job
        try:
            try:
                await job.run(self._parts, f"compact-{self._compactions}")
            finally:
                self._work = None
            # Invariant: compact() returns once its record is durable, so the flush comes
            # before settle() wakes the caller (test_a_compaction_is_durable_when_compact_returns).
            if job.record is not None:
                with trio.CancelScope(shield=True):
                    await self._parts.flush_quietly()
        finally:
            job.settle()
            self._notify()

    def _claimable(self) -> bool:
        # Checked again after the status change: a listener of it may have cancelled the
        # work, and a turn without a claim would ask the model about the previous message.
        return self._parts.inbox.wakeable

    async def _run_one_turn(self) -> None:
        # Invariant: claiming and publishing the turn happen in one synchronous step.
        turn = Turn(self._parts, f"t-{self._next_turn}", self._parts.inbox.claim_turn())
        self._next_turn += 1
        self._turns += 1
        self._work = turn
        try:
            with tracing.invoke_agent(self.session, turn.id, parent_id=self._config.parent_id):
                await turn.run()
        finally:
            self._work = None
            self._notify()


def new_agent(
    *,
    session: Session,
    store: SessionStore,
    tools: ToolCalls,
    model: Model,
    emit: Callable[[object], None],
    config: AgentConfig,
    listens: Callable[[type], bool] | None = None,
    parent: Agent | None = None,
    compactor: Callable[[], Compactor | None] | None = None,
    approver: Approver | None = None,
    deps: object = None,
    agents: ChildAgents | None = None,
    prices: PriceTable | None = None,
    hooks: HookRegistry | None = None,
) -> Built[Agent]:
    """A new :class:`Agent` of ``session``, restored from its records, and its driver. The
    only way to get a driver for an agent is to make the agent (what
    :class:`DefaultAgentFactory` does)."""
    inbox, next_turn, usage = restore(session)
    approvals = Approvals(
        ask=config.ask,
        approver=approver,
        session=session,
        parent=parent._parts.approvals if parent is not None else None,
    )
    parts = AgentParts(
        agent=None,
        approvals=approvals,
        session=session,
        store=store,
        model=model,
        tools=tools,
        allowed=frozenset(config.tools) if config.tools is not None else None,
        emit=emit,
        listens=listens if listens is not None else _anyone,
        inbox=inbox,
        usage=usage,
        history=History(config.instructions).update(session),
        max_steps=config.max_steps,
        find_compactor=compactor,
        deps=deps,
        agents=agents,
        prices=prices if prices is not None else DEFAULT_PRICES,
        hooks=hooks if hooks is not None else NO_HOOKS,
    )
    agent = Agent(session=session, config=config, parts=parts, parent=parent, next_turn=next_turn)
    parts.agent = agent
    # The ledger stops the agent: made once there is an agent to stop.
    parts.budget = Ledger.open(
        session.id,
        config.budget,
        parent._parts.budget if parent is not None else None,
        agent.cancel,
        started=config.created_at,
        records=session.records,
    )
    return Built(agent, _Driver(agent))


@final
@attrs.define(eq=False, repr=False)
class _Driver(AgentDriver):
    """Runs and stops one :class:`Agent` (see :mod:`._driver` for the order of calls)."""

    _agent: Agent

    async def run(self) -> None:
        """The agent's loop: a turn or a compaction at a time, until it is closing."""
        agent = self._agent
        try:
            while not agent._closing:
                if agent._wake.is_set():
                    agent._wake = Wake()
                if agent._compact_jobs:
                    agent._set_status(AgentStatus.RUNNING)
                    await agent._run_compaction(agent._compact_jobs.pop(0))
                    continue
                if not agent._parts.inbox.wakeable:
                    agent._set_status(AgentStatus.IDLE)
                    await agent._wake.wait()
                    continue
                agent._set_status(AgentStatus.RUNNING)
                if agent._claimable():
                    await agent._run_one_turn()
        finally:
            agent._fail_jobs(AgentClosedError(f"agent {agent.id} closed before it compacted"))
            agent._done.set()
            agent._notify()

    async def stop(self) -> None:
        """Stop the loop and await its exit and its flushes (first step of teardown).

        The final flush makes what was recorded outside a turn (an ``inject`` or ``discard``
        after the last turn's own flush) durable before the agent's scope, whose child
        agents, jobs and tools may take long to stop, unwinds; the session's detach would
        write it only after that
        (test_every_record_is_durable_before_the_agents_scope_unwinds).
        """
        agent = self._agent
        if not agent._closing:
            agent._closing = True
            agent._set_status(AgentStatus.DISPOSING)
        if agent._turn is not None:
            agent._turn.dispose()
        agent._wake.set()
        await agent._done.wait()
        await agent._parts.flush()

    def adopted(self) -> None:
        agent = self._agent
        if agent.parent is not None:
            agent.parent._children[agent.id] = agent

    def detached(self) -> None:
        agent = self._agent
        # The parts name the agent to its tools; a disposed agent runs none, and without the
        # reference a disposed agent nobody holds is freed at once, not by the collector.
        agent._parts.agent = None
        if agent._status is AgentStatus.DISPOSING:
            agent._set_status(AgentStatus.DISPOSED)
        if agent.parent is not None:
            agent.parent._children.pop(agent.id, None)

    def lose(self, cause: CancelCause) -> None:
        """Stop for good at once (the session is no longer this worker's): announce it, take
        no more messages and abort the running work; the teardown follows. The inbox stays
        as it is: it is stored, and the worker that took the session over runs it."""
        agent = self._agent
        if agent._closing:
            return
        agent._parts.emit(AgentCancelRequested(agent_id=agent.id, cause=cause))
        agent._closing = True
        agent._set_status(AgentStatus.DISPOSING)
        if agent._turn is not None:
            agent._turn.abort(cause)
        agent._wake.set()
        agent._notify()
