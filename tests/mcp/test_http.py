"""``McpServer(url=...)``: a streamable HTTP server (the SDK's, on loopback) as tools."""

from __future__ import annotations

import functools
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.paths import SERVERS
from trio_agents.kernel import FiberState
from trio_agents.mcp import McpServer, McpServerError
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import ToolCallEnded

TOOLS_SERVER = str(SERVERS / "tools_server.py")
_RUNNING = re.compile(rb"Uvicorn running on http://127\.0\.0\.1:(\d+)")


@asynccontextmanager
async def http_server() -> AsyncIterator[str]:
    """Run the tools server over streamable HTTP on a free loopback port; yield its URL."""
    async with trio.open_nursery() as nursery:
        run = functools.partial(
            trio.run_process,
            [sys.executable, TOOLS_SERVER, "http", "0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            check=False,
        )
        process = await nursery.start(run)
        assert process.stderr is not None
        seen = b""
        with trio.fail_after(30):
            while (found := _RUNNING.search(seen)) is None:
                chunk = await process.stderr.receive_some()
                assert chunk, f"the server exited before listening: {seen!r}"
                seen += chunk

        async def drain() -> None:
            # Its access log must not fill the pipe and stall it.
            while await process.stderr.receive_some():
                pass

        nursery.start_soon(drain)
        try:
            yield f"http://127.0.0.1:{int(found.group(1))}/mcp"
        finally:
            process.terminate()


async def test_an_http_server_s_tools_are_called_from_a_turn() -> None:
    """The tools of an HTTP server are registered and called like a stdio server's; headers
    are accepted; disposing the plugin leaves the server running (it is not ours)."""
    model = ScriptedModel([[CallTool("web__add", {"a": 1, "b": 2})], [Say("ok")]])
    async with http_server() as url, ag.open_runtime(model=model) as root:
        server = McpServer("web", url=url, headers={"X-Test": "1"})
        with trio.fail_after(30):
            fiber = await root.plugin(server)
        assert "web__add" in root.get("tools").names()
        agent = (await root.agents.create()).agent
        agent.prompt("add")
        with trio.fail_after(30):
            await agent.when_idle()
        [ended] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
        assert (ended.content, ended.is_error) == ("3", False)
        with trio.fail_after(10):
            await fiber.dispose()
        assert fiber.state is FiberState.DISPOSED
        assert root.get("tools").names() == ()


async def test_an_endpoint_that_refuses_the_connection_fails_the_plugin_clearly() -> None:
    """Nothing listens at the URL: ctx.plugin raises one McpServerError naming it."""
    with socket.socket() as bound:  # bound, never listening: connections are refused
        bound.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{bound.getsockname()[1]}/mcp"
        async with ag.open_runtime() as root:
            with pytest.raises(McpServerError) as caught:
                with trio.fail_after(30):
                    await root.plugin(McpServer("web", url=url))
            assert root.get("tools").names() == ()
    assert re.fullmatch(
        rf"MCP server 'web' failed to start \({re.escape(url)}\): ConnectError: .*",
        str(caught.value),
    )
