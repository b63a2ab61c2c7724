"""Chaos: worker processes killed (SIGKILL) or stopped past their lease (SIGSTOP, SIGCONT)
while client processes submit prompts to many sessions; from the durable records alone,
every prompt has exactly one completed turn or one recorded failure, no session has
overlapping turns, and each session's prompts ran in order.

The suite runs a short version (3 workers, 2 clients, 30 sessions, 90 prompts, one
SIGKILL). ``TRIO_AGENTS_CHAOS=long`` (``nox -s chaos``) runs 4 workers, 3 clients, 510
sessions, 5100 prompts, and a SIGKILL or a SIGSTOP every 1.5 s.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import attrs
import trio

from tests.helpers.paths import HELPERS
from tests.helpers.pg_workers import Worker, workers
from tests.helpers.workers_support import (
    check_exactly_once,
    prompt_rows,
    query,
    stored_records,
    until,
)

CLIENT = HELPERS / "workers_chaos_client.py"


@attrs.frozen
class Budget:
    workers: int
    clients: int
    sessions: int  # per client
    prompts: int  # per session
    every: float  # seconds between two faults
    faults: int  # at most
    stops: bool  # SIGSTOP/SIGCONT too, not only SIGKILL
    deadline: float


SHORT = Budget(
    workers=3, clients=2, sessions=15, prompts=3, every=1.0, faults=1, stops=False, deadline=120
)
LONG = Budget(
    workers=4,
    clients=3,
    sessions=170,
    prompts=10,
    every=1.5,
    faults=1000,
    stops=True,
    deadline=1800,
)


def budget() -> Budget:
    return LONG if os.environ.get("TRIO_AGENTS_CHAOS") == "long" else SHORT


#: Each started worker's id (as the queue names it), by process id.
NAMES: dict[int, str] = {}


async def start_worker(dsn: str, started: list[Worker]) -> Worker:
    worker = await Worker.command(dsn, "--lease", "1", "--model", "echo?delay=0.05")
    started.append(worker)
    line = await worker.line()
    assert line.endswith(" serving")
    NAMES[worker.process.pid] = line.split()[-2]  # "trio-agents: worker ID serving"
    return worker


def running(dsn: str) -> dict[str, int]:
    """How many prompts each worker is running now."""
    rows = query(
        dsn,
        "SELECT worker, count(*) FROM trio_agents_prompts WHERE state = 'running' GROUP BY worker",
    )
    return {worker: int(count) for worker, count in rows}


async def faults(dsn: str, started: list[Worker], plan: Budget, seed: int, done: list[str]) -> None:
    """Every ``plan.every`` seconds, SIGKILL a random worker running prompts (and start
    another), or SIGSTOP a random live one for twice its lease, then SIGCONT it."""
    rng = random.Random(seed)
    total = plan.clients * plan.sessions * plan.prompts
    # The first fault once a fifth of the prompts are answered: the workers are busy then.
    await until(lambda: finished(dsn) >= total // 5)
    for n in range(plan.faults):
        if n:
            await trio.sleep(plan.every)
        if plan.stops and rng.random() < 0.4:
            victim = rng.choice([w for w in started if w.process.returncode is None])
            victim.process.send_signal(signal.SIGSTOP)
            done.append("SIGSTOP")
            await trio.sleep(2.0)
            victim.process.send_signal(signal.SIGCONT)
        else:
            victim = await freeze_a_busy_worker(dsn, started, rng)
            victim.process.kill()
            done.append("SIGKILL")
            await victim.process.wait()
            await start_worker(dsn, started)


async def freeze_a_busy_worker(dsn: str, started: list[Worker], rng: random.Random) -> Worker:
    """A live worker, stopped (SIGSTOP) while it runs prompts, so that a kill hits work in
    flight: a submit wakes only its session's owner, so an idle worker is common, and one
    seen busy may finish before a kill lands unless it is stopped first. Whatever it sent
    before the stop has reached the database before its prompts are counted."""
    for _ in range(100):
        live = [w for w in started if w.process.returncode is None]
        busy = await trio.to_thread.run_sync(running, dsn)
        candidates = [w for w in live if busy.get(NAMES[w.process.pid])]
        if candidates:
            victim = rng.choice(candidates)
            victim.process.send_signal(signal.SIGSTOP)
            await trio.sleep(0.2)  # its statements in flight end: the count below is final
            now = await trio.to_thread.run_sync(running, dsn)
            if now.get(NAMES[victim.process.pid]):
                return victim
            victim.process.send_signal(signal.SIGCONT)
        await trio.sleep(0.05)
    raise AssertionError("no worker was running prompts in 100 looks")


def finished(dsn: str) -> int:
    [(count,)] = query(dsn, "SELECT count(*) FROM trio_agents_prompts WHERE state = 'completed'")
    return int(count)


async def drain_output(worker: Worker, errors: list[str]) -> None:
    """Keep reading a worker's output so that its pipe never fills; keep its error lines."""
    while True:
        try:
            line = await worker.line()
        except EOFError:
            return
        if "Error" in line or "error" in line:
            errors.append(line)


async def test_chaos_every_prompt_has_one_completed_turn_or_a_recorded_failure(
    pg_dsn: str,
) -> None:
    """Under SIGKILL (and, long, SIGSTOP) of random workers, every prompt of every client
    settles, exactly once, in order, as the durable records show."""
    plan = budget()
    seed = random.randrange(1 << 32)
    print(f"chaos seed {seed}: {plan}")
    done: list[str] = []
    errors: list[str] = []
    with trio.fail_after(plan.deadline):
        async with workers() as started:
            for _ in range(plan.workers):
                await start_worker(pg_dsn, started)
            async with trio.open_nursery() as nursery:
                clients = [
                    await trio.lowlevel.open_process(
                        [
                            sys.executable,
                            str(CLIENT),
                            pg_dsn,
                            str(c),
                            str(plan.sessions),
                            str(plan.prompts),
                        ],
                        stdout=subprocess.PIPE,
                    )
                    for c in range(plan.clients)
                ]
                chaos = trio.CancelScope()

                async def run_faults() -> None:
                    with chaos:
                        await faults(pg_dsn, started, plan, seed, done)

                nursery.start_soon(run_faults)
                for worker in started:
                    nursery.start_soon(drain_output, worker, errors)
                for client in clients:
                    assert await client.wait() == 0
                chaos.cancel()
                for worker in started:
                    if worker.process.returncode is None:
                        worker.process.send_signal(signal.SIGCONT)
                        worker.process.send_signal(signal.SIGTERM)
    rows = prompt_rows(pg_dsn)
    assert len(rows) == plan.clients * plan.sessions * plan.prompts
    records = await stored_records(pg_dsn, sorted({row["session_id"] for row in rows}))
    verdict = check_exactly_once(rows, records)
    print(
        f"chaos: {len(rows)} prompts in {len(records)} sessions; {done.count('SIGKILL')} "
        f"SIGKILL, {done.count('SIGSTOP')} SIGSTOP; {verdict.completed} completed, "
        f"{verdict.failed} failed (recorded); "
        f"{sum(row['claim'] > 1 for row in rows)} claimed again after a fault"
    )
    print("\n".join(errors[:20]))
    assert verdict.problems == []
    if not plan.stops:
        # A failover after a SIGKILL is the queue working as designed: no worker says
        # "error" for it. (A worker stopped past its lease may say what it lost on waking.)
        assert errors == []
    assert verdict.completed + verdict.failed == len(rows)
    assert verdict.completed > 0
    # The fault hit work in flight: some prompt was claimed again after its worker died.
    assert any(row["claim"] > 1 for row in rows)
