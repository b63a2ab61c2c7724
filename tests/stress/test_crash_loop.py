"""SIGKILL, again and again, of a process running many agents on a JSONL store.

Each round starts ``crash_worker.py`` on the same store (so every round after the first
resumes every session: the crash repair path), lets it run for a random time, and kills it
with SIGKILL. Then, in this process, every session is loaded and checked:

- ``seq`` is contiguous from 0, and the file parses (the torn tail, if any, was repaired);
- every turn the worker reported as ended is there, ended (flushed turns are never lost);
- every ``TurnStarted`` has exactly one ``TurnEnded`` (an interrupted turn is closed);
- no shell job of the killed process outlives it (its supervisor kills them).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import trio

import trio_agents.agent as ag
from tests.helpers import budget
from tests.helpers.paths import HELPERS
from tests.helpers.support import gone, marker, processes_with
from trio_agents.session import JsonlStore, Record, StopReason, TurnEnded, TurnStarted, UserMessage

WORKER = HELPERS / "crash_worker.py"
AGENTS = 8


async def _run_and_kill(directory: Path, mark: str, rng: random.Random) -> list[tuple[str, int]]:
    """One round: the turns the worker reported as ended before its SIGKILL."""
    reported: list[tuple[str, int]] = []
    process = await trio.lowlevel.open_process(
        [sys.executable, str(WORKER), str(directory), str(AGENTS), mark],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    pending = b""

    async def read() -> None:
        nonlocal pending
        assert process.stdout is not None
        while data := await process.stdout.receive_some(1 << 16):
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                agent_id, n = line.decode().split()
                reported.append((agent_id, int(n)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        with trio.fail_after(60):
            # Wait for the first reported turn, so every round does some work; then a random
            # time more, so kills land at every stage of a turn.
            while not reported:  # noqa: ASYNC110 - the reader appends; nothing to wait on
                await trio.sleep(0.01)
        await trio.sleep(rng.uniform(0, 0.5))
        process.send_signal(signal.SIGKILL)
        await process.wait()
    return reported


def _check(agent_id: str, records: tuple[Record, ...], durable: set[int]) -> int:
    assert [r.seq for r in records] == list(range(len(records))), agent_id
    started = Counter(r.turn_id for r in records if isinstance(r, TurnStarted))
    ended = Counter(r.turn_id for r in records if isinstance(r, TurnEnded))
    assert started == ended, (agent_id, started - ended, ended - started)
    assert set(ended.values()) <= {1}, agent_id
    turn_of = {r.content.split()[-1]: r.turn_id for r in records if isinstance(r, UserMessage)}
    stop_of = {r.turn_id: r.stop_reason for r in records if isinstance(r, TurnEnded)}
    for n in durable:
        turn_id = turn_of.get(str(n))
        assert turn_id is not None, f"{agent_id}: the flushed turn {n} is lost"
        assert stop_of[turn_id] is not StopReason.INTERRUPTED, (agent_id, n)
    return len(records)


async def test_sigkill_loses_no_flushed_turn_and_leaves_no_job(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    mark = marker()
    durable: dict[str, set[int]] = {f"a{i}": set() for i in range(AGENTS)}
    rounds = budget.count(3, 100)
    checked = 0
    for _ in range(rounds):
        for agent_id, n in await _run_and_kill(tmp_path, mark, rng):
            durable[agent_id].add(n)
        await gone(processes_with, mark)
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
            store: JsonlStore = root.get("sessions")
            for agent_id, turns in durable.items():
                if not await store.is_stored(agent_id):
                    assert not turns, agent_id
                    continue
                session = await store.load(agent_id)
                checked += _check(agent_id, session.records, turns)
                await store.abandon(session)
    flushed = sum(len(t) for t in durable.values())
    print(
        f"crash loop (seed {seed}): {rounds} SIGKILLs, {flushed} flushed turns, "
        f"{checked} records checked, 0 lost"
    )
    assert flushed > 0
