"""A job cannot defeat its owner (Linux, the per-job supervisor): a job that kills or stops
its supervisor still has every process ended by its owner, in process and through the real
``trio-agents`` command (closing the ACP input, one SIGTERM, the command's exit).

The job's processes write their pids to files; every wait is for such a file, a job's end or
a process's exit, with a deadline.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.command_support import Command, acp_prompt
from tests.helpers.supervision_support import (
    DEADLINE,
    KILL,
    NAMES,
    STOP,
    STOP_FOR_EVER,
    SUPERVISOR,
    fighting,
    job_pids,
    wait_until,
)
from tests.helpers.support import alive, shell_of
from trio_agents.kernel import open_root
from trio_agents.shell import JobDone, JobStatus, LocalShell, ShellExecRequest, tool_bash
from trio_agents.shell._child import supervisor_available

pytestmark = pytest.mark.skipif(not supervisor_available(), reason="the supervisor is Linux-only")


def stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (state T in /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.fixture
def job_dir(tmp_path: Path) -> Iterator[Path]:
    """Where the job writes its pids; whatever is still alive at the end is killed."""
    directory = tmp_path / "job"
    directory.mkdir()
    yield directory
    for name in (*NAMES, SUPERVISOR):
        path = directory / name
        if path.exists():
            for pid in alive([int(path.read_text())]):
                os.kill(pid, signal.SIGKILL)


# -- in process --------------------------------------------------------------------------------


async def test_a_job_that_kills_its_supervisor_leaves_nothing_once_it_is_done(
    job_dir: Path,
) -> None:
    """``kill -9 $PPID``: the job ends (killed) and its orphaned sleeps are gone by then."""
    async with open_root() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=0.5))
        shell = shell_of(root)
        done = trio.Event()
        heard: list[JobDone] = []

        def hear(event: JobDone) -> None:
            heard.append(event)
            done.set()

        shell.on_job_done(hear)
        request = ShellExecRequest(fighting(job_dir, KILL), background=True)
        job = await shell.start(shell.resolve(request))
        with trio.fail_after(DEADLINE):
            await done.wait()
        pids = await trio.to_thread.run_sync(job_pids, job_dir)
        assert heard == [JobDone(job_id=job.id, exit_code=-9, status=JobStatus.EXITED)]
        assert alive(pids) == []


@pytest.mark.parametrize("fight", [STOP, STOP_FOR_EVER], ids=["stop", "stop-for-ever"])
async def test_disposing_the_agent_of_a_job_that_stopped_its_supervisor_ends_it(
    job_dir: Path, fight: str
) -> None:
    """The agent's dispose returns within the grace periods and every process is gone."""
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=0.3))
        await root.plugin(tool_bash)
        handle = await root.agents.create()
        tools: ag.ToolRegistry = root.get("tools")
        arguments = {"command": fighting(job_dir, fight), "run_in_background": True}
        with trio.fail_after(DEADLINE):
            result = await tools.invoke("bash", arguments, handle.agent)
        assert not result.is_error, result.content
        pids = await trio.to_thread.run_sync(job_pids, job_dir)
        supervisor = parent_of(pids[0])
        await trio.to_thread.run_sync(wait_until, lambda: stopped(supervisor), "the stop")
        # Two grace periods and the force: well under the deadline.
        with trio.fail_after(5):
            await handle.dispose()
        assert alive([*pids, supervisor]) == []


# -- the real command --------------------------------------------------------------------------


def acp(tmp_path: Path, job_dir: Path, fight: str) -> Command:
    """``trio-agents acp`` running a fighting job as a bash call of a live turn."""
    command = Command(tmp_path, "acp", "--allow-bash", "--store", "memory")
    acp_prompt(command, f"!bash {fighting(job_dir, fight)}")
    return command


def test_closing_the_acp_input_ends_a_job_that_stopped_its_supervisor(
    tmp_path: Path, job_dir: Path
) -> None:
    """Closing stdin of ``acp`` while its job holds the supervisor stopped: the command exits
    0 within the grace periods and no process of the job is left, the supervisor neither."""
    command = acp(tmp_path, job_dir, STOP)
    try:
        pids = job_pids(job_dir)
        supervisor = parent_of(pids[0])
        wait_until(lambda: stopped(supervisor), "the stop")
        command.stdin.close()
        assert command.wait(timeout=15) == 0, command.stderr
    finally:
        command.close()
    assert alive([*pids, supervisor]) == []


@pytest.mark.parametrize("fight", [STOP, STOP_FOR_EVER], ids=["stop", "stop-for-ever"])
def test_one_sigterm_ends_acp_with_a_job_that_stopped_its_supervisor(
    tmp_path: Path, job_dir: Path, fight: str
) -> None:
    """The first SIGTERM is enough: exit 143, nothing of the job left."""
    command = acp(tmp_path, job_dir, fight)
    try:
        pids = job_pids(job_dir)
        supervisor = parent_of(pids[0])
        wait_until(lambda: stopped(supervisor), "the stop")
        command.process.send_signal(signal.SIGTERM)
        assert command.wait(timeout=15) == 128 + signal.SIGTERM, command.stderr
    finally:
        command.close()
    assert alive([*pids, supervisor]) == []
    assert "Traceback" not in command.stderr


@pytest.mark.parametrize("kind", ["run", "acp"])
def test_a_job_that_kills_its_supervisor_leaves_nothing_after_the_command(
    tmp_path: Path, job_dir: Path, kind: str
) -> None:
    """``kill -9 $PPID`` in a bash call of ``run`` (which then exits 0) or of ``acp`` (whose
    input is then closed): once the command has exited, no process of the job remains."""
    if kind == "run":
        prompt = f"!bash {fighting(job_dir, KILL)}"
        command = Command(tmp_path, "run", "--yes", "--store", "memory", prompt)
        command.stdin.close()
    else:
        command = acp(tmp_path, job_dir, KILL)
    try:
        pids = job_pids(job_dir)
        if kind == "acp":
            wait_until(lambda: alive(pids[:1]) == [], "the shell's death signal")
            command.stdin.close()
        assert command.wait() == 0, command.stderr
    finally:
        command.close()
    assert alive(pids) == []
