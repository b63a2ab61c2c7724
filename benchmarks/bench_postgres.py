"""PostgresStore: flushed turns per second with 32 agents, against JsonlStore in the same run,
and the lease handover after a worker's SIGKILL, against the lease's bound.

Flushed turns: ``AGENTS`` agents on one runtime each take ``TURNS`` turns on the echo model,
all concurrently; every turn ends with a flush of the agent's session (its ``TurnEnded`` is
durable before the agent goes idle). JsonlStore pays one fsync per session file; PostgresStore
commits every session that flushed meanwhile in one transaction (group commit). The server
is a throwaway one started for the run (``tests/helpers/pg_server.py``) with ``fsync`` on, on this
machine's disk, over loopback TCP: a shared server on another machine adds its round trips.
Both sides run ``ROUNDS`` times, interleaved; each keeps its best round.

Handover: a worker process (``tests/helpers/pg_worker.py``) holds a session mid-turn with a lease of
``LEASE`` seconds renewed every ``LEASE / 5``; it is SIGKILLed, and this process tries to
enter the session every 10 ms until it succeeds. The time from the kill to the entry is the
handover; a dead worker's lease runs out at most ``LEASE`` after its last renewal, so the
bound is the lease plus one renewal interval.

Needs the PostgreSQL server binaries (Debian's ``postgresql``) and psycopg; without them it
says so and measures nothing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

import trio_agents as ta
from trio_agents.session import SessionIdInUseError, SessionStore

from ._common import line
from ._fsync_delay import described

ROUNDS = 3
AGENTS = 32
TURNS = 15  # per agent
LEASE = 1.0

ROOT = Path(__file__).resolve().parent.parent


def _pg_server() -> Any:
    """The tests' throwaway-server helper (``tests/helpers/pg_server.py``)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.helpers import pg_server

    return pg_server


async def _agent_turns(agent: ta.Agent, turns: int) -> None:
    for n in range(turns):
        agent.prompt(f"turn {n}")
        await agent.when_idle()


async def flushed_turns(store: SessionStore, agents: int, turns: int) -> float:
    """Seconds for ``agents`` agents to take ``turns`` turns each, concurrently (the agents'
    creation is not timed)."""
    async with ta.open_runtime(store=store) as root:
        live = [(await root.agents.create()).agent for _ in range(agents)]
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for agent in live:
                nursery.start_soon(_agent_turns, agent, turns)
        return time.perf_counter() - start


@asynccontextmanager
async def _applied(store: SessionStore) -> AsyncIterator[SessionStore]:
    async with ta.open_runtime(store=store):
        yield store


async def _line(process: trio.Process, buffer: bytearray) -> str:
    assert process.stdout is not None
    while b"\n" not in buffer:
        data = await process.stdout.receive_some(1 << 16)
        if not data:
            raise RuntimeError("the worker exited before it held the session")
        buffer += data
    end = buffer.index(b"\n")
    text = bytes(buffer[:end]).decode()
    del buffer[: end + 1]
    return text


async def handover(dsn: str) -> float:
    """Seconds from a holding worker's SIGKILL to another store entering its session."""
    from trio_agents.session import PostgresStore

    async with _applied(PostgresStore(dsn)) as first:
        session = first.prepare("s")
        await first.enter(session)
        await first.detach(session)
    process = await trio.lowlevel.open_process(
        [
            sys.executable,
            str(ROOT / "tests" / "helpers" / "pg_worker.py"),
            dsn,
            "s",
            "hold",
            str(LEASE),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        buffer = bytearray()
        with trio.fail_after(60):
            assert await _line(process, buffer) == "ready"
            assert process.stdin is not None
            await process.stdin.send_all(b"go\n")
            assert await _line(process, buffer) == "entered"
            assert await _line(process, buffer) == "turn"
        async with _applied(PostgresStore(dsn)) as heir:
            process.send_signal(signal.SIGKILL)
            killed = time.perf_counter()
            with trio.fail_after(LEASE * 10):
                while True:
                    session = await heir.load("s")
                    try:
                        await heir.enter(session)
                    except SessionIdInUseError:
                        await heir.abandon(session)
                        await trio.sleep(0.01)  # another process's lease: no event to wait on
                        continue
                    taken = time.perf_counter()
                    await heir.detach(session)
                    return taken - killed
    finally:
        process.kill()
        await process.wait()


async def measure(dsn: str, fresh: Any) -> dict[str, float]:
    """Best-of-``ROUNDS`` flushed turns per second of both stores, and the slowest of
    ``ROUNDS`` handovers."""
    from trio_agents.session import PostgresStore

    total = AGENTS * TURNS
    best = {"JsonlStore": float("inf"), "PostgresStore": float("inf")}
    with tempfile.TemporaryDirectory(prefix="trio-agents-bench-") as tmp:
        for n in range(ROUNDS):
            jsonl = ta.JsonlStore(Path(tmp, f"sessions-{n}"))
            best["JsonlStore"] = min(best["JsonlStore"], await flushed_turns(jsonl, AGENTS, TURNS))
            postgres = PostgresStore(fresh(dsn))
            seconds = await flushed_turns(postgres, AGENTS, TURNS)
            best["PostgresStore"] = min(best["PostgresStore"], seconds)
    rates = {name: total / seconds for name, seconds in best.items()}
    # The worst round: the bound is a promise about every handover.
    rates["handover"] = max([await handover(fresh(dsn)) for _ in range(ROUNDS)])
    return rates


def main() -> None:
    """Start a throwaway server, measure, print."""
    pg_server = _pg_server()
    try:
        import psycopg  # noqa: F401 - only to say it is missing
    except ImportError:
        print("PostgresStore: skipped (psycopg is missing: pip install 'trio-agents[postgres]')")
        return
    if pg_server.find_bindir() is None:
        print(f"PostgresStore: skipped (no PostgreSQL server binaries: {pg_server.INSTALL_HINT})")
        return
    with pg_server.running_server(fsync=True) as server:
        rates = trio.run(measure, server.dsn, pg_server.fresh_schema_dsn)
    print(
        f"PostgresStore, {AGENTS} agents flushing after every turn, concurrently (best of "
        f"{ROUNDS} x {AGENTS * TURNS:,} turns; a local server, fsync on, loopback TCP"
        f"{described()}):"
    )
    print(line("JsonlStore (flushed turns):", rates["JsonlStore"]))
    print(line("PostgresStore (flushed turns):", rates["PostgresStore"]))
    print(f"  PostgresStore: {rates['PostgresStore'] / rates['JsonlStore']:.2f}x JsonlStore")
    bound = LEASE + LEASE / 5
    print(
        f"  lease handover after SIGKILL (lease {LEASE:g} s, renewed every {LEASE / 5:g} s): "
        f"{rates['handover']:.2f} s (the slowest of {ROUNDS}), {rates['handover'] / bound:.2f}x "
        f"the bound "
        f"(lease + one renewal interval, {bound:g} s)"
    )


if __name__ == "__main__":
    main()
