"""MCP servers as tool providers: :class:`McpServer` is a plugin per server.

Needs the ``mcp`` extra (``pip install trio-agents[mcp]``).
"""

from ._errors import McpConfigError as McpConfigError
from ._errors import McpError as McpError
from ._errors import McpServerError as McpServerError
from ._events import McpToolsChanged as McpToolsChanged
from ._server import McpServer as McpServer

__all__ = ["McpConfigError", "McpError", "McpServer", "McpServerError", "McpToolsChanged"]
