"""Supervision under pressure (Linux): MCP servers with children under SIGKILL of the real
command, and many jobs that fight their supervisor.

- Round after round, ``trio-agents run`` with several stdio MCP servers in its config file
  (each starts a daemon child; half ignore end of file and SIGTERM) is killed with SIGKILL at
  a random moment after they started; every server and every child must be gone within the
  deadline.
- Many background jobs at once, each killing its supervisor, stopping it once, stopping it
  again and again while ignoring SIGTERM, or not fighting at all, some killed one by one and
  the rest by the executor's teardown; every process of every job must be gone, and the
  teardown must end within a bound that does not grow with the number of jobs.

Figures are printed (``nox -s stress`` runs these with ``-s``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from tests.helpers import budget, paths
from tests.helpers.supervision_support import (
    DEADLINE,
    KILL,
    NAMES,
    STOP,
    STOP_FOR_EVER,
    SUPERVISOR,
    fighting,
    job_pids,
)
from tests.helpers.support import TRIO_AGENTS, alive, marker, processes_with, shell_of
from trio_agents.kernel import open_root
from trio_agents.shell import LocalShell, ShellExecRequest
from trio_agents.shell._child import supervisor_available

pytestmark = pytest.mark.skipif(not supervisor_available(), reason="the supervisor is Linux-only")

SERVER = str(paths.SERVERS / "forking_server.py")
SERVERS = 3


def _config(tmp_path: Path, word: str) -> Path:
    config = tmp_path / "trio-agents.toml"
    tables = []
    for i in range(SERVERS):
        args = [SERVER, word, *(["stubborn"] if i % 2 else [])]
        tables.append(
            f"[[mcp_servers]]\nname = 's{i}'\ncommand = {sys.executable!r}\nargs = {args!r}\n"
        )
    config.write_text("\n".join(tables))
    return config


def _until(condition: object, what: str) -> float:
    """Seconds until ``condition()`` holds (real processes: nothing announces it)."""
    assert callable(condition)
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < DEADLINE, f"timed out waiting for {what}"
        time.sleep(0.02)
    return time.monotonic() - start


def test_sigkill_loop_of_run_with_forking_mcp_servers(tmp_path: Path) -> None:
    """Every round: SIGKILL of ``run`` after its servers started; no server nor child left."""
    rng = random.Random(36)
    rounds = budget.count(2, 20)
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    ended = 0
    slowest = 0.0
    for _ in range(rounds):
        word = marker()
        config = _config(tmp_path, word)
        command = [str(TRIO_AGENTS), "run", "--config", str(config), "--store", "memory"]
        process = subprocess.Popen(
            [*command, "--model", "echo?delay=30", "hello"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        try:
            # Each server: its supervisor, itself and its child (the marker is on all three).
            _until(lambda w=word: len(processes_with(w)) >= 3 * SERVERS, "the servers")
            time.sleep(rng.uniform(0, 0.5))  # a random moment of the run, not a wait
            found = len(processes_with(word))
        finally:
            process.kill()
            process.wait()
        try:
            slowest = max(slowest, _until(lambda w=word: not processes_with(w), "the orphans"))
        finally:
            for pid in processes_with(word):
                os.kill(pid, signal.SIGKILL)
        ended += found
    print(
        f"\nMCP servers under SIGKILL: {rounds} rounds, {ended} processes (supervisors, "
        f"servers, their children) ended, none left; slowest cleanup {slowest:.2f} s"
    )


async def test_many_jobs_that_fight_their_supervisors(tmp_path: Path) -> None:
    """Kill, stop, stop for ever, or none: every process of every job gone, teardown bounded."""
    rng = random.Random(34)
    jobs = budget.count(8, 48)
    grace = 1.0
    fights = [KILL, STOP, STOP_FOR_EVER, "true"]
    directories = []
    for i in range(jobs):
        directory = tmp_path / f"job{i}"
        directory.mkdir()
        directories.append(directory)
    pids: list[int] = []
    try:
        async with open_root() as root:
            await root.plugin(LocalShell(), LocalShell.Config(kill_grace=grace))
            shell = shell_of(root)
            spawning = trio.current_time()
            started = []
            for i, directory in enumerate(directories):
                command = fighting(directory, fights[i % len(fights)])
                request = ShellExecRequest(command, background=True)
                started.append(await shell.start(shell.resolve(request)))
            for directory in directories:
                pids += await trio.to_thread.run_sync(job_pids, directory)
            spawned = trio.current_time() - spawning
            for job in rng.sample(started, len(started) // 3):
                with trio.fail_after(DEADLINE):
                    await shell.kill(job.id)
            closing = trio.current_time()
        teardown = trio.current_time() - closing
    finally:
        for directory in directories:
            for name in (*NAMES, SUPERVISOR):
                path = directory / name
                if path.exists():
                    pids.append(int(path.read_text()))
        left = alive(pids)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert left == []
    # Every job's grace runs at once: at most four grace periods (SIGTERM, SIGKILL, the
    # sweep's two), whatever the count, plus the work of ending the processes. That work
    # grows with the machine's load, so it is bounded by a figure of the same run: starting
    # the same jobs one after another (serial graces would add two per job ignoring SIGTERM,
    # 2 x 8 x grace at the stress budget, well above this bound).
    bound = 4 * grace + spawned + 1
    assert teardown < bound, f"teardown {teardown:.2f} s, bound {bound:.2f} s"
    print(
        f"\njobs fighting their supervisor: {jobs} jobs, {len(pids)} processes ended, "
        f"teardown {teardown:.2f} s, start {spawned:.2f} s"
    )
