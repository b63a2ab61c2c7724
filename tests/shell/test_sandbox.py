"""``SandboxShell`` with the real bubblewrap: what a command may write, the network, and that
no process of a job outlives it; the clear failures when bubblewrap cannot make a sandbox.

The rest of the shell contract runs on it in tests/shell/test_executor.py (``sandboxed``).
"""

from __future__ import annotations

import functools
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.sandbox_support import bomb, require_bwrap
from tests.helpers.support import gone, marker, processes_with, shell_of
from trio_agents.kernel import Context, open_root
from trio_agents.shell import (
    JobStatus,
    LocalShell,
    SandboxShell,
    SandboxUnavailableError,
    ShellExecRequest,
    ShellResult,
    tool_bash,
)
from trio_agents.shell._errors import ShellError
from trio_agents.shell._sandbox import bwrap_argv

HOST_TMP = Path("/tmp")


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with open_root() as root:
        yield root


async def run(root: Context, command: str, cwd: Path | None = None) -> ShellResult:
    shell = shell_of(root)
    with trio.fail_after(10):
        return await shell.run(
            shell.resolve(ShellExecRequest(command, cwd=None if cwd is None else str(cwd)))
        )


# -- the file system -------------------------------------------------------------------------


async def test_workspace_write_allows_the_workspace_and_refuses_the_rest(
    root: Context, tmp_path: Path
) -> None:
    """Under workspace-write the command's directory is writable; a directory outside it is
    read-only, and /tmp is the sandbox's own."""
    await root.plugin(SandboxShell(), SandboxShell.Config(policy="workspace-write"))
    name = marker()
    # Invariant: the outside directory is not under /tmp, which the sandbox hides behind its
    # own (a checkout under /tmp, as CI's may be, would give "No such file or directory").
    host = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="trio-agents-sandbox-"))
    outside = host / name
    try:
        result = await run(
            root, f"touch inside && touch {outside}; echo x > /tmp/{name}", cwd=tmp_path
        )
        assert result.output == f"touch: cannot touch '{outside}': Read-only file system\n"
        assert (tmp_path / "inside").exists()
        assert not outside.exists()
        assert not (HOST_TMP / name).exists()
    finally:
        shutil.rmtree(host)


async def test_read_only_refuses_the_workspace_too(root: Context, tmp_path: Path) -> None:
    """Under read-only nothing outside the private /tmp is writable, the workspace included."""
    await root.plugin(SandboxShell(), SandboxShell.Config(policy="read-only"))
    result = await run(root, "echo x > /tmp/scratch && cat /tmp/scratch; touch inside", tmp_path)
    assert result.output == "x\ntouch: cannot touch 'inside': Read-only file system\n"
    assert result.exit_code == 1
    assert not (tmp_path / "inside").exists()


async def test_configured_directories_are_writable_too(root: Context, tmp_path: Path) -> None:
    """``writable`` directories are writable besides the workspace."""
    (extra := tmp_path / "extra").mkdir()
    (work := tmp_path / "work").mkdir()
    await root.plugin(SandboxShell(), SandboxShell.Config(writable=(str(extra),)))
    result = await run(root, f"touch {extra}/made && echo ok", work)
    assert (result.output, result.exit_code) == ("ok\n", 0)
    assert (extra / "made").exists()


async def test_danger_full_access_is_no_sandbox(root: Context, tmp_path: Path) -> None:
    """danger-full-access never looks for bubblewrap, and writes anywhere."""
    (work := tmp_path / "work").mkdir()
    config = SandboxShell.Config(policy="danger-full-access", bwrap="/nonexistent/bwrap")
    await root.plugin(SandboxShell(), config)
    result = await run(root, f"touch {tmp_path}/outside && echo ok", work)
    assert (result.output, result.exit_code) == ("ok\n", 0)
    assert (tmp_path / "outside").exists()


# -- the network -----------------------------------------------------------------------------


def connect(port: int) -> str:
    """A command that sends ``hi`` to ``127.0.0.1:port`` and says whether it could."""
    script = (
        "import socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=5).sendall(b'hi')\n"
        "    print('connected')\n"
        "except OSError as exc:\n"
        "    print(exc.strerror)\n"
    )
    return f'{sys.executable} -I -c "{script}"'


@pytest.mark.parametrize("network", [False, True], ids=["off", "on"])
async def test_the_network_is_unreachable_unless_allowed(root: Context, network: bool) -> None:
    """A loopback server of this test is out of reach from inside (the sandbox has a loopback
    of its own, where nothing listens), unless ``network``."""
    heard: list[bytes] = []
    arrived = trio.Event()

    async def handle(stream: trio.SocketStream) -> None:
        heard.append(await stream.receive_some(10))
        arrived.set()

    await root.plugin(SandboxShell(), SandboxShell.Config(network=network))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), handle, 0
        )
        port = listeners[0].socket.getsockname()[1]
        result = await run(root, connect(port))
        if network:
            with trio.fail_after(10):  # the handler's task may not have run yet
                await arrived.wait()
        nursery.cancel_scope.cancel()
    assert result.output == ("connected\n" if network else "Connection refused\n")
    assert heard == ([b"hi"] if network else [])


# -- no process outlives its job -------------------------------------------------------------


async def all_started(tag: str) -> None:
    """Wait until the 22 tagged processes of :func:`bomb` exist (nothing announces it)."""
    with trio.fail_after(10):
        while len(processes_with(tag)) < 22:  # noqa: ASYNC110
            await trio.sleep(0.01)


async def test_everything_a_job_started_ends_when_its_shell_exits(root: Context) -> None:
    """The shell exits at once; its children, setsid'd and orphaned ones too, go with it."""
    await root.plugin(SandboxShell(), SandboxShell.Config(kill_grace=0.5))
    tag = marker()
    result = await run(root, f"{bomb(tag)}; exit 4")
    assert (result.output, result.exit_code, result.status) == ("ready\n", 4, JobStatus.EXITED)
    await gone(processes_with, tag)


async def test_kill_ends_every_process_of_the_job(root: Context) -> None:
    """kill() of a background job reaches every child, setsid'd and orphaned ones too."""
    await root.plugin(SandboxShell(), SandboxShell.Config(kill_grace=0.5))
    shell = shell_of(root)
    tag = marker()
    job = await shell.start(shell.resolve(ShellExecRequest(f"{bomb(tag)}; wait", background=True)))
    await all_started(tag)
    with trio.fail_after(10):
        assert await shell.kill(job.id) is True
    await gone(processes_with, tag)
    assert shell.read_output(job.id).status is JobStatus.KILLED


async def test_disposing_the_owning_agent_ends_every_process_of_its_job() -> None:
    """An agent's dispose kills its sandboxed background job and all it started."""
    tag = marker()
    async with ag.open_runtime() as root:
        await root.plugin(SandboxShell(), SandboxShell.Config(kill_grace=0.5))
        await root.plugin(tool_bash)
        handle = await root.agents.create()
        tools: ag.ToolRegistry = root.get("tools")
        arguments = {"command": f"{bomb(tag)}; wait", "run_in_background": True}
        with trio.fail_after(10):
            result = await tools.invoke("bash", arguments, handle.agent)
        assert not result.is_error, result.content
        await all_started(tag)
        with trio.fail_after(10):
            await handle.dispose()
        await gone(processes_with, tag)


# -- clear failures --------------------------------------------------------------------------


async def test_a_missing_bwrap_fails_the_start_in_one_line(root: Context) -> None:
    """No bubblewrap: the plugin does not start, the error says how to fix it, and there is
    no shell at all (never an unsandboxed one)."""
    config = SandboxShell.Config(bwrap="/nonexistent/bwrap")
    with pytest.raises(
        SandboxUnavailableError,
        match=r"^the workspace-write sandbox needs bubblewrap, and '/nonexistent/bwrap' was not "
        r"found; install it \(Debian and Ubuntu: apt-get install bubblewrap; .*\) or run without "
        r"the sandbox \(--sandbox danger-full-access\)$",
    ):
        await root.plugin(SandboxShell(), config)
    assert root.get("shell") is None


DISABLED = """#!/bin/sh
echo "bwrap: No permissions to creating new namespace, likely because the kernel does not \
allow non-privileged user namespaces." >&2
exit 1
"""


async def test_a_bwrap_without_user_namespaces_fails_the_start_in_one_line(
    root: Context, tmp_path: Path
) -> None:
    """A bwrap that cannot create namespaces (as on a kernel with them off): one line with its
    reason and the sysctl that fixes it; no shell."""
    fake = tmp_path / "bwrap"
    fake.write_text(DISABLED)
    fake.chmod(0o755)
    with pytest.raises(
        SandboxUnavailableError,
        match=rf"^bubblewrap \({re.escape(str(fake))}\) cannot create the read-only sandbox "
        r"here: bwrap: No permissions to creating new namespace, .*; enable unprivileged user "
        r"namespaces \(sysctl kernel\.unprivileged_userns_clone=1; .*\) or run without the "
        r"sandbox \(--sandbox danger-full-access\)$",
    ):
        await root.plugin(SandboxShell(), SandboxShell.Config(policy="read-only", bwrap=str(fake)))
    assert root.get("shell") is None


async def test_a_missing_writable_directory_fails_the_start(root: Context, tmp_path: Path) -> None:
    """A ``writable`` directory that does not exist is refused, by name."""
    missing = tmp_path / "missing"
    with pytest.raises(
        ShellError,
        match=rf"^the sandbox's writable directory '{re.escape(str(missing))}' does not exist; ",
    ):
        await root.plugin(SandboxShell(), SandboxShell.Config(writable=(str(missing),)))


def test_an_unknown_policy_is_refused() -> None:
    """The policies are Codex's three names."""
    with pytest.raises(
        ValueError,
        match=r"^policy is one of read-only, workspace-write, danger-full-access; got 'none'$",
    ):
        SandboxShell.Config(policy="none")


def test_the_bwrap_command_line_follows_the_policy() -> None:
    """workspace-write binds the workspace and extra directories writable; read-only binds the
    workspace read-only; the network is unshared unless allowed."""
    common = ["--unshare-pid", "--die-with-parent", "--new-session"]
    write = bwrap_argv("bwrap", "/w", writable=("/x",))
    assert all(option in write for option in [*common, "--unshare-net"])
    assert write[-9:] == ["--bind", "/w", "/w", "--bind", "/x", "/x", "--chdir", "/w", "--"]
    read = bwrap_argv("bwrap", "/w", policy="read-only", writable=("/x",), network=True)
    assert "--unshare-net" not in read
    assert read[-6:] == ["--ro-bind", "/w", "/w", "--chdir", "/w", "--"]


async def test_the_job_pid_is_the_sandbox_s(root: Context) -> None:
    """The command runs in its own PID namespace: it sees itself as one of the first pids."""
    await root.plugin(SandboxShell())
    result = await run(root, "echo $$; ls /proc | grep -c '^[0-9]'")
    pid, count = result.output.split()
    assert int(pid) <= 2
    assert int(count) <= 4


# -- the way out: bash_unsandboxed, always asked ---------------------------------------------


@attrs.define
class Answer:
    """An approver that gives one answer and keeps every request."""

    decision: ag.Decision
    asked: list[ag.ApprovalRequest] = attrs.Factory(list)

    async def approve(self, request: ag.ApprovalRequest) -> ag.Decision:
        await trio.lowlevel.checkpoint()
        self.asked.append(request)
        return self.decision


async def test_bash_unsandboxed_is_offered_only_with_a_sandbox_and_always_asked() -> None:
    """With a sandbox, tool-bash adds bash_unsandboxed, which needs approval while bash does
    not; without one (LocalShell) there is no such tool."""
    async with ag.open_runtime() as root:
        await root.plugin(SandboxShell())
        await root.plugin(tool_bash)
        tools: ag.ToolRegistry = root.get("tools")
        assert tools.names()[-1] == "bash_unsandboxed"
        assert tools.needs_approval("bash_unsandboxed")
        assert not tools.needs_approval("bash")
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        assert "bash_unsandboxed" not in root.get("tools").names()


@pytest.mark.parametrize("decision", [ag.Decision.ALLOW_ONCE, ag.Decision.REJECT_ONCE])
async def test_bash_unsandboxed_runs_outside_the_sandbox_once_approved(
    tmp_path: Path, decision: ag.Decision
) -> None:
    """The same write that bash cannot make (the host's /tmp is not the sandbox's) is made by
    bash_unsandboxed once the approver allows it, and not at all when it refuses."""
    target = tmp_path / "outside"
    async with ag.open_runtime() as root:
        await root.plugin(SandboxShell())
        await root.plugin(tool_bash)
        handle = await root.agents.create()
        approver = Answer(decision)
        handle.agent.approver = approver
        tools: ag.ToolRegistry = root.get("tools")
        arguments = {"command": f"touch {target}"}
        with trio.fail_after(10):
            inside = await tools.invoke("bash", arguments, handle.agent)
        assert inside.is_error
        assert not target.exists()
        assert approver.asked == []
        with trio.fail_after(10):
            outside = await tools.invoke("bash_unsandboxed", arguments, handle.agent)
        assert [r.tool for r in approver.asked] == ["bash_unsandboxed"]
        assert outside.is_error is (decision is ag.Decision.REJECT_ONCE)
        assert target.exists() is (decision is ag.Decision.ALLOW_ONCE)
        await handle.dispose()
