"""A program that reads stdin and never answers (an MCP server that hangs at start)."""

import sys

for _ in sys.stdin:
    pass
