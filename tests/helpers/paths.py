"""Where the suite's parts are, for a test in any folder of it."""

from __future__ import annotations

from pathlib import Path

#: This package: support modules, worker scripts, the MCP servers the tests start.
HELPERS = Path(__file__).resolve().parent
#: The suite's root folder (``tests/``).
TESTS = HELPERS.parent
#: The repository's root (``pyproject.toml``, ``docs/``, ``trio_agents/``).
ROOT = TESTS.parent
#: The MCP servers the tests start as child processes.
SERVERS = HELPERS / "mcp_servers"
#: User code checked by mypy strict with no ``Any`` allowed.
TYPING = TESTS / "typing"
