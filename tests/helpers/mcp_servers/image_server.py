"""An MCP server (the SDK's ``MCPServer``, stdio) whose tools answer with images.

``screenshot`` answers a line of text and a real 2x2 red PNG; ``huge`` answers an image over
the agent's size bound (6 MiB of zeros as ``image/png``).
"""

from __future__ import annotations

import base64

import mcp.types as mt
from mcp.server.mcpserver import MCPServer

#: A 2x2 red PNG.
RED_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJ"
    "RU5ErkJggg=="
)

server = MCPServer("images")


@server.tool()
def screenshot() -> list[mt.ContentBlock]:
    """A screenshot of the (tiny) screen."""
    return [
        mt.TextContent(type="text", text="the screen:"),
        mt.ImageContent(type="image", data=RED_PNG, mime_type="image/png"),
    ]


@server.tool()
def huge() -> list[mt.ContentBlock]:
    """An image too large to send."""
    data = base64.b64encode(b"\0" * (6 * 1024 * 1024)).decode()
    return [mt.ImageContent(type="image", data=data, mime_type="image/png")]


server.run()
