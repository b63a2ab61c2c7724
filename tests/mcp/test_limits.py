"""What an MCP server cannot do to a turn: hang it (the default call_timeout), or bury a
malformed tool definition in a validation dump."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.mcp_support import SERVERS, invoke, registry, tools_server
from trio_agents.kernel import Context
from trio_agents.mcp import McpServer, McpServerError


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with ag.open_runtime() as root:
        yield root


async def test_a_call_that_never_answers_ends_at_the_default_call_timeout(
    root: Context, mock_clock: trio.testing.MockClock
) -> None:
    """No call_timeout given: a call the server never answers ends after 300 s of (virtual)
    time as an error naming the limit, and the server is told to cancel it."""
    server = tools_server()
    assert server.call_timeout == 300.0
    await root.plugin(server)
    # The clock stands still while the server starts (its startup_timeout cannot fire), and
    # jumps once every task waits, so the 300 s pass at once.
    mock_clock.autojump_threshold = 0
    start = trio.current_time()
    with trio.fail_after(400):  # without the default, this is where it would hang
        result = await registry(root).invoke("t__block", {})
    assert trio.current_time() - start == pytest.approx(300.0)
    assert (result.is_error, result.started) == (True, True)
    assert result.content == (
        "MCP server 't' did not answer the call to 'block' within 300 s (its call_timeout); "
        "the call was cancelled on the server"
    )
    mock_clock.autojump_threshold = math.inf
    assert (await invoke(root, "t__wait_cancelled")).content == "cancelled"


async def test_a_malformed_tool_schema_is_one_line_naming_server_and_tool(root: Context) -> None:
    """A tools/list with one tool whose inputSchema is not an object: ctx.plugin raises one
    line that names the server, the tool and the problem; nothing is registered."""
    script = str(SERVERS / "malformed_tool.py")
    server = McpServer("m", command=sys.executable, args=(script,))
    with pytest.raises(McpServerError) as info:
        await root.plugin(server)
    assert re.fullmatch(
        r"MCP server 'm' lists a malformed tool 'broken': inputSchema: Input should be a "
        r"valid dictionary[^\n]*; the server is refused; fix that definition on the server",
        str(info.value),
    ), str(info.value)
    assert registry(root).names() == ()
