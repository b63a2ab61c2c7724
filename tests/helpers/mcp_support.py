"""Helpers of the MCP tests: the test servers and calls through the tools registry."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import trio

import trio_agents.agent as ag
from trio_agents.kernel import Context
from trio_agents.mcp import McpServer

SERVERS = Path(__file__).parent / "mcp_servers"
TOOLS_SERVER = str(SERVERS / "tools_server.py")


def tools_server(name: str = "t", *args: str, **fields: Any) -> McpServer:
    """The test tools server (``tools_server.py``) as an MCP server named ``name``."""
    return McpServer(name, command=sys.executable, args=(TOOLS_SERVER, *args), **fields)


def registry(root: Context) -> ag.ToolRegistry:
    """The runtime's tools registry."""
    tools = root.get("tools")
    assert isinstance(tools, ag.ToolRegistry)
    return tools


async def invoke(root: Context, name: str, **arguments: Any) -> ag.ToolResult:
    """Call the tool ``name`` with no agent, bounded in (real) time."""
    with trio.fail_after(20):
        return await registry(root).invoke(name, arguments)
