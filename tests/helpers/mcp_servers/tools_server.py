"""An MCP server for the tests, written with the SDK's ``MCPServer``; run over stdio.

``python tools_server.py`` serves over stdio (further arguments are ignored: a test puts a
marker there to find the process); ``python tools_server.py http PORT`` serves streamable
HTTP on 127.0.0.1:PORT at ``/mcp``. Its tools cover what the plugin maps: text, errors,
other content kinds, a changing tool list, a crash, and a call that blocks until cancelled
(with tools that report, without sleeping in the test, that it started and was cancelled).
"""

from __future__ import annotations

import os
import sys

import anyio
import mcp.types as mt
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("tools")
started = anyio.Event()
cancelled = anyio.Event()


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool(annotations=mt.ToolAnnotations(read_only_hint=True))
def peek() -> str:
    """A tool the server marks read-only."""
    return "peeked"


@server.tool(name="dotted.name")
def dotted() -> str:
    """A tool whose name has a character model APIs refuse."""
    return "dotted"


@server.tool()
def traceparent(ctx: Context) -> str:
    """The ``traceparent`` the call's request carried in its ``_meta`` (or ``None``)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent"))


@server.tool()
def fail(reason: str) -> str:
    """Fail with the given reason."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
def picture() -> list[mt.ContentBlock]:
    """Answer with text and an image."""
    return [
        mt.TextContent(type="text", text="a picture:"),
        mt.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
    ]


@server.tool()
async def shout(text: str, ctx: Context) -> str:
    """Send text as an error-level log message to the client."""
    await ctx.error(text)
    return "sent"


@server.tool()
async def roots(ctx: Context) -> str:
    """The client's roots, one URI a line."""
    listed = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in listed.roots)


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def big(megabytes: float) -> str:
    """Answer with ``megabytes`` million characters of text (lines of 'x', ending in 'END')."""
    size = int(megabytes * 1_000_000)
    line = "x" * 99 + "\n"
    return (line * (size // 100 + 1))[: max(0, size - 3)] + "END"


def extra(text: str) -> str:
    """Repeat text twice."""
    return text * 2


@server.tool()
async def grow(ctx: Context) -> str:
    """Offer the tool 'extra' and say that the list changed."""
    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def shrink(ctx: Context) -> str:
    """Stop offering 'add' and say that the list changed."""
    server.remove_tool("add")
    await ctx.session.send_tool_list_changed()
    return "shrunk"


@server.tool()
async def crash() -> str:
    """Exit the process at once, mid-call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def block() -> str:
    """Block until cancelled."""
    started.set()
    try:
        await anyio.sleep_forever()
    finally:
        cancelled.set()
    return "unreachable"  # pragma: no cover


@server.tool()
async def wait_started() -> str:
    """Return once 'block' has started."""
    await started.wait()
    return "started"


@server.tool()
async def wait_cancelled() -> str:
    """Return once a call of 'block' was cancelled."""
    await cancelled.wait()
    return "cancelled"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        # Port 0: the system picks one; uvicorn logs the one it bound on stderr.
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
