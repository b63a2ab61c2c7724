"""Flushed turns per second of each session backend, 32 agents at once, against an fsync floor.

``AGENTS`` agents on one runtime each take ``TURNS`` turns on the echo model, all
concurrently; every turn ends with a flush of the agent's session (its ``TurnEnded`` is
durable before the agent goes idle), so the figure is *flushed turns* per second. A store
that commits many sessions with one sync (group commit: SQLite's one write-ahead log) should
beat one that needs an fsync per session file (JSONL) by about the number of flushes that
meet in a batch.

The floor is one durable write per turn done by hand: ``os.write`` of a record line and
``os.fsync``, serially, in one worker thread, on a file in the same temporary directory (so
the same disk). A backend at 2x the floor commits more than one turn per sync. The ceiling is
the same agents on a ``MemoryStore`` (no durability at all): what the agents themselves cost,
which no backend can beat; a store that groups its commits well gets close to it.

Every side runs ``ROUNDS`` times, interleaved, and keeps its best round (see ``_common``).

Adding a backend: put an entry in :data:`STORES`, a name and an async context manager that
takes a fresh directory and yields an unapplied store (a PostgreSQL entry starts its server
there, for instance).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import trio

import trio_agents as ta
from trio_agents.session import SessionStore, SqliteStore, UserMessage, dump_record

from ._common import line
from ._fsync_delay import described

ROUNDS = 3
AGENTS = 32
TURNS = 15  # per agent

StoreFactory = Callable[[Path], AbstractAsyncContextManager[SessionStore]]


@asynccontextmanager
async def _memory(directory: Path) -> AsyncIterator[SessionStore]:
    yield ta.MemoryStore()


@asynccontextmanager
async def _jsonl(directory: Path) -> AsyncIterator[SessionStore]:
    yield ta.JsonlStore(directory / "sessions")


@asynccontextmanager
async def _sqlite(directory: Path) -> AsyncIterator[SessionStore]:
    yield SqliteStore(directory / "sessions.db")


#: The backends measured, in order: name -> factory (see the module docstring).
STORES: dict[str, StoreFactory] = {"JsonlStore": _jsonl, "SqliteStore": _sqlite}


def _serial_fsyncs(path: Path, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        data = (
            dump_record(UserMessage(message_id="m", content="a turn", turn_id="t")) + "\n"
        ).encode()
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, data)
            os.fsync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)


async def fsync_floor(directory: Path, count: int) -> float:
    """Seconds for ``count`` serial write + fsync pairs in one worker thread."""
    await trio.Path(directory).mkdir()
    seconds: float = await trio.to_thread.run_sync(_serial_fsyncs, directory / "floor", count)
    return seconds


async def _agent_turns(agent: ta.Agent, turns: int) -> None:
    for n in range(turns):
        agent.prompt(f"turn {n}")
        await agent.when_idle()


async def flushed_turns(factory: StoreFactory, directory: Path, agents: int, turns: int) -> float:
    """Seconds for ``agents`` agents to take ``turns`` turns each, concurrently (the agents'
    creation is not timed)."""
    await trio.Path(directory).mkdir()
    async with factory(directory) as store, ta.open_runtime(store=store) as root:
        live = [(await root.agents.create()).agent for _ in range(agents)]
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for agent in live:
                nursery.start_soon(_agent_turns, agent, turns)
        return time.perf_counter() - start


async def measure() -> dict[str, float]:
    """Best-of-``ROUNDS`` flushed turns per second of every backend and of the floor."""
    total = AGENTS * TURNS
    best = {name: float("inf") for name in ["floor", "ceiling", *STORES]}
    with tempfile.TemporaryDirectory(prefix="trio-agents-bench-") as tmp:
        for n in range(ROUNDS):
            best["floor"] = min(best["floor"], await fsync_floor(Path(tmp, f"floor-{n}"), total))
            ceiling = await flushed_turns(_memory, Path(tmp, f"memory-{n}"), AGENTS, TURNS)
            best["ceiling"] = min(best["ceiling"], ceiling)
            for name, factory in STORES.items():
                seconds = await flushed_turns(factory, Path(tmp, f"{name}-{n}"), AGENTS, TURNS)
                best[name] = min(best[name], seconds)
    return {name: total / seconds for name, seconds in best.items()}


def main() -> dict[str, float]:
    """Measure and print; the rates, for the summary of ``python -m benchmarks``."""
    rates = trio.run(measure)
    print(
        f"Session stores, {AGENTS} agents flushing after every turn, concurrently "
        f"(best of {ROUNDS} x {AGENTS * TURNS:,} turns, {tempfile.gettempdir()}{described()}):"
    )
    print(line("floor (serial os.write + os.fsync, one per turn):", rates["floor"]))
    print(line("ceiling (MemoryStore: the agents' own cost):", rates["ceiling"]))
    for name in STORES:
        print(line(f"{name} (flushed turns):", rates[name]))
    jsonl = rates["JsonlStore"]
    for name in STORES:
        if name != "JsonlStore":
            print(
                f"  {name}: {rates[name] / jsonl:.2f}x JsonlStore, "
                f"{rates[name] / rates['floor']:.2f}x the fsync floor, "
                f"{rates[name] / rates['ceiling']:.2f}x the ceiling"
            )
    return rates


if __name__ == "__main__":
    main()
