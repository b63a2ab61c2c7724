"""The errors of :mod:`trio_agents.mcp`."""

from __future__ import annotations

from .._errors import TrioAgentsError


class McpError(TrioAgentsError):
    """Something about an MCP server went wrong."""


class McpConfigError(McpError, ValueError):
    """An :class:`McpServer` description cannot be used (the message says which field)."""


class McpServerError(McpError, RuntimeError):
    """An MCP server could not start (``ctx.plugin`` raises it); one that goes away later is
    restarted or left down, and reported as :class:`McpServerFailed`, never raised."""
