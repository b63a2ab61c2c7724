"""The per-job supervisor (Linux): no process of a job outlives it, ``setsid`` or not, even
when its owner dies; without the supervisor a job is its process group (the fallback)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

import trio_agents.agent as ag
import trio_agents.shell._child as child_module
from tests.helpers.paths import ROOT
from tests.helpers.support import alive, family, gone, shell_of
from trio_agents.kernel import Context, open_root
from trio_agents.shell import JobDone, JobStatus, LocalShell, ShellExecRequest, tool_bash
from trio_agents.shell._child import supervisor_available
from trio_agents.shell._errors import ShellError

pytestmark = pytest.mark.skipif(not supervisor_available(), reason="the supervisor is Linux-only")

SUPERVISOR = ROOT / "trio_agents" / "shell" / "_supervisor.py"


async def family_pids(directory: Path) -> list[int]:
    """The four pids of :func:`family`, once it wrote them all."""
    with trio.fail_after(10):
        # The shell writes a file; nothing announces it to us: poll with a deadline.
        while not (directory / "sh").exists():  # noqa: ASYNC110
            await trio.sleep(0.01)
    return [int((directory / n).read_text()) for n in ("sh", "sleep", "setsid", "double")]


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with open_root() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=0.5))
        yield root


async def test_kill_ends_setsid_and_double_forked_descendants(
    root: Context, tmp_path: Path
) -> None:
    """kill() returns only once the shell, its sleep, a setsid sleep and an orphan are gone."""
    shell = shell_of(root)
    job = await shell.start(shell.resolve(ShellExecRequest(family(tmp_path), background=True)))
    pids = await family_pids(tmp_path)
    assert pids[0] == job.pid
    assert alive(pids) == pids
    with trio.fail_after(10):
        assert await shell.kill(job.id) is True
    assert alive(pids) == []
    assert shell.read_output(job.id).exit_code == -15


async def test_a_shell_that_exits_takes_its_setsid_leftovers_with_it(
    root: Context, tmp_path: Path
) -> None:
    """The sweep after the shell's exit reaches a process that left the group."""
    shell = shell_of(root)
    done = trio.Event()
    heard: list[JobDone] = []

    def hear(event: JobDone) -> None:
        heard.append(event)
        done.set()

    shell.on_job_done(hear)
    command = f"setsid sleep 1000 & echo $! > {tmp_path}/setsid; exit 3"
    job = await shell.start(shell.resolve(ShellExecRequest(command, background=True)))
    with trio.fail_after(10):
        await done.wait()
    assert heard == [JobDone(job_id=job.id, exit_code=3, status=JobStatus.EXITED)]
    assert alive([int((tmp_path / "setsid").read_text())]) == []


async def test_disposing_the_shell_ends_every_descendant(tmp_path: Path) -> None:
    """The executor's teardown kills and awaits setsid'd and orphaned processes too."""
    async with open_root() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=0.5))
        shell = shell_of(root)
        await shell.start(shell.resolve(ShellExecRequest(family(tmp_path), background=True)))
        pids = await family_pids(tmp_path)
    assert alive(pids) == []


def _session_of(pid: int) -> int | None:
    """The session id of ``pid`` (``/proc/PID/stat`` field 6), or ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except OSError:
        return None


async def test_without_the_supervisor_a_setsid_process_escapes(tmp_path: Path) -> None:
    """The fallback (and non-Linux) limit: a job is its process group, so ``setsid`` leaves."""
    async with open_root() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=0.5, supervise=False))
        shell = shell_of(root)
        job = await shell.start(shell.resolve(ShellExecRequest(family(tmp_path), background=True)))
        pids = await family_pids(tmp_path)
        escaped = int((tmp_path / "setsid").read_text())
        # Invariant: the kill comes after setsid() ran; on a loaded machine the child may not
        # have run it yet when the shell wrote its pid, and would then die with the group.
        with trio.fail_after(10):
            while _session_of(escaped) != escaped:  # noqa: ASYNC110
                await trio.sleep(0.01)
        await shell.kill(job.id)
    try:
        assert alive(pids) == [escaped]
    finally:
        os.kill(escaped, signal.SIGKILL)


def _supervise(
    directory: Path, grace: float = 0.2
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    ours, theirs = socket.socketpair()
    command = ["/bin/sh", "-c", family(directory)]
    process = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(SUPERVISOR),
            str(theirs.fileno()),
            str(grace),
            "--",
            *command,
        ],
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    theirs.close()
    return process, ours


def _line(control: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = control.recv(1)
        assert chunk, f"the supervisor closed the socket after {data!r}"
        data += chunk
    return data.decode().strip()


async def test_the_supervisor_ends_the_job_when_its_owner_goes(tmp_path: Path) -> None:
    """End of file on the control socket (what the owner's death, even SIGKILL, leaves): the
    supervisor ends every descendant, after SIGTERM and the grace, and exits."""
    process, control = _supervise(tmp_path)
    try:
        pid_line = _line(control)
        pids = await family_pids(tmp_path)
        assert pid_line == f"pid {pids[0]}"
        control.close()
        assert await trio.to_thread.run_sync(process.wait, 10) == 0
        await gone(alive, pids)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
async def test_a_signal_to_the_supervisor_ends_the_job(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """SIGTERM, SIGHUP or SIGINT to the supervisor ends the job the same way; the shell's
    status is reported before the supervisor exits."""
    process, control = _supervise(tmp_path)
    try:
        _line(control)
        pids = await family_pids(tmp_path)
        process.send_signal(signum)
        assert _line(control) == "exit -15"
        assert await trio.to_thread.run_sync(process.wait, 10) == 0
        await gone(alive, pids)
    finally:
        control.close()
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_t_sends_sigterm_to_every_descendant(tmp_path: Path) -> None:
    """``T`` sends SIGTERM to every descendant, setsid'd ones too (``K``: SIGKILL)."""
    process, control = _supervise(tmp_path, grace=60)
    try:
        _line(control)
        pids = await family_pids(tmp_path)
        control.sendall(b"T")
        assert _line(control) == "exit -15"
        await gone(alive, pids)
        assert await trio.to_thread.run_sync(process.wait, 10) == 0
    finally:
        control.close()
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_disposing_the_owning_agent_ends_every_descendant_of_its_job(
    tmp_path: Path,
) -> None:
    """An agent's dispose kills its background job: setsid'd and orphaned processes too."""
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=0.5))
        await root.plugin(tool_bash)
        handle = await root.agents.create()
        tools: ag.ToolRegistry = root.get("tools")
        arguments = {"command": family(tmp_path), "run_in_background": True}
        with trio.fail_after(10):
            result = await tools.invoke("bash", arguments, handle.agent)
        assert not result.is_error, result.content
        pids = await family_pids(tmp_path)
        with trio.fail_after(10):
            await handle.dispose()
        assert alive(pids) == []


async def test_a_supervisor_that_cannot_start_the_shell_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``pid`` line: the job is refused with the supervisor's status and the way out."""
    broken = tmp_path / "broken_supervisor.py"
    broken.write_text("import sys\nsys.exit(5)\n")
    monkeypatch.setattr(child_module, "_SUPERVISOR", str(broken))
    async with open_root() as root:
        await root.plugin(LocalShell())
        shell = shell_of(root)
        with pytest.raises(
            ShellError, match=r"^the job supervisor \(.*\) did not start the command"
        ):
            await shell.run(shell.resolve(ShellExecRequest("true")))
        assert shell.statistics().running == 0
