"""Clients of the work queue: submit a prompt to a session from any process, stream what
its turn writes, await its answer, cancel it.

Rules:
- A submission is one row (``_sql.submit``); its id makes it idempotent: submitting the same
  id again returns the same prompt, never a second one.
- Waiting is woken by ``NOTIFY`` (the prompt settled, records of its session were flushed),
  read by a ``LISTEN`` thread of the client's; a slow poll covers lost notifications. A
  settled prompt's notification carries its outcome (``_sql.SETTLED``), so a prompt costs
  its client one round trip, the submit: the waiter is registered before the submit, and
  the submitted row is its first status (unless the answer was too long to be carried).
- Records are read with the store's public API (``PostgresStore.load``, then ``abandon``:
  a read, never a write). A turn still running is open in the database; the repair that
  ``load`` appends to the copy (``TurnEnded(interrupted)``) is not the turn's end, so the
  stream holds back a trailing ``interrupted`` end until the prompt has settled.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, final

import attrs
import trio

from ..cancel import CancelCause, UserCancel
from ..kernel import open_root
from ..session import (
    PostgresStore,
    Record,
    SessionNotFoundError,
    StopReason,
    TurnEnded,
    check_recordable_cause,
    check_session_id,
    dump_record,
    load_record,
)
from ._errors import PromptCancelledError, PromptFailedError, PromptNotFoundError
from ._lazy import queue_modules
from ._records import AgentTemplate, CancelRequested, Policy, PromptClaimed

if TYPE_CHECKING:
    from . import _pg
    from . import _sql as sql


def _load() -> None:
    """Import the queue's SQL (and so psycopg) on first use; say which extra is missing."""
    global sql, _pg
    sql, _pg = queue_modules()


_FINAL = frozenset({"completed", "failed", "cancelled"})


@attrs.frozen
class PromptStatus:
    """A prompt as the queue holds it now.

    Attributes:
        state: ``queued``, ``running``, ``completed``, ``failed`` or ``cancelled``.
        worker: the id of the worker that claimed it last, or ``None``.
        answer: the answer of a ``completed`` prompt.
        error: why a ``failed`` prompt has no answer.
        cause: the cancel cause of a ``cancelled`` prompt (or one asked for).
    """

    id: str
    session_id: str
    state: str
    worker: str | None
    answer: str | None
    error: str | None
    cause: CancelCause | None

    @property
    def settled(self) -> bool:
        return self.state in _FINAL


def _status(row: sql.PromptRow) -> PromptStatus:
    return _status_of(
        row.id, row.session_id, row.state, row.worker, row.answer, row.error, row.cancel
    )


def _status_of(
    prompt_id: str,
    session_id: str,
    state: str,
    worker: str | None,
    answer: str | None,
    error: str | None,
    cancel: str | None,
) -> PromptStatus:
    cause = None
    if cancel is not None:
        requested = load_record(cancel, where=f"the cancel of prompt {prompt_id!r}")
        assert isinstance(requested, CancelRequested)
        cause = requested.cause
    return PromptStatus(prompt_id, session_id, state, worker, answer, error, cause)


@attrs.define(eq=False)
class _Waiter:
    """One wait for a notification; ``status`` is the outcome a settled prompt's carried."""

    event: trio.Event = attrs.Factory(trio.Event)
    status: PromptStatus | None = None


@final
class RemotePrompt:
    """One submitted prompt; any process may hold one (``Remote.prompt(id)``)."""

    def __init__(
        self,
        remote: Remote,
        prompt_id: str,
        session_id: str,
        submitted: tuple[_Waiter, sql.PromptRow] | None = None,
    ) -> None:
        self._remote = remote
        self.id = prompt_id
        self.session_id = session_id
        # The waiter registered before the submit read ``row``: the first status is known.
        self._submitted = submitted

    def __repr__(self) -> str:
        return f"<RemotePrompt {self.id} of {self.session_id}>"

    async def status(self) -> PromptStatus:
        """The prompt's state now.

        Raises:
            PromptNotFoundError: no prompt has this id.
        """
        row = await self._remote._pool.run(sql.read_prompt, self.id)
        if row is None:
            raise PromptNotFoundError(f"no prompt has the id {self.id!r}; submit it first")
        return _status(row)

    async def wait_settled(self) -> PromptStatus:
        """Wait until the prompt is completed, failed or cancelled; return its status."""
        remote = self._remote
        submitted, self._submitted = self._submitted, None
        while True:
            if submitted is not None:
                waiter, status = submitted[0], _status(submitted[1])
                submitted = None
                await trio.lowlevel.checkpoint()
            else:
                waiter = remote._waiter(remote._prompt_events, self.id)
                status = await self.status()
            if status.settled:
                return status
            with trio.move_on_after(remote.poll_interval):
                await waiter.event.wait()
            if waiter.status is not None:
                return waiter.status

    async def answer(self) -> str:
        """Wait for the prompt's answer.

        Raises:
            PromptFailedError: the prompt failed (its turn, or its policy after its worker
                was lost).
            PromptCancelledError: it was cancelled (``cause`` says by what).
        """
        status = await self.wait_settled()
        if status.state == "completed":
            return status.answer or ""
        if status.state == "cancelled":
            raise PromptCancelledError(
                f"prompt {self.id} of session {self.session_id!r} was cancelled by "
                f"{status.cause!r} before it answered",
                status.cause,
            )
        raise PromptFailedError(
            f"prompt {self.id} of session {self.session_id!r} failed: {status.error}; its "
            f"session's records show what ran"
        )

    async def cancel(self, cause: CancelCause | None = None) -> PromptStatus:
        """Cancel the prompt with ``cause`` (``UserCancel()`` by default): at once if no
        worker runs it, else by its worker, which records the cause in the turn's end.
        Returns the status right after the request (``wait_settled`` waits for the end).

        Raises:
            TypeError: ``cause`` is not a registered cancel cause.
            PromptNotFoundError: no prompt has this id.
        """
        cause = check_recordable_cause(cause if cause is not None else UserCancel())
        line = dump_record(CancelRequested(prompt_id=self.id, cause=cause))
        row = await self._remote._pool.run(sql.request_cancel, self.id, line)
        if row is None:
            raise PromptNotFoundError(f"no prompt has the id {self.id!r}; submit it first")
        return _status(row)

    async def records(self) -> AsyncGenerator[Record, None]:
        """The session's records from the prompt's first attempt on, as they are flushed,
        until the prompt settles (then the rest, and the iteration ends).

        An iteration left early is closed with ``contextlib.aclosing`` (as every async
        generator under trio)."""
        remote = self._remote
        seen = 0
        started = False
        while True:
            woken = remote._waiter(remote._record_events, self.session_id).event
            settled = (await self.status()).settled
            records = await remote._read(self.session_id)
            end = len(records)
            if not settled:
                while end > seen and _repaired(records[end - 1]):
                    end -= 1
            for record in records[seen:end]:
                if not started and isinstance(record, PromptClaimed):
                    started = record.prompt_id == self.id
                if started:
                    yield record
            seen = max(seen, end)
            if settled:
                return
            with trio.move_on_after(remote.poll_interval):
                await woken.wait()


def _repaired(record: Record) -> bool:
    return isinstance(record, TurnEnded) and record.stop_reason is StopReason.INTERRUPTED


@final
class Remote:
    """A client of the work queue in one database (see :func:`open_remote`)."""

    def __init__(self, dsn: str, store: PostgresStore, poll_interval: float) -> None:
        self.dsn = dsn
        self.poll_interval = poll_interval
        self._store = store
        self._pool = _pg.pool(dsn)
        self._prompt_events: dict[str, _Waiter] = {}
        self._record_events: dict[str, _Waiter] = {}
        self.listener = _pg.Listener(
            dsn, (sql.PROMPTS_CHANNEL, sql.RECORDS_CHANNEL), self._notified
        )

    async def submit(
        self,
        session_id: str,
        content: str,
        *,
        prompt_id: str | None = None,
        agent: AgentTemplate | None = None,
        policy: Policy = "retry",
        retries: int = 1,
    ) -> RemotePrompt:
        """Queue ``content`` as the next prompt of ``session_id``.

        Args:
            session_id: the session (and agent) to run it in.
            content: the prompt's text.
            prompt_id: the prompt's id; submitting one id again is the same prompt (so a
                submission can be retried safely). A fresh id when ``None``.
            agent: create the session's agent from this definition if no session has the
                id yet; ``None``: the session must exist.
            policy: if the worker running it dies mid-turn: ``"retry"`` runs it again (at
                most ``retries`` times), ``"fail"`` reports it failed.
            retries: how many times ``"retry"`` runs it again.

        Raises:
            InvalidSessionIdError: ``session_id`` is not a valid id.
            PromptIdInUseError: ``prompt_id`` was submitted with another session or text.
            ValueError: ``policy`` or ``retries`` is not valid.
        """
        check_session_id(session_id)
        if not isinstance(content, str):
            raise TypeError(f"prompts are text (str); got {type(content).__name__}")
        if policy not in ("retry", "fail"):
            raise ValueError(f"policy is 'retry' or 'fail'; got {policy!r}")
        if retries < 0:
            raise ValueError(f"retries is a count, >= 0; got {retries!r}")
        prompt_id = prompt_id if prompt_id is not None else f"p-{uuid.uuid4().hex[:16]}"
        definition = json.dumps(attrs.asdict(agent)) if agent is not None else None
        # Invariant: the waiter exists before the row is read, so a settle that comes right
        # after the submit is heard (``wait_settled`` starts from the row).
        waiter = self._waiter(self._prompt_events, prompt_id)
        row = await self._pool.run(
            sql.submit, prompt_id, session_id, content, definition, policy, retries
        )
        return RemotePrompt(self, row.id, row.session_id, (waiter, row))

    def prompt(self, prompt_id: str, session_id: str) -> RemotePrompt:
        """A handle to a prompt submitted before (by any process)."""
        return RemotePrompt(self, prompt_id, session_id)

    async def ask(self, session_id: str, content: str, **options: object) -> str:
        """Submit ``content`` (``submit``'s options) and return its answer."""
        prompt = await self.submit(session_id, content, **options)  # type: ignore[arg-type]
        return await prompt.answer()

    def _waiter(self, waiters: dict[str, _Waiter], key: str) -> _Waiter:
        waiter = waiters.get(key)
        if waiter is None or waiter.event.is_set():
            waiter = waiters[key] = _Waiter()
        return waiter

    def _notified(self, channel: str, payload: str) -> None:
        if not channel:
            for every in (self._prompt_events, self._record_events):
                for waiting in every.values():
                    waiting.event.set()
            return
        status = None
        if channel == sql.PROMPTS_CHANNEL:
            waiters = self._prompt_events
            if payload.startswith("{"):
                settled = json.loads(payload)
                payload = settled["id"]
                if "state" in settled:
                    status = _status_of(*(settled[name] for name in sql.SETTLED))
        else:
            waiters = self._record_events
        waiter = waiters.pop(payload, None)
        if waiter is not None:
            waiter.status = status
            waiter.event.set()

    async def _read(self, session_id: str) -> tuple[Record, ...]:
        try:
            session = await self._store.load(session_id)
        except SessionNotFoundError:
            return ()  # not created yet: its worker creates it with the first prompt
        try:
            return session.records
        finally:
            await self._store.abandon(session)


@asynccontextmanager
async def open_remote(dsn: str, *, poll_interval: float = 5.0) -> AsyncIterator[Remote]:
    """Open a client of the work queue in the PostgreSQL database ``dsn``.

    Raises:
        QueueFormatError: the database's queue is of a newer schema version.
        ConnectionError: the database cannot be reached.
    """
    _load()
    store = PostgresStore(dsn)
    async with open_root() as root:
        await root.plugin(store)
        remote = Remote(dsn, store, poll_interval)
        try:
            await remote._pool.run(sql.prepare_queue)
            async with trio.open_nursery() as nursery:
                await nursery.start(remote.listener.run)
                yield remote
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await remote._pool.aclose()
