"""The live events of :mod:`trio_agents.mcp`."""

from __future__ import annotations

import attrs

__all__ = ["McpToolsChanged"]


@attrs.frozen
class McpToolsChanged:
    """An MCP server's tools were (re)registered: after it started, and after each
    ``notifications/tools/list_changed``.

    Attributes:
        server: the server's name.
        tools: the names its tools are registered under, now.
    """

    server: str
    tools: tuple[str, ...]
