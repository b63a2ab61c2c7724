"""An MCP server (the SDK's ``MCPServer``, stdio) that starts a long-lived child process.

``python forking_server.py MARKER [stubborn]``: at start it spawns a child (a Python sleep of
an hour, ``MARKER`` on its command line, in a session of its own, as a daemon, with no death
signal) and offers the tool ``child_pid``. With
``stubborn`` the server ignores SIGTERM and, once its stdin reaches end of file, goes on
living (an hour) instead of exiting: only SIGKILL ends it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer

marker = sys.argv[1]
stubborn = "stubborn" in sys.argv[2:]
if stubborn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(3600)", marker],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    # Out of the server's process group, as a daemon would be: a group kill misses it.
    start_new_session=True,
)
server = MCPServer("forking")


@server.tool()
def child_pid() -> str:
    """The pid of the server's child process."""
    return str(child.pid)


server.run()
if stubborn:
    time.sleep(3600)
