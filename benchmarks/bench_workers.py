"""The work queue: prompts per second with 1, 2 and 4 worker processes on an I/O-bound model,
end-to-end latency from submit to answer, against the same prompts run in one process on
``PostgresStore`` directly (the queue's own cost), and the time from a worker's SIGKILL to its
session served again.

Load: ``SESSIONS`` sessions, each taking ``PROMPTS`` prompts one after another (the next is
submitted when the previous answered), all sessions at once, on ``echo?delay=0.05`` (a model
call that waits 50 ms: an I/O-bound agent). Each worker runs at most ``PER_WORKER`` sessions at
once (``--max-sessions``), so the workers' number bounds the throughput as a real deployment's
capacity would. The direct side runs the same sessions in one runtime with ``agent.ask``.

Handover: a worker holds a session mid-turn (a model that never answers); it is SIGKILLed
while a second worker runs; the time from the kill to the prompt's answer by the second worker
(policy ``retry``) is the handover. The bound is the lease plus one renewal interval (the dead
worker's leases run out at most that long after its last renewal), plus one model call.

Needs the PostgreSQL server binaries and psycopg; without them it says so and measures
nothing. Run: ``python -m benchmarks.bench_workers``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import trio

import trio_agents as ta

SESSIONS = 64
PROMPTS = 5
PER_WORKER = 16
MODEL = "echo?delay=0.05"
LEASE = 1.0
WORKERS = (1, 2, 4)
ALONE = 21

ROOT = Path(__file__).resolve().parent.parent
COMMAND = Path(sys.executable).parent / "trio-agents"


def _pg_server() -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.helpers import pg_server

    return pg_server


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _start_worker(dsn: str, *options: str) -> trio.Process:
    process = await trio.lowlevel.open_process(
        [str(COMMAND), "worker", "--store", dsn, "--lease", str(LEASE), *options],
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    seen = b""
    while b"serving" not in seen:
        data = await process.stderr.receive_some(1024)
        if not data:
            raise RuntimeError("the worker exited before it served")
        seen += data
    return process


async def _stop(processes: list[trio.Process]) -> None:
    for process in processes:
        process.kill()
    for process in processes:
        await process.wait()


async def queued(dsn: str, workers: int) -> tuple[float, list[float]]:
    """Seconds for the load through ``workers`` worker processes, and every latency."""
    processes = [
        await _start_worker(dsn, "--model", MODEL, "--max-sessions", str(PER_WORKER))
        for _ in range(workers)
    ]
    latencies: list[float] = []
    try:
        async with ta.open_remote(dsn) as remote:

            async def session(n: int) -> None:
                for k in range(PROMPTS):
                    sent = time.perf_counter()
                    prompt = await remote.submit(
                        f"s{n}", f"{n}:{k}", agent=ta.workers.AgentTemplate()
                    )
                    await prompt.answer()
                    latencies.append(time.perf_counter() - sent)

            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for n in range(SESSIONS):
                    nursery.start_soon(session, n)
            return time.perf_counter() - start, latencies
    finally:
        await _stop(processes)


async def direct(dsn: str) -> tuple[float, list[float]]:
    """Seconds for the load in one runtime on ``PostgresStore``, and every latency."""
    from trio_agents.session import PostgresStore

    latencies: list[float] = []
    async with ta.open_runtime(store=PostgresStore(dsn), model=MODEL) as root:
        agents = [(await root.agents.create(session_id=f"s{n}")).agent for n in range(SESSIONS)]

        async def session(agent: ta.Agent, n: int) -> None:
            for k in range(PROMPTS):
                sent = time.perf_counter()
                await agent.ask(f"{n}:{k}")
                latencies.append(time.perf_counter() - sent)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n, agent in enumerate(agents):
                nursery.start_soon(session, agent, n)
        return time.perf_counter() - start, latencies


async def direct_bounded(dsn: str) -> tuple[float, list[float]]:
    """:func:`direct` with at most ``PER_WORKER`` sessions at work at once, as one worker."""
    from trio_agents.session import PostgresStore

    latencies: list[float] = []
    limit = trio.CapacityLimiter(PER_WORKER)
    async with ta.open_runtime(store=PostgresStore(dsn), model=MODEL) as root:
        agents = [(await root.agents.create(session_id=f"s{n}")).agent for n in range(SESSIONS)]

        async def session(agent: ta.Agent, n: int) -> None:
            for k in range(PROMPTS):
                sent = time.perf_counter()
                async with limit:
                    await agent.ask(f"{n}:{k}")
                latencies.append(time.perf_counter() - sent)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n, agent in enumerate(agents):
                nursery.start_soon(session, agent, n)
        return time.perf_counter() - start, latencies


async def alone(dsn: str) -> list[float]:
    """Latencies of ``ALONE`` prompts in turn to one session on one idle worker: the queue's
    own cost per prompt, with nothing else running."""
    processes = [await _start_worker(dsn, "--model", MODEL)]
    latencies: list[float] = []
    try:
        async with ta.open_remote(dsn) as remote:
            for k in range(ALONE):
                sent = time.perf_counter()
                prompt = await remote.submit("a", f"{k}", agent=ta.workers.AgentTemplate())
                await prompt.answer()
                latencies.append(time.perf_counter() - sent)
        return latencies[1:]  # the first one creates the session
    finally:
        await _stop(processes)


async def handover(dsn: str) -> float:
    """Seconds from a running worker's SIGKILL to its prompt answered by another."""
    slow = await _start_worker(dsn, "--model", "echo?delay=3600")
    processes = [slow]
    try:
        async with ta.open_remote(dsn) as remote:
            prompt = await remote.submit("h", "handed over", agent=ta.workers.AgentTemplate())
            async with aclosing(prompt.records()) as records:
                async for record in records:
                    if isinstance(record, ta.session.TurnStarted):
                        break
            processes.append(await _start_worker(dsn, "--model", MODEL))
            slow.kill()
            killed = time.perf_counter()
            await prompt.answer()
            return time.perf_counter() - killed
    finally:
        await _stop(processes)


async def measure(dsn: str, fresh: Any) -> dict[str, Any]:
    results: dict[str, Any] = {
        "direct": await direct(fresh(dsn)),
        "direct, bounded": await direct_bounded(fresh(dsn)),
    }
    for n in WORKERS:
        results[f"{n} workers"] = await queued(fresh(dsn), n)
    results["alone"] = await alone(fresh(dsn))
    results["handover"] = await handover(fresh(dsn))
    return results


def main() -> None:
    """Start a throwaway server, measure, print."""
    pg_server = _pg_server()
    try:
        import psycopg  # noqa: F401 - only to say it is missing
    except ImportError:
        print("workers: skipped (psycopg is missing: pip install 'trio-agents[postgres]')")
        return
    if pg_server.find_bindir() is None:
        print(f"workers: skipped (no PostgreSQL server binaries: {pg_server.INSTALL_HINT})")
        return
    with pg_server.running_server(fsync=True) as server:
        results = trio.run(measure, server.dsn, pg_server.fresh_schema_dsn)
    total = SESSIONS * PROMPTS
    print(
        f"work queue: {SESSIONS} sessions x {PROMPTS} prompts in turn on {MODEL}, at most "
        f"{PER_WORKER} sessions per worker (a local server, fsync on, loopback TCP):"
    )
    base = total / results["direct, bounded"][0]
    labels = {
        "direct": "one process, PostgresStore directly",
        "direct, bounded": f"the same, {PER_WORKER} sessions at once",
    }
    for name in ("direct", "direct, bounded", *(f"{n} workers" for n in WORKERS)):
        seconds, latencies = results[name]
        label = labels.get(name, name)
        rate = total / seconds
        print(
            f"  {label:<40}{rate:>8,.0f} prompts/s ({rate / base:.2f}x bounded)   latency "
            f"p50 {statistics.median(latencies) * 1000:,.0f} ms, "
            f"p99 {_percentile(latencies, 0.99) * 1000:,.0f} ms"
        )
    print(
        f"  one session alone, prompts in turn: p50 "
        f"{statistics.median(results['alone']) * 1000:,.0f} ms from submit to answer (the "
        f"model takes 50 ms)"
    )
    bound = LEASE + LEASE / 3
    print(
        f"  SIGKILL of a running worker to its prompt answered elsewhere (lease {LEASE:g} s, "
        f"heartbeat every {LEASE / 3:.2g} s): {results['handover']:.2f} s; the bound is "
        f"{bound:.2g} s + one model call"
    )


if __name__ == "__main__":
    main()
