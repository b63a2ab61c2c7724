"""A stdio MCP server runs like a shell job (Linux, the per-job supervisor): every process it
starts ends with its plugin, on a normal exit of the runtime and of the real ``trio-agents
run``, and when that command is killed with SIGKILL; a server that ignores end of file and
SIGTERM is killed after the grace period.

The servers (``mcp_servers/forking_server.py``) start a child in a session of its own (a
daemon: a process-group kill misses it) with a marker on its command line; every check is a
process listing for that marker, with a deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.paths import SERVERS
from tests.helpers.support import TRIO_AGENTS, gone, marker, processes_with
from trio_agents.mcp import McpServer
from trio_agents.mcp._process import GRACE
from trio_agents.shell._child import supervisor_available

pytestmark = pytest.mark.skipif(not supervisor_available(), reason="the supervisor is Linux-only")

SERVER = str(SERVERS / "forking_server.py")
DEADLINE = 30.0
KINDS = [[], ["stubborn"]]
IDS = ["plain", "stubborn"]


@pytest.fixture
def word() -> Iterator[str]:
    """A marker for the server's and its child's command lines; what is left is killed."""
    word = marker()
    yield word
    for pid in processes_with(word):
        os.kill(pid, 9)


def wait_for(word: str, count: int) -> list[int]:
    """The processes with ``word`` once there are ``count`` of them."""
    deadline = time.monotonic() + DEADLINE
    while len(found := processes_with(word)) < count:
        assert time.monotonic() < deadline, f"only {found} started"
        time.sleep(0.02)
    return found


def wait_gone(word: str) -> None:
    """Until no process with ``word`` is left (a real process's exit: nothing announces it)."""
    deadline = time.monotonic() + DEADLINE
    while found := processes_with(word):
        assert time.monotonic() < deadline, f"{found} are still alive"
        time.sleep(0.02)


@pytest.mark.parametrize("extra", KINDS, ids=IDS)
async def test_leaving_the_runtime_ends_the_server_and_its_child(
    word: str, extra: list[str]
) -> None:
    """The server and the daemon it started are gone when the runtime has closed; a server
    that ignores end of file and SIGTERM is killed within two grace periods."""
    async with ag.open_runtime() as root:
        await root.plugin(McpServer("f", command=sys.executable, args=(SERVER, word, *extra)))
        tools: ag.ToolRegistry = root.get("tools")
        with trio.fail_after(DEADLINE):
            child = int((await tools.invoke("f__child_pid", {})).content)
        assert child in processes_with(word)
        started = trio.current_time()
    assert trio.current_time() - started < 3 * GRACE + 1
    await gone(processes_with, word)


def _config(tmp_path: Path, word: str, extra: list[str]) -> Path:
    config = tmp_path / "trio-agents.toml"
    args = [SERVER, word, *extra]
    config.write_text(
        f"[[mcp_servers]]\nname = 'f'\ncommand = {sys.executable!r}\nargs = {args!r}\n"
    )
    return config


def _run(tmp_path: Path, word: str, extra: list[str], model: str) -> subprocess.Popen[bytes]:
    config = _config(tmp_path, word, extra)
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    command = [str(TRIO_AGENTS), "run", "--config", str(config), "--store", "memory"]
    return subprocess.Popen(
        [*command, "--model", model, "hello there"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


@pytest.mark.parametrize("extra", KINDS, ids=IDS)
def test_the_servers_child_is_gone_after_run_exits(
    tmp_path: Path, word: str, extra: list[str]
) -> None:
    """``trio-agents run`` with the server in its config file exits 0, and neither the server
    nor its child is left."""
    with _run(tmp_path, word, extra, "echo") as process:
        _, stderr = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0, stderr
    wait_gone(word)


@pytest.mark.parametrize("extra", KINDS, ids=IDS)
def test_sigkill_of_run_still_ends_the_server_and_its_child(
    tmp_path: Path, word: str, extra: list[str]
) -> None:
    """Nothing runs the command's teardown, yet the server and its child go: the supervisor
    sees its control socket close, and a stubborn server is killed after the grace."""
    with _run(tmp_path, word, extra, "echo?delay=30") as process:
        try:
            wait_for(word, 3)  # the supervisor, the server and its child
        finally:
            process.kill()
            process.communicate(timeout=DEADLINE)
    wait_gone(word)
