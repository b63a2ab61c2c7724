"""The work queue: prompts per second with 1, 2 and 4 worker processes on an I/O-bound model,
end-to-end latency from submit to answer, against the same prompts run in one process on
``PostgresStore`` directly (the queue's own cost), and the time from a worker's SIGKILL to its
session served again.

Load: ``SESSIONS`` sessions, each taking ``PROMPTS`` prompts one after another (the next is
submitted when the previous answered), all sessions at once, on ``echo?delay=0.05`` (a model
call that waits 50 ms: an I/O-bound agent). Each worker runs at most ``PER_WORKER`` sessions at
once (``--max-sessions``), so the workers' number bounds the throughput as a real deployment's
capacity would. The direct side runs the same sessions in one runtime with ``agent.ask``.
The load is a closed loop, so its start decides how the prompts group (see
``_prompt_sessions``): the window's first prompts are queued while the workers are stopped.
The direct side (16 at once) and one worker alternate ``ROUNDS`` times; their figures are the
rounds' mean, and each round's CPU ratio is printed (the spread within one run).

Handover: a worker holds a session mid-turn (a model that never answers); it is SIGKILLed
while a second worker runs; the time from the kill to the prompt's answer by the second worker
(policy ``retry``) is the handover. The bound is the lease plus one renewal interval (the dead
worker's leases run out at most that long after its last renewal), plus one model call.

Round trips: one worker process and this process (the client, then the direct side) trace
every PostgreSQL connection with libpq's own protocol trace (``tests/helpers/pg_trace.py``) while
``PROFILED`` prompts run in turn on one session; every round trip (a ``Sync`` or a simple
``Query`` the client then waits on) is counted by what it does, per prompt. The counts are
exact and do not move with the machine's load.

CPU per prompt: the CPU seconds (user + system, ``/proc/PID/stat``) the worker processes, this
process (the client) and the PostgreSQL server's processes spent while the load ran, per
prompt, against this process's on the direct side: load-independent where wall-clock rates
are not (a loaded machine slows every side, it does not make one spend more CPU). Both sides
measure live sessions: the direct side creates its agents before its window, the queued side
runs each session's first prompt (which creates it) before its own.

Profile: ``--profile`` runs the same load through one worker process with its trio thread
under ``cProfile`` on a CPU clock (``time.thread_time``, from after each session's first
prompt), then on the direct path, and prints the top entries of each by own time.

Needs the PostgreSQL server binaries and psycopg; without them it says so and measures
nothing. Run: ``python -m benchmarks.bench_workers`` (or ``... --profile``; ``--prompts N``
first for a longer window, N prompts a session).
"""

from __future__ import annotations

import collections
import cProfile
import os
import signal
import statistics
import subprocess
import sys
import tempfile
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
ROUNDS = 3
ALONE = 21
PROFILED = 20

ROOT = Path(__file__).resolve().parent.parent
COMMAND = Path(sys.executable).parent / "trio-agents"


def _pg_server() -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.helpers import pg_server

    return pg_server


def _pg_trace() -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.helpers import pg_trace

    return pg_trace


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` spent so far, or 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _server_cpus() -> dict[int, float]:
    """CPU seconds of every PostgreSQL server process alive now (a backend per connection)."""
    found: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                name = Path(f"/proc/{entry}/comm").read_text().strip()
            except OSError:
                continue
            if name == "postgres":
                found[int(entry)] = _cpu(int(entry))
    return found


class _ServerCpu:
    """The server's CPU seconds since it was made: of every process alive at the end, what
    it spent since the start (all of it for a process started since). A backend that ends
    in between takes its seconds with it: a floor, never a negative figure."""

    def __init__(self) -> None:
        self._start = _server_cpus()

    def spent(self) -> float:
        return sum(cpu - self._start.get(pid, 0.0) for pid, cpu in _server_cpus().items())


def _threads(pid: int) -> dict[str, float]:
    """CPU seconds of process ``pid`` by kind of thread: ``trio`` (the main thread), ``LISTEN``
    (the queue's listener), ``database`` (the threads the pools' calls run in). A thread that
    ended took its seconds with it."""
    found = dict.fromkeys(("trio", "LISTEN", "database"), 0.0)
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:
            continue
        name = stat.split("(", 1)[1].rsplit(")", 1)[0]
        fields = stat.rsplit(")", 1)[1].split()
        kind = "trio" if int(task) == pid else "LISTEN" if "_loop" in name else "database"
        found[kind] += (int(fields[11]) + int(fields[12])) / _TICK
    return found


def _self_cpu() -> float:
    times = os.times()
    return times.user + times.system


#: What each round trip does, by a piece of its SQL (the first that matches names it).
_STEPS = (
    ("WITH added AS", "submit"),
    ("WITH live AS", "claim"),
    ("INSERT INTO trio_agents_records", "write batch (records)"),
    ("WITH p AS", "settle"),
    ("WITH back AS", "hand back"),
    ("SELECT id, seq, session_id, content", "read the prompt"),
    ("INSERT INTO trio_agents_workers", "heartbeat"),
    ("SET expires", "lease renewal"),
    ("FROM trio_agents_records", "read the session"),
)


def _step(statement: str) -> str:
    for piece, name in _STEPS:
        if piece in statement:
            return name
    return " ".join(statement.split())[:40]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _start_worker(dsn: str, *options: str, trace: Path | None = None) -> trio.Process:
    command = [str(COMMAND)]
    if trace is not None:
        command = [sys.executable, "-m", "benchmarks.bench_workers", "--traced", str(trace)]
    process = await trio.lowlevel.open_process(
        [*command, "worker", "--store", dsn, "--lease", str(LEASE), *options],
        stderr=subprocess.PIPE,
        cwd=ROOT,
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


async def queued(dsn: str, workers: int) -> tuple[float, list[float], dict[str, float]]:
    """Seconds for the load through ``workers`` worker processes, every latency, and the CPU
    seconds per prompt of the workers, the client and the server."""
    processes = [
        await _start_worker(dsn, "--model", MODEL, "--max-sessions", str(PER_WORKER))
        for _ in range(workers)
    ]
    latencies: list[float] = []
    try:
        async with ta.open_remote(dsn) as remote:
            await _create_sessions(remote)
            server = _ServerCpu()
            before = _cpus(processes, server)
            start = time.perf_counter()
            await _prompt_sessions(remote, processes, latencies)
            elapsed = time.perf_counter() - start
            return elapsed, latencies, _per_prompt(before, _cpus(processes, server))
    finally:
        await _stop(processes)


async def _create_sessions(remote: Any) -> None:
    """Each session's first prompt creates it, before the window: the direct side creates
    its agents before its window too, so both measure live sessions."""

    async def create(n: int) -> None:
        await remote.ask(f"s{n}", "created", agent=ta.workers.AgentTemplate())

    async with trio.open_nursery() as nursery:
        for n in range(SESSIONS):
            nursery.start_soon(create, n)


async def _prompt_sessions(
    remote: Any, processes: list[trio.Process], latencies: list[float] | None = None
) -> None:
    """``PROMPTS`` prompts in turn to each session, all sessions at once. The first prompts
    are queued while the workers are stopped (SIGSTOP), so the workers find them all at once,
    as the direct side's sessions all ask at once: the load is a closed loop, and a worker
    keeps running together the prompts it claimed together (each group's turns end together,
    free their slots together and are replaced by one claim), so prompts that trickled in
    one claim at a time would make groups whose number, random, set the round trips and
    the CPU per prompt for the whole window (docs/benchmarks.rst)."""
    for process in processes:
        process.send_signal(signal.SIGSTOP)
    try:
        sent = time.perf_counter()
        firsts = [
            await remote.submit(f"s{n}", f"{n}:0", agent=ta.workers.AgentTemplate())
            for n in range(SESSIONS)
        ]
    finally:
        for process in processes:
            process.send_signal(signal.SIGCONT)

    async def session(n: int) -> None:
        await firsts[n].answer()
        if latencies is not None:
            latencies.append(time.perf_counter() - sent)
        for k in range(1, PROMPTS):
            began = time.perf_counter()
            prompt = await remote.submit(f"s{n}", f"{n}:{k}", agent=ta.workers.AgentTemplate())
            await prompt.answer()
            if latencies is not None:
                latencies.append(time.perf_counter() - began)

    async with trio.open_nursery() as nursery:
        for n in range(SESSIONS):
            nursery.start_soon(session, n)


def _cpus(processes: list[trio.Process], server: _ServerCpu) -> dict[str, float]:
    found = {
        "worker": sum(_cpu(process.pid) for process in processes),
        "client": _self_cpu(),
        "server": server.spent(),
    }
    for process in processes:
        for kind, seconds in _threads(process.pid).items():
            found[f"worker {kind}"] = found.get(f"worker {kind}", 0.0) + seconds
    return found


def _direct_cpus(server: _ServerCpu) -> dict[str, float]:
    found = {"direct": _self_cpu(), "server": server.spent()}
    for kind, seconds in _threads(os.getpid()).items():
        found[f"direct {kind}"] = seconds
    return found


def _per_prompt(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: (after[name] - before[name]) / (SESSIONS * PROMPTS) for name in before}


async def direct(dsn: str) -> tuple[float, list[float], dict[str, float]]:
    """Seconds for the load in one runtime on ``PostgresStore``, every latency, and the CPU
    seconds per prompt of this process and of the server."""
    from trio_agents.session import PostgresStore

    latencies: list[float] = []
    async with ta.open_runtime(store=PostgresStore(dsn), model=MODEL) as root:
        agents = [(await root.agents.create(session_id=f"s{n}")).agent for n in range(SESSIONS)]

        async def session(agent: ta.Agent, n: int) -> None:
            for k in range(PROMPTS):
                sent = time.perf_counter()
                await agent.ask(f"{n}:{k}")
                latencies.append(time.perf_counter() - sent)

        server = _ServerCpu()
        before = _direct_cpus(server)
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n, agent in enumerate(agents):
                nursery.start_soon(session, agent, n)
        elapsed = time.perf_counter() - start
        after = _direct_cpus(server)
        return elapsed, latencies, _per_prompt(before, after)


async def direct_bounded(dsn: str) -> tuple[float, list[float], dict[str, float]]:
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

        server = _ServerCpu()
        before = _direct_cpus(server)
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for n, agent in enumerate(agents):
                nursery.start_soon(session, agent, n)
        elapsed = time.perf_counter() - start
        after = _direct_cpus(server)
        return elapsed, latencies, _per_prompt(before, after)


async def round_trips(dsn: str, directory: Path) -> dict[str, collections.Counter[str]]:
    """Every round trip (and notification received) per prompt, by side and by what it does:
    ``PROFILED`` prompts in turn on one session, after one that creates it, through one traced
    worker process (its client traced here), then on the direct side (traced here)."""
    pg_trace = _pg_trace()
    # A lease of 10 s: its heartbeat and renewals (not per prompt) stay out of the window.
    worker = await _start_worker(dsn, "--model", MODEL, "--lease", "10", trace=directory / "worker")
    windows: dict[str, tuple[float, float]] = {}
    pg_trace.trace_connections(directory / "client")
    try:
        async with ta.open_remote(dsn) as remote:
            await remote.ask("r", "first", agent=ta.workers.AgentTemplate())
            start = time.time()
            for k in range(PROFILED):
                await remote.ask("r", f"{k}")
            windows["worker"] = windows["client"] = (start, time.time())
    finally:
        pg_trace.trace_connections(None)
        worker.send_signal(signal.SIGTERM)  # drained, it exits: its traces are complete
        await worker.wait()
    from trio_agents.session import PostgresStore

    pg_trace.trace_connections(directory / "direct")
    try:
        async with ta.open_runtime(store=PostgresStore(dsn), model=MODEL) as root:
            agent = (await root.agents.create(session_id="d")).agent
            await agent.ask("first")
            start = time.time()
            for k in range(PROFILED):
                await agent.ask(f"{k}")
            windows["direct"] = (start, time.time())
    finally:
        pg_trace.trace_connections(None)
    counts: dict[str, collections.Counter[str]] = {}
    for side, (start, end) in windows.items():
        trips = pg_trace.read_traces(directory / side)
        counts[side] = collections.Counter(
            f"notified: {trip.statement}" if trip.notification else _step(trip.statement)
            for trip in trips
            if start <= trip.at <= end
        )
    return counts


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


Run = tuple[float, list[float], dict[str, float]]


def _merged(runs: list[Run]) -> Run:
    """Rounds of one measure as one: their seconds averaged, every latency, their CPU per
    prompt averaged."""
    cpu = {name: statistics.fmean(run[2][name] for run in runs) for name in runs[0][2]}
    latencies = [latency for run in runs for latency in run[1]]
    return statistics.fmean(run[0] for run in runs), latencies, cpu


async def measure(dsn: str, fresh: Any) -> dict[str, Any]:
    results: dict[str, Any] = {"direct": await direct(fresh(dsn))}
    # The floor and one worker alternate, ROUNDS times: the machine's load drifts between
    # two measures taken a minute apart, and each round's groups of prompts are its own (see
    # _prompt_sessions); the figure is the rounds' mean, and each round's ratio is printed.
    floors: list[Run] = []
    ones: list[Run] = []
    for _ in range(ROUNDS):
        floors.append(await direct_bounded(fresh(dsn)))
        ones.append(await queued(fresh(dsn), WORKERS[0]))
    results["direct, bounded"] = _merged(floors)
    results[f"{WORKERS[0]} workers"] = _merged(ones)
    results["rounds"] = [
        one[2]["worker"] / floor[2]["direct"] for floor, one in zip(floors, ones, strict=True)
    ]
    for n in WORKERS[1:]:
        results[f"{n} workers"] = await queued(fresh(dsn), n)
    results["alone"] = await alone(fresh(dsn))
    results["handover"] = await handover(fresh(dsn))
    with tempfile.TemporaryDirectory(prefix="trio-agents-trace-") as directory:
        results["round trips"] = await round_trips(fresh(dsn), Path(directory))
    return results


def _print_round_trips(counts: dict[str, collections.Counter[str]]) -> dict[str, float]:
    """Print the round trips per prompt of each side, and each step's; return the totals."""
    totals = {
        side: sum(n for step, n in steps.items() if not step.startswith("notified")) / PROFILED
        for side, steps in counts.items()
    }
    print(
        f"  round trips per prompt: worker {totals['worker']:.2g}, client "
        f"{totals['client']:.2g}, direct path {totals['direct']:.2g} ({PROFILED} prompts in "
        f"turn on one session, libpq's trace; exact, whatever the load)"
    )
    for side, steps in counts.items():
        each = ", ".join(f"{step} {n / PROFILED:.2g}" for step, n in sorted(steps.items()))
        print(f"    {side}: {each}")
    return totals


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
        seconds, latencies, _ = results[name]
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
    direct_cpu = results["direct, bounded"][2]
    floor = direct_cpu["direct"]
    print(
        f"  CPU per prompt (user + system, /proc; the direct path, {PER_WORKER} sessions at "
        f"once: {floor * 1000:.2f} ms in its process, {direct_cpu['server'] * 1000:.2f} ms "
        f"in the server):"
    )
    for n in WORKERS:
        cpu = results[f"{n} workers"][2]
        print(
            f"    {n} workers: {cpu['worker'] * 1000:.2f} ms in the workers "
            f"({cpu['worker'] / floor:.2f}x the direct path's process), "
            f"{cpu['client'] * 1000:.2f} ms in the client, "
            f"{cpu['server'] * 1000:.2f} ms in the server"
        )
    print(
        f"    {WORKERS[0]} worker over the direct path, each of {ROUNDS} alternating rounds "
        f"(the figures above are their mean): "
        + ", ".join(f"{ratio:.2f}x" for ratio in results["rounds"])
    )
    one = results[f"{WORKERS[0]} workers"][2]
    print(
        "    by thread, ms per prompt: "
        + ", ".join(
            f"{kind} {one[f'worker {kind}'] * 1000:.2f}" for kind in ("trio", "database", "LISTEN")
        )
        + f" in {WORKERS[0]} worker; trio {direct_cpu['direct trio'] * 1000:.2f}, database "
        f"{direct_cpu['direct database'] * 1000:.2f} on the direct path"
    )
    _print_round_trips(results["round trips"])
    bound = LEASE + LEASE / 3
    print(
        f"  SIGKILL of a running worker to its prompt answered elsewhere (lease {LEASE:g} s, "
        f"heartbeat every {LEASE / 3:.2g} s): {results['handover']:.2f} s; the bound is "
        f"{bound:.2g} s + one model call"
    )


async def _profile_worker(dsn: str, stats: Path) -> None:
    """The load through one worker process whose trio thread is profiled (CPU clock) from
    after each session's first prompt until it drains; its stats go to ``stats``."""
    command = [sys.executable, "-m", "benchmarks.bench_workers", "--profiled", str(stats)]
    process = await trio.lowlevel.open_process(
        [*command, "worker", "--store", dsn, "--model", MODEL, "--max-sessions", str(PER_WORKER)],
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stderr is not None
    seen = b""
    while b"serving" not in seen:
        seen += await process.stderr.receive_some(1024)
    async with ta.open_remote(dsn) as remote:
        await _create_sessions(remote)
        process.send_signal(signal.SIGUSR2)  # the sessions exist: profile from here
        await _prompt_sessions(remote, [process])
    process.send_signal(signal.SIGUSR2)  # to here: the drain is not a prompt's cost
    process.send_signal(signal.SIGTERM)
    async with process.stderr:
        async for _ in process.stderr:
            pass
    await process.wait()


async def _profile_direct(dsn: str) -> cProfile.Profile:
    """The same load on the direct path in this process, its trio thread profiled."""
    from trio_agents.session import PostgresStore

    limit = trio.CapacityLimiter(PER_WORKER)
    profile = cProfile.Profile(time.thread_time)
    async with ta.open_runtime(store=PostgresStore(dsn), model=MODEL) as root:
        agents = [(await root.agents.create(session_id=f"s{n}")).agent for n in range(SESSIONS)]

        async def session(agent: ta.Agent, n: int) -> None:
            for k in range(PROMPTS):
                async with limit:
                    await agent.ask(f"{n}:{k}")

        profile.enable()
        async with trio.open_nursery() as nursery:
            for n, agent in enumerate(agents):
                nursery.start_soon(session, agent, n)
        profile.disable()
    return profile


def profile_main() -> None:
    """``--profile``: the CPU profile (``time.thread_time``) of one worker's trio thread and of
    the direct path's, the same load on each; the top entries of each by own time."""
    import pstats

    pg_server = _pg_server()
    with (
        pg_server.running_server(fsync=True) as server,
        tempfile.TemporaryDirectory(prefix="trio-agents-profile-") as directory,
    ):
        stats = Path(directory) / "worker.pstats"
        trio.run(_profile_worker, pg_server.fresh_schema_dsn(server.dsn), stats)
        direct = trio.run(_profile_direct, pg_server.fresh_schema_dsn(server.dsn))
        for name, found in (
            ("one worker", pstats.Stats(str(stats))),
            ("direct", pstats.Stats(direct)),
        ):
            print(f"{name}: {SESSIONS} sessions x {PROMPTS} prompts, its trio thread's CPU")
            found.sort_stats("tottime").print_stats(25)


def profiled(stats: str, argv: list[str]) -> int:
    """Run ``trio-agents ARGV``; from a SIGUSR2 to the next, profile its trio thread's CPU,
    and write the profile to ``stats`` at the end (the profiled worker process)."""
    profile = cProfile.Profile(time.thread_time)
    profiling = [False]

    def toggle(signum: int, frame: object) -> None:
        if profiling[0]:
            profile.disable()
        else:
            profile.enable()
        profiling[0] = not profiling[0]

    signal.signal(signal.SIGUSR2, toggle)
    from trio_agents.cli import main as command

    try:
        return command(argv)
    finally:
        profile.disable()
        profile.dump_stats(stats)


def traced(directory: str, argv: list[str]) -> int:
    """Run ``trio-agents ARGV`` with every PostgreSQL connection traced into ``directory``
    (the profiled worker process)."""
    _pg_trace().trace_connections(Path(directory))
    from trio_agents.cli import main as command

    return command(argv)


def _window(argv: list[str]) -> list[str]:
    """``--prompts N``: each session's prompts in the window (``PROMPTS`` by default); a
    longer window spends more CPU seconds a round, so a round's ratio swings less with the
    machine (docs/benchmarks.rst). The other arguments are returned."""
    global PROMPTS
    if argv[:1] == ["--prompts"]:
        PROMPTS = int(argv[1])
        if PROMPTS < 2:
            raise SystemExit("--prompts: at least 2 (the first prompt opens the window)")
        return argv[2:]
    return argv


if __name__ == "__main__":
    if sys.argv[1:2] == ["--traced"]:
        sys.exit(traced(sys.argv[2], sys.argv[3:]))
    if sys.argv[1:2] == ["--profiled"]:
        sys.exit(profiled(sys.argv[2], sys.argv[3:]))
    if _window(sys.argv[1:])[:1] == ["--profile"]:
        profile_main()
    else:
        main()
