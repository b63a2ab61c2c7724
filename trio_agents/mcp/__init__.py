"""MCP servers as tool providers: :class:`McpServer` is a plugin per server.

Needs the ``mcp`` extra (from a checkout: ``pip install -e '.[mcp]'``).
"""

from ._errors import McpConfigError as McpConfigError
from ._errors import McpError as McpError
from ._errors import McpServerError as McpServerError
from ._events import McpServerFailed as McpServerFailed
from ._events import McpServerRestarted as McpServerRestarted
from ._events import McpToolsChanged as McpToolsChanged
from ._restart import McpRestart as McpRestart
from ._server import McpServer as McpServer
from ._snapshot import McpServerSnapshot as McpServerSnapshot

__all__ = [
    "McpConfigError",
    "McpError",
    "McpRestart",
    "McpServer",
    "McpServerError",
    "McpServerFailed",
    "McpServerRestarted",
    "McpServerSnapshot",
    "McpToolsChanged",
]
