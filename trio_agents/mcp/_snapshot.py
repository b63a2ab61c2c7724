"""What an MCP server adds to a snapshot of the ownership tree (``ctx.snapshot()``).

Rules:
- The kernel shows the server's fiber (its connection task, its tools' entries); this record
  is that fiber's ``details``, given by the plugin, :class:`McpServer`, through the kernel's
  ``Describer`` protocol: which server it is.
- Plain data: a frozen attrs record that ``cattrs`` unstructures to JSON.
"""

from __future__ import annotations

from typing import Literal, final

import attrs


@final
@attrs.frozen
class McpServerSnapshot:
    """One MCP server, as its fiber's details.

    Attributes:
        kind: ``"mcp_server"``, so a record unstructured to JSON says what it is.
        name: the server's name.
        transport: ``"stdio"`` or ``"http"``.
        target: the command line of a stdio server, the URL of an HTTP one.
        agent: the one agent that sees its tools, or ``None`` (every agent).
    """

    name: str
    transport: str
    target: str
    agent: str | None = None
    kind: Literal["mcp_server"] = "mcp_server"
