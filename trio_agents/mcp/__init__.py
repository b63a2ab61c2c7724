"""MCP servers as tool providers: :class:`McpServer` is a plugin per server.

Needs the ``mcp`` extra (from a checkout: ``pip install -e '.[mcp]'``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it need of it and users do not: ``McpError``, the base of its errors (the ACP bridge's
``mcpServers``).
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
    "McpRestart",
    "McpServer",
    "McpServerError",
    "McpServerFailed",
    "McpServerRestarted",
    "McpServerSnapshot",
    "McpToolsChanged",
]
