"""A worker: runs the queued prompts of any session on demand, one live owner per session.

Rules:
- The worker is a plugin: its fiber owns the agents it runs (it creates or resumes them),
  its tasks (the claim loop, one task per running prompt, the heartbeat, the idle release)
  and its ``LISTEN`` thread. Disposing the fiber stops all of them. Its store is a
  ``PostgresStore`` whose write batches notify ``_sql.RECORDS_CHANNEL`` (the clients' record
  streams), so the worker sends nothing of its own for records.
- The claim loop claims (``_sql.claim``) when woken: by a notification on the queue's
  channel, the drain, or a prompt ending here when work may wait behind it (the claim said
  its session had another prompt queued, a submit to that session came while it ran, or the
  last claim could not take everything: it filled every free slot, or a wake-up came while
  none was free); a slow poll (``poll_interval``) only covers lost notifications. It claims
  at most ``max_sessions`` prompts at a time, one per session. A prompt whose session's store
  lease another owner still holds (a worker that died, until its lease runs out) is left
  queued, not claimed to wait in a resume that fails; the heartbeat asks when the first such
  lease ends, and the claim loop claims again then (no notification says so).
- A claimed prompt runs as :mod:`._ledger` decides from the session's records: start an
  attempt, adopt a message a dead worker queued, or settle. It settles only under its claim
  and in the transaction that makes what it settles on durable: a settle rides in the store's
  write batch (``PostgresStore.ride``, ``_sql.SettleRider``), fenced by the session's lease
  as the records are. While its turn runs, a run leaves a ride whose item the store asks for
  at each batch of the session; the batch that makes the turn's end durable (the turn's own
  flush) settles the prompt too: no round trip, task or thread hand-off of its own, and the
  prompts whose turns end together settle in one statement. A settle the ride cannot make
  (a failure to record first, a prompt found settled on a resume) is a flush with the ride
  (``flush_riding``). A run wakes when its agent stops running (the turn's end), its ride is
  over, on a cancel, a hand-back or a disposal, not per record.
- A session idle ``idle_release`` seconds is released: its agent disposed (its store lease
  released), then its route. A route the heartbeat finds taken over (this worker was stopped
  past its lease) is dropped with its agent.
- ``drain()``: stop claiming; wait up to ``drain_timeout`` for the running prompts; cancel
  the rest with :class:`WorkerDrained` and hand them back; dispose every agent; give up the
  routes and the worker's row. ``wait_drained()`` returns after that.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any, final

import attrs
import trio

from ..agent import (
    Agent,
    AgentClosedError,
    AgentDisposed,
    AgentHandle,
    AgentIdInUseError,
    AgentRegistry,
    AgentStatus,
    AgentStatusChanged,
    ModelRequiredError,
)
from ..kernel import Context
from ..model import Model, ModelError
from ..session import (
    InvalidSessionIdError,
    PostgresStore,
    Ride,
    SessionClosedError,
    SessionExistsError,
    SessionFormatError,
    SessionIdInUseError,
    SessionLeaseLostError,
    SessionNotFoundError,
    SessionWriteError,
    load_record,
)
from ._lazy import queue_modules
from ._ledger import Decision, Ledger, decide
from ._records import (
    AgentTemplate,
    CancelRequested,
    PromptClaimed,
    PromptFailed,
    TurnInterrupted,
    WorkerDrained,
    WorkerLost,
)

if TYPE_CHECKING:
    from . import _pg
    from . import _sql as sql


def _load() -> None:
    """Import the queue's SQL (and so psycopg) on first use; say which extra is missing."""
    global sql, _pg
    sql, _pg = queue_modules()


log = logging.getLogger("trio_agents")


@attrs.frozen
class WorkerStatistics:
    """What a worker did so far."""

    claimed: int
    completed: int
    failed: int
    cancelled: int
    handed_back: int
    running: int
    held: int
    released: int


def _duration(name: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} is a duration in seconds, > 0; got {value!r}")
    return float(value)


#: What makes a prompt's agent impossible to make anywhere: the prompt fails with it. (Any
#: other error hands the prompt back for another attempt.)
_NO_AGENT = (
    SessionNotFoundError,
    SessionFormatError,
    ModelError,
    ModelRequiredError,
    InvalidSessionIdError,
    TypeError,
    json.JSONDecodeError,
)


def _given(settle: sql.Settle) -> sql.Settle:
    return settle


#: The statuses of an agent whose turn has ended (see ``Worker._on_status``).
_STOPPED = frozenset({AgentStatus.IDLE, AgentStatus.DISPOSING})


@attrs.define(eq=False)
class _Run:
    """A claimed prompt this worker runs."""

    row: sql.PromptRow
    agent: Agent | None = None
    cancel: str | None = None
    #: Whether the claim saw another prompt of the session queued behind this one.
    more: bool = False


@attrs.define(eq=False)
class _Fold:
    """The ledger of a session this worker holds, fed up to ``seen`` records (it lives as
    long as the agent: a prompt feeds it only what came since the last one)."""

    agent: Agent
    ledger: Ledger = attrs.Factory(Ledger)
    seen: int = 0


@final
class Worker:
    """The worker plugin (``name = "worker"``); :func:`serve_worker` applies it.

    Args:
        dsn: the PostgreSQL database of the queue (the runtime's store must be a
            ``PostgresStore`` on the same database).
        lease_seconds: how long the worker counts as live without a heartbeat (its sessions'
            prompts go to other workers after that); use the store's lease.
        idle_release: seconds a session may stay idle here before it is released.
        drain_timeout: seconds a drain waits for running prompts before handing them back.
        poll_interval: seconds between claims when no notification came (lost ones only).
        max_sessions: how many prompts (so sessions) run here at once at most.
    """

    name = "worker"
    inject = ("agents",)

    def __init__(
        self,
        dsn: str,
        *,
        lease_seconds: float = 10.0,
        idle_release: float = 60.0,
        drain_timeout: float = 30.0,
        poll_interval: float = 5.0,
        max_sessions: int = 64,
    ) -> None:
        _load()
        self.dsn = dsn
        self.lease_seconds = _duration("lease_seconds", lease_seconds)
        self.idle_release = _duration("idle_release", idle_release)
        self.drain_timeout = _duration("drain_timeout", drain_timeout)
        self.poll_interval = _duration("poll_interval", poll_interval)
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1; got {max_sessions!r}")
        self.max_sessions = max_sessions
        self.id = ""
        self._pool = _pg.pool(dsn)
        self.listener: _pg.Listener | None = None
        self._wake = trio.Event()
        self._draining = False
        self._handing_back = False
        self._drained = trio.Event()
        self._runs: dict[str, _Run] = {}  # by session id
        self._held: dict[str, AgentHandle[Any]] = {}
        self._folds: dict[str, _Fold] = {}
        self._idle_since: dict[str, float] = {}
        self._routed_at: dict[str, float] = {}
        self._releasing: set[str] = set()
        self._changed: dict[str, trio.Event] = {}
        # Work the last claim could not take, so the end of a run here claims again: a claim
        # that filled every free slot, or a wake-up while no slot was free (``_backlog``); a
        # submit to a session running here (``_waiting``: its run's end claims again).
        self._backlog = False
        self._waiting: set[str] = set()
        # When the first session lease a queued prompt waits for ends (trio's clock), as the
        # last heartbeat saw it: the claim loop claims again then (``sql.lease_wait``).
        self._blocked_until: float | None = None
        self._counts = dict.fromkeys(
            ("claimed", "completed", "failed", "cancelled", "handed_back", "released"), 0
        )

    # -- the public surface --------------------------------------------------------------

    def drain(self) -> None:
        """Stop claiming and hand back or finish what runs (see the module's rules)."""
        self._draining = True
        self._wake.set()

    @property
    def draining(self) -> bool:
        """Whether a drain was asked for."""
        return self._draining

    async def wait_drained(self) -> None:
        """Return once a drain is over (every agent disposed, every route given up)."""
        await self._drained.wait()

    def statistics(self) -> WorkerStatistics:
        return WorkerStatistics(running=len(self._runs), held=len(self._held), **self._counts)

    # -- the plugin ----------------------------------------------------------------------

    async def apply(self, ctx: Context, config: None) -> None:
        agents: AgentRegistry[Any] = ctx.get("agents")
        self._agents = agents
        store = agents.store
        if not isinstance(store, PostgresStore) or store.records_channel != sql.RECORDS_CHANNEL:
            raise TypeError(
                f"a worker's session store must be PostgresStore(dsn, records_channel="
                f"{sql.RECORDS_CHANNEL!r}) on the queue's database (its clients stream records "
                f"from those notifications); got {agents.store!r}; serve_worker() makes it"
            )
        self._store = store
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._rider = sql.SettleRider(self.id)
        self._pool = _pg.pool(self.dsn, self.lease_seconds)
        ctx.defer(self._pool.aclose)
        await self._pool.run(sql.prepare_queue)
        await self._pool.run(sql.register_worker, self.id, self.lease_seconds)
        ctx.defer(self._unregister)
        ctx.on(AgentStatusChanged, self._on_status)
        ctx.on(AgentDisposed, self._on_disposed)
        channels = (sql.QUEUE_CHANNEL, sql.worker_channel(self.id))
        self.listener = _pg.Listener(self.dsn, channels, self._on_notify)
        await ctx.start(self.listener.run)
        ctx.start_soon(self._heartbeat)
        ctx.start_soon(self._idle_releaser)
        ctx.start_soon(self._serve)

    async def _unregister(self) -> None:
        with trio.move_on_after(self.lease_seconds) as scope:
            scope.shield = True
            try:
                await self._pool.run(sql.unregister_worker, self.id)
            except Exception as exc:  # its row expires by itself
                log.warning("worker %s could not unregister (%s)", self.id, exc)

    # -- events from the runtime and the database ------------------------------------------

    def _on_status(self, event: AgentStatusChanged) -> None:
        # Invariant: a prompt's run waits only for its turn to end (``decide`` says ``adopt``
        # or ``wait``; a cancel, a hand-back and a disposal kick it themselves), and the agent
        # stops running (idle, or disposing) only once that turn has recorded its end.
        # Waking on that, not on each of the turn's records, saves a ``SessionAppended``
        # event and a wake-up of the run per record (issue #42).
        if event.new in _STOPPED and event.agent_id in self._runs:
            self._kick(event.agent_id)

    def _on_disposed(self, event: AgentDisposed) -> None:
        self._held.pop(event.agent_id, None)
        self._folds.pop(event.agent_id, None)
        self._kick(event.agent_id)

    def _kick(self, session_id: str) -> None:
        event = self._changed.get(session_id)
        if event is not None:
            event.set()

    def _on_notify(self, channel: str, payload: str) -> None:
        kind, _, what = payload.partition(":")
        if kind == "submit":
            session_id, _, owner = what.partition(" ")
            if owner and owner != self.id:
                return  # the session is routed to a live worker: only it may claim it
            if session_id in self._runs:
                # A claim skips it until its run ends, and that end claims again: waking the
                # claim loop now would cost a round trip that finds nothing.
                self._waiting.add(session_id)
                return
        elif kind == "cancel":
            for run in self._runs.values():
                if run.row.id == what:
                    self._kick(run.row.session_id)
                    run.cancel = run.cancel or ""  # read the cause from the row
        if len(self._runs) >= self.max_sessions:
            # No claim until a slot frees: the end of a run claims then. Waking the claim
            # loop for nothing cost two scheduler passes a submit to a busy worker.
            self._backlog = True
            return
        self._wake.set()

    # -- the claim loop --------------------------------------------------------------------

    async def _serve(self) -> None:
        async with trio.open_nursery() as runs:
            while not self._draining:
                self._wake = trio.Event()
                free = self.max_sessions - len(self._runs)
                if free > 0:
                    busy = [*self._runs, *self._releasing]
                    self._backlog = False
                    try:
                        claimed = await self._pool.run(
                            partial(sql.claim, holder=self._store.owner), self.id, free, busy
                        )
                    except ConnectionError as exc:
                        log.warning("worker %s could not claim prompts (%s)", self.id, exc)
                        claimed = []
                    for found in claimed:
                        run = _Run(found.row, cancel=found.row.cancel, more=found.more)
                        self._runs[found.row.session_id] = run
                        self._routed_at[found.row.session_id] = trio.current_time()
                        self._counts["claimed"] += 1
                        runs.start_soon(self._run, run)
                    if claimed and len(claimed) == free:
                        self._backlog = True  # more may be queued than there was room for
                        continue
                if self.draining:
                    break
                with trio.move_on_after(self._next_claim_in()):
                    await self._wake.wait()
            with trio.move_on_after(self.drain_timeout):
                while self._runs:
                    self._wake = trio.Event()
                    await self._wake.wait()
            self._handing_back = True
            for run in list(self._runs.values()):
                if run.agent is not None:
                    run.agent.cancel(WorkerDrained(worker=self.id))
                self._kick(run.row.session_id)
        for session_id, handle in list(self._held.items()):
            await self._dispose(session_id, handle)
            self._held.pop(session_id, None)
        await self._unregister()
        self._drained.set()

    def _next_claim_in(self) -> float:
        """Seconds until the claim loop claims again unless woken: the fallback poll, or
        sooner the end of a session lease a prompt waits for (its last owner died: no
        notification says when that lease ends)."""
        until, now = self._blocked_until, trio.current_time()
        if until is None or until <= now:
            self._blocked_until = None  # the claim that just ran came after it
            return self.poll_interval
        if len(self._runs) >= self.max_sessions:
            # No claim until a slot frees; the end of a run claims then.
            self._backlog = True
            return self.poll_interval
        return min(self.poll_interval, until - now)

    # -- one prompt ------------------------------------------------------------------------

    async def _run(self, run: _Run) -> None:
        row = run.row
        session_id = row.session_id
        try:
            await self._run_prompt(run)
        except (SessionWriteError, SessionClosedError, AgentClosedError):
            pass  # the session was taken over or disposed: its next owner settles the prompt
        except Exception:
            # Not the prompt's fault as far as anyone can tell: another attempt, elsewhere.
            log.exception("worker %s failed running prompt %s; handing it back", self.id, row.id)
            if await self._retrying(sql.hand_back, row.id, self.id, row.claim):
                self._counts["handed_back"] += 1
        finally:
            del self._runs[session_id]
            self._changed.pop(session_id, None)
            self._idle_since[session_id] = trio.current_time()
            waiting = session_id in self._waiting
            self._waiting.discard(session_id)
            if run.more or waiting or self._backlog or self._draining:
                self._wake.set()

    async def _run_prompt(self, run: _Run) -> None:
        row = run.row
        try:
            agent = await self._agent_for(row)
        except _NO_AGENT as exc:  # no worker can run it: say why
            settled = await self._retrying(
                sql.settle, self.id, [sql.Settle(row.id, row.claim, "failed", None, str(exc))]
            )
            self._settled(row.id in settled, "failed")
            return
        if agent is None:  # drained while waiting for the session
            if await self._retrying(sql.hand_back, row.id, self.id, row.claim):
                self._counts["handed_back"] += 1
            return
        run.agent = agent
        session = agent.session
        fold = self._folds.get(row.session_id)
        if fold is None or fold.agent is not agent:
            fold = self._folds[row.session_id] = _Fold(agent)
        ledger = fold.ledger
        ride: Ride[sql.Settle, bool] | None = None
        try:
            while True:
                changed = self._changed.setdefault(row.session_id, trio.Event())
                if ride is not None and not self._store.unride(session, ride):
                    await ride.done.wait()  # a batch took it: its outcome first
                    if isinstance(ride.error, SessionLeaseLostError | SessionClosedError):
                        raise ride.error  # another owner settles the prompt
                    if ride.error is None and ride.sent is not None:
                        self._settled(bool(ride.result), ride.sent.state)
                        return
                    # Its batch failed (nothing of it was written): settle with the next.
                ride = None
                self._feed(fold)
                if self._record_interruptions(agent, ledger):
                    continue
                if run.cancel is not None:
                    await self._apply_cancel(run, agent, ledger)
                    continue
                decision = self._decide(run, ledger)
                if decision.action == "settle":
                    assert decision.state is not None
                    if decision.state == "failed" and row.id not in ledger.failed:
                        agent.session.append(
                            PromptFailed(
                                prompt_id=row.id,
                                reason=decision.error or "failed",
                                cause=decision.cause,
                            )
                        )
                    settle = self._settle_of(row, decision)
                    alone = Ride(self._rider, partial(_given, settle))
                    settled = await self._store.flush_riding(session, alone)
                    self._settled(bool(settled), settle.state)
                    return
                if self._handing_back and decision.action in ("start", "adopt"):
                    if decision.action == "adopt":
                        agent.cancel(WorkerDrained(worker=self.id))
                        continue
                    await self._agents.store.flush(session)
                    if await self._retrying(sql.hand_back, row.id, self.id, row.claim):
                        self._counts["handed_back"] += 1
                    return
                if decision.action == "start":
                    # Invariant: no checkpoint between the two appends (one write batch).
                    session.append(
                        PromptClaimed(prompt_id=row.id, attempt=decision.attempt, worker=self.id)
                    )
                    agent.prompt(row.content)
                    continue
                if agent.done:
                    return  # disposed under us (lease lost, route lost): another owner settles
                # Invariant: the ride's item is asked when a batch takes the session; the
                # batch that makes the turn's end durable finds it ready (test_round_trips).
                ride = Ride(
                    self._rider,
                    partial(self._ready, run, fold),
                    partial(self._kick, row.session_id),
                )
                self._store.ride(session, ride)
                await changed.wait()
                self._changed[row.session_id] = trio.Event()
        finally:
            if ride is not None:
                self._store.unride(session, ride)

    def _feed(self, fold: _Fold) -> None:
        new = fold.agent.session.records_since(fold.seen)
        fold.seen += len(new)
        fold.ledger.feed(new)

    def _decide(self, run: _Run, ledger: Ledger) -> Decision:
        row = run.row
        return decide(
            ledger,
            row.id,
            policy=row.policy,
            retries=row.retries,
            cancelled=row.id in ledger.cancels,
        )

    @staticmethod
    def _settle_of(row: sql.PromptRow, decision: Decision) -> sql.Settle:
        assert decision.state is not None
        return sql.Settle(row.id, row.claim, decision.state, decision.answer, decision.error)

    def _ready(self, run: _Run, fold: _Fold) -> sql.Settle | None:
        """The settle of a run's prompt, if a write batch of its session now can make it:
        asked by the store (synchronously) as a batch takes the session. Anything the run
        must record or apply first (an interruption, a failure, a cancel) is the run's."""
        if run.cancel is not None:
            return None
        self._feed(fold)
        ledger = fold.ledger
        if ledger.unexplained:
            return None
        decision = self._decide(run, ledger)
        if decision.action != "settle" or (
            decision.state == "failed" and run.row.id not in ledger.failed
        ):
            return None
        return self._settle_of(run.row, decision)

    def _settled(self, settled: bool, state: str) -> None:
        if settled:
            self._counts[state] += 1

    def _record_interruptions(self, agent: Agent, ledger: Ledger) -> bool:
        """Append ``TurnInterrupted`` for every attempt the store's repair closed."""
        unexplained, ledger.unexplained = ledger.unexplained, []
        for attempt in unexplained:
            assert attempt.turn_id is not None  # only a turn's end makes one unexplained
            cause = WorkerLost(worker=attempt.worker)
            agent.session.append(TurnInterrupted(turn_id=attempt.turn_id, cause=cause))
            attempt.interrupted_by = cause
        return bool(unexplained)

    async def _apply_cancel(self, run: _Run, agent: Agent, ledger: Ledger) -> None:
        line = run.cancel
        run.cancel = None
        if not line:
            found = await self._pool.run(sql.read_prompt, run.row.id)
            line = found.cancel if found is not None else None
        if not line or run.row.id in ledger.cancels:
            return
        requested = load_record(line, where=f"the cancel of prompt {run.row.id!r}")
        assert isinstance(requested, CancelRequested)
        agent.session.append(CancelRequested(prompt_id=run.row.id, cause=requested.cause))
        agent.cancel(requested.cause)

    async def _retrying(self, fn: Any, *args: Any) -> Any:
        """``fn`` on the pool, again while the database cannot be reached: a claimed prompt
        left unsettled would stay this live worker's for ever."""
        while True:
            try:
                return await self._pool.run(fn, *args)
            except ConnectionError as exc:
                log.warning("worker %s: %s; retrying", self.id, exc)
                await trio.sleep(min(1.0, self.lease_seconds / 3))

    async def _agent_for(self, row: sql.PromptRow) -> Agent | None:
        """The live agent of the prompt's session here: held, resumed or created. Waits while
        the session's last owner still holds its store lease (it died; the lease expires)."""
        held = self._held.get(row.session_id)
        if held is not None and not held.agent.done:
            agent: Agent = held.agent
            return agent
        definition = AgentTemplate(**json.loads(row.agent)) if row.agent is not None else None
        while not self._handing_back:
            try:
                handle = await self._agents.resume(row.session_id)
            except (AgentIdInUseError, SessionIdInUseError, ConnectionError) as exc:
                # Its last owner still holds the lease (it died: the lease expires), wrote
                # it since it was read, or the database is away: try again.
                log.debug("worker %s waits for session %r (%s)", self.id, row.session_id, exc)
                await trio.sleep(min(0.2, self.lease_seconds / 10))
                continue
            except SessionNotFoundError:
                if definition is None:
                    raise SessionNotFoundError(
                        f"no session {row.session_id!r} is stored; submit its first prompt "
                        f"with an agent definition (agent=AgentTemplate(...)) to create it"
                    ) from None
                try:
                    handle = await self._agents.create(
                        model=definition.model,
                        session_id=row.session_id,
                        tools=definition.tools,
                        instructions=definition.instructions,
                        max_steps=definition.max_steps,
                    )
                except (SessionExistsError, AgentIdInUseError):
                    continue
            self._held[row.session_id] = handle
            resumed: Agent = handle.agent
            return resumed
        return None

    # -- background tasks ------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            await trio.sleep(self.lease_seconds / 3)
            started = trio.current_time()
            try:
                routes, orphans = await self._pool.run(
                    sql.heartbeat, self.id, self.lease_seconds, self._draining
                )
            except ConnectionError as exc:
                log.warning("worker %s heartbeat failed (%s)", self.id, exc)
                continue
            if orphans and not self._draining:
                # A dead worker's prompts: no notification says a worker died.
                self._backlog = True
                self._wake.set()
            try:
                wait = await self._pool.run(sql.lease_wait, self.id, self._store.owner)
            except ConnectionError as exc:
                log.warning("worker %s heartbeat failed (%s)", self.id, exc)
                continue
            if wait is not None and not self._draining:
                # A prompt waits for another owner's session lease (a dead worker's): claim
                # once it ends (now, if it has), then the claim loop's wait ends with it.
                self._blocked_until = trio.current_time() + max(wait, 0.0)
                self._backlog = True
                self._wake.set()
            for session_id, handle in list(self._held.items()):
                if session_id not in routes and self._routed_at.get(session_id, 0.0) < started:
                    # Taken over while this worker was stopped: the new owner runs it.
                    log.warning("worker %s lost the route of session %r", self.id, session_id)
                    self._held.pop(session_id, None)
                    await self._dispose(session_id, handle)

    async def _dispose(self, session_id: str, handle: AgentHandle[Any]) -> None:
        """Dispose an agent this worker runs. Its final flush fails when the session was
        taken over meanwhile (this worker was stopped past its lease): expected, and the
        session's new owner has it, so it is logged, not raised (it would end the worker)."""
        try:
            await handle.dispose()
        except Exception as exc:
            log.warning("worker %s: session %r ended elsewhere (%s)", self.id, session_id, exc)

    async def _idle_releaser(self) -> None:
        while True:
            await trio.sleep(self.idle_release / 4)
            now = trio.current_time()
            idle = [
                s
                for s in self._held
                if s not in self._runs and now - self._idle_since.get(s, now) >= self.idle_release
            ]
            if idle:
                await self._release(idle)

    async def _release(self, sessions: list[str]) -> None:
        self._releasing.update(sessions)
        try:
            for session_id in sessions:
                handle = self._held.pop(session_id, None)
                if handle is not None:
                    await self._dispose(session_id, handle)
            await self._retrying(sql.release_routes, self.id, sessions)
            self._counts["released"] += len(sessions)
        finally:
            self._releasing.difference_update(sessions)


async def serve_worker(
    dsn: str,
    *,
    model: Model | str | None = None,
    lease_seconds: float = 10.0,
    idle_release: float = 60.0,
    drain_timeout: float = 30.0,
    poll_interval: float = 5.0,
    max_sessions: int = 64,
    task_status: trio.TaskStatus[Worker] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the work queue in ``dsn`` until drained (``worker.drain()``) or cancelled.

    Opens a runtime on a ``PostgresStore(dsn)`` with ``model`` as the default model, applies
    a :class:`Worker` in it and reports the worker through ``task_status``. A drain returns
    once every prompt here is finished or handed back; a cancel disposes everything at once
    (the next owners re-run what ran here).

    Raises:
        QueueFormatError: the database's queue is of a newer schema version.
        ConnectionError: the database cannot be reached.
    """
    from ..agent import open_runtime

    worker = Worker(
        dsn,
        lease_seconds=lease_seconds,
        idle_release=idle_release,
        drain_timeout=drain_timeout,
        poll_interval=poll_interval,
        max_sessions=max_sessions,
    )
    _load()
    store = PostgresStore(dsn, lease_seconds=lease_seconds, records_channel=sql.RECORDS_CHANNEL)
    stop = trio.CancelScope()
    ended = trio.Event()

    async def run(task_status: trio.TaskStatus[Worker]) -> None:
        # Invariant: the runtime's teardown runs shielded, also when the caller is cancelled
        # (the connections' closing is async work a cancelled scope would refuse); the
        # caller's cancel reaches only the serving (``stop``).
        try:
            with trio.CancelScope(shield=True):
                async with open_runtime(store=store, model=model) as root:
                    with stop:
                        await root.plugin(worker)
                        task_status.started(worker)
                        await worker.wait_drained()
        except* SessionLeaseLostError as group:
            # An agent whose session was taken over while this worker was stopped fails its
            # last flush, and its co-owners' teardowns report that again: expected, the
            # session lives on where it was taken over.
            log.info("worker %s: sessions taken over ended elsewhere (%s)", worker.id, group)
        finally:
            ended.set()

    failed: Exception | None = None
    async with trio.open_nursery() as nursery:
        try:
            serving: Worker = await nursery.start(run)
        except Exception as exc:
            failed = exc  # raised as it is, not in the nursery's group: a start failure
        else:
            task_status.started(serving)
            try:
                await ended.wait()
            finally:
                stop.cancel()
    if failed is not None:
        raise failed
