"""A worker that lost its session's lease stops the agent at once (``LeaseLost``): real
PostgreSQL, real worker processes (``pg_lease_worker.py``) paused past the lease's expiry."""

from __future__ import annotations

import re
import signal

import psycopg
import pytest
import trio

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.paths import HELPERS
from tests.helpers.pg_workers import Worker, workers
from trio_agents.session import PostgresStore, SessionAppended, TurnEnded, TurnStarted

WORKER = HELPERS / "pg_lease_worker.py"


async def test_a_worker_that_lost_its_lease_stops_its_agent_with_lease_lost(
    pg_dsn: str,
) -> None:
    """SIGSTOP the worker running a turn past its lease; another worker takes the session
    over; SIGCONT: the first stops its agent at once with LeaseLost (announced, then
    disposed), takes no more prompts and makes no further model call."""
    async with ta.open_runtime(store=PostgresStore(pg_dsn)) as root:
        await (await root.agents.create(session_id="s")).dispose()
    async with workers() as started:
        holder = await Worker.start(WORKER, pg_dsn, "hold", 1.0)
        started.append(holder)
        assert await holder.line() == "ready"
        await holder.send("go")
        assert await holder.line() == "entered"
        assert await holder.line() == "model call 1"
        assert await holder.line() == "turn"
        holder.process.send_signal(signal.SIGSTOP)
        heir = await Worker.start(WORKER, pg_dsn, "takeover", 1.0)
        started.append(heir)
        assert await heir.line() == "ready"
        assert await heir.line() == "resumed"
        holder.process.send_signal(signal.SIGCONT)
        seen = await holder.until("disposed ")
        assert seen[-1] == "disposed s"
        [lost] = [line for line in seen if line.startswith("lost ")]
        assert re.match(r"^lost session 's' is no longer this worker's: ", lost)
        cancels = [line for line in seen if line.startswith("cancel ")]
        assert len(cancels) == 1
        assert re.fullmatch(
            rf"cancel LeaseLost\(holder='[^:']+:{holder.process.pid}:[0-9a-f]+'\)", cancels[0]
        )
        assert not any(line.startswith("model call") for line in seen)
        await holder.send("prompt")
        assert re.match(
            r"^refused agent s is disposed; it takes no more messages", await holder.line()
        )
        await holder.send("calls")
        assert await holder.line() == "calls 1"
        assert await holder.end() == 0
        assert await heir.end() == 0


async def test_a_lost_lease_stops_the_agent_and_records_lease_lost(pg_dsn: str) -> None:
    """In one process: a store whose lease is taken over from outside stops the running
    turn with LeaseLost (its TurnEnded, kept in memory, says so), disposes the agent and
    emits AgentCancelRequested(LeaseLost) then AgentDisposed."""
    store = PostgresStore(pg_dsn, lease_seconds=1.0, renew_every=0.2)
    events: list[object] = []
    started, disposed = trio.Event(), trio.Event()
    async with ta.open_runtime(store=store, model="echo?delay=3600") as root:
        root.on(ag.AgentCancelRequested, events.append)
        root.on(ag.AgentDisposed, events.append)
        root.on(ag.AgentDisposed, lambda event: disposed.set())
        root.on(
            SessionAppended,
            lambda event: started.set() if isinstance(event.record, TurnStarted) else None,
        )
        agent = (await root.agents.create(session_id="s")).agent
        agent.prompt("a long turn")
        await started.wait()
        await root.sessions.flush(agent.session)
        # Another worker takes the lease over: a new owner and epoch, as a take-over writes.
        with psycopg.connect(pg_dsn) as conn:
            conn.execute(
                "UPDATE trio_agents_sessions SET owner = 'elsewhere', epoch = epoch + 1 "
                "WHERE id = 's'"
            )
        with trio.fail_after(30):
            await disposed.wait()
        assert root.agents.get("s") is None
        requested, gone = events
        assert requested == ag.AgentCancelRequested(
            agent_id="s", cause=ta.LeaseLost(holder=store.owner)
        )
        assert isinstance(gone, ag.AgentDisposed)
        [ended] = [r for r in agent.session.records if isinstance(r, TurnEnded)]
        assert ended.cause == ta.LeaseLost(holder=store.owner)
        with pytest.raises(ag.AgentClosedError, match=r"^agent s is disposed; it takes no more"):
            agent.prompt("after")
