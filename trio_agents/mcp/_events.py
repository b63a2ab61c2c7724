"""The live events of :mod:`trio_agents.mcp`."""

from __future__ import annotations

import attrs


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


@attrs.frozen
class McpServerFailed:
    """An MCP server that had started went away (it exited, or its endpoint did), or one of
    its restarts failed to start. Its tools are removed until it is back.

    Attributes:
        server: the server's name.
        reason: what happened, in one line (with the end of a stdio server's stderr).
        failures: its failures in a row (since its last stable connection).
        retry_in: seconds until it is started again; ``None``: it stays down (no restart
            policy, or the policy's limit was reached), until the plugin is applied again.
    """

    server: str
    reason: str
    failures: int
    retry_in: float | None


@attrs.frozen
class McpServerRestarted:
    """An MCP server is back after a failure: it answered ``initialize`` and its tools are
    registered again.

    Attributes:
        server: the server's name.
        failures: the failures in a row that came before this restart.
    """

    server: str
    failures: int
