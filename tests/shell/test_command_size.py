"""A command line too long for exec is a clear refusal naming the command and the limit,
never an ``OSError`` that names the supervisor's python."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.support import shell_of
from trio_agents.kernel import Context
from trio_agents.shell import LocalShell, ShellExecRequest, ShellRequestError, tool_bash

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's limits")

# Linux's MAX_ARG_STRLEN (32 pages, with the terminating NUL): the longest argument of exec.
LIMIT = 32 * os.sysconf("SC_PAGE_SIZE") - 1
TOO_LONG = r"^the command is [\d,]+ bytes; this system runs a command line of at most "
TOO_BIG = r"^the command \([\d,]+ bytes\) and its environment \([\d,]+ bytes\) exceed "


@pytest.fixture(params=[True, False], ids=["supervised", "group"])
async def root(request: pytest.FixtureRequest) -> AsyncIterator[Context]:
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell(), LocalShell.Config(supervise=request.param))
        await root.plugin(tool_bash)
        yield root


async def test_the_longest_command_runs_and_one_byte_more_is_refused(root: Context) -> None:
    """The longest command (MAX_ARG_STRLEN) runs; one byte more is refused by resolve."""
    shell = shell_of(root)
    limit = LIMIT
    longest = ": " + "x" * (limit - 2)
    with trio.fail_after(30):
        result = await shell.run(shell.resolve(ShellExecRequest(longest)))
    assert result.exit_code == 0
    with pytest.raises(ShellRequestError, match=TOO_LONG + rf"{limit:,} bytes; write the script"):
        shell.resolve(ShellExecRequest(longest + "x"))


async def test_a_100_mb_command_is_a_tool_error_naming_the_limit(root: Context) -> None:
    """Through the ``bash`` tool: an error result that was not started, no python named."""
    handle = await root.agents.create()
    tools: ag.ToolRegistry = root.get("tools")
    command = "echo " + "x" * (100 << 20)
    result = await tools.invoke("bash", {"command": command}, handle.agent)
    assert (result.is_error, result.started) == (True, False)
    assert result.content.startswith(f"the command is {len(command):,} bytes;")
    assert "python" not in result.content


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
async def test_an_environment_over_arg_max_is_a_tool_error_naming_the_limit(
    root: Context, background: bool
) -> None:
    """Each part fits, the whole does not (exec's E2BIG): the refusal names ARG_MAX."""
    shell = shell_of(root)
    part = "y" * (LIMIT - 10)
    env = {f"BIG{i}": part for i in range(os.sysconf("SC_ARG_MAX") // len(part) + 1)}
    spec = shell.resolve(ShellExecRequest("true", env=env, background=background))
    launch = shell.start if background else shell.run
    with pytest.raises(ShellRequestError, match=TOO_BIG + r"this system's limit .*\(ARG_MAX, "):
        await launch(spec)
    assert shell.statistics().running == 0
