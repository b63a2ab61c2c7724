"""A program that is not an MCP server: it complains on stderr and exits with code 2."""

import sys

print("not_mcp: no MCP here, exiting", file=sys.stderr)
sys.exit(2)
