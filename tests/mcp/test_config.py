"""``[[mcp_servers]]`` in the command's config file: validation, and servers the command runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from tests.helpers.paths import SERVERS
from tests.helpers.support import TRIO_AGENTS, gone, processes_with
from trio_agents.cli._config import ConfigFileError, load_config, parse
from trio_agents.cli._options import Settings, open_cli_runtime, resolve_model
from trio_agents.mcp import McpRestart, McpServer

SERVERS = SERVERS
TOOLS_SERVER = str(SERVERS / "tools_server.py")


def _write(directory: Path, text: str) -> Path:
    path = directory / "trio-agents.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_valid_table_gives_the_server(tmp_path: Path) -> None:
    """A stdio and an HTTP server, with their fields, become McpServer values."""
    config = load_config(
        _write(
            tmp_path,
            """
            [[mcp_servers]]
            name = "files"
            command = "files-server"
            args = ["--root", "."]
            env = { LEVEL = "debug" }
            tools = ["read"]

            [[mcp_servers]]
            name = "web"
            url = "http://127.0.0.1:9/mcp"
            headers = { Authorization = "Bearer x" }
            """,
        )
    )
    assert config.mcp_servers == (
        McpServer(
            "files",
            command="files-server",
            args=("--root", "."),
            env={"LEVEL": "debug"},
            tools=("read",),
            ask=("*",),
        ),
        McpServer(
            "web", url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer x"}, ask=("*",)
        ),
    )


def test_restart_and_call_timeout_come_from_the_table() -> None:
    """``restart`` is a table of McpRestart's fields (a bad one is a listed problem);
    ``call_timeout`` defaults to 300 s."""
    config = parse(
        {
            "mcp_servers": [
                {"name": "a", "command": "x", "restart": {"max_restarts": 0}},
                {"name": "b", "command": "x", "call_timeout": 5},
            ]
        }
    )
    first, second = config.mcp_servers
    assert (first.restart, first.call_timeout) == (McpRestart(max_restarts=0), 300.0)
    assert (second.restart, second.call_timeout) == (McpRestart(), 5.0)
    with pytest.raises(ConfigFileError) as caught:
        parse({"mcp_servers": [{"name": "a", "command": "x", "restart": {"max_restarts": -1}}]})
    assert caught.value.problems == (
        "mcp_servers[0].restart.max_restarts: restart max_restarts must be an integer >= 0; got -1",
    )


def test_every_bad_entry_is_reported_at_once_with_where_it_is() -> None:
    """Missing transport, wrong types, unknown keys, a bad name and a duplicate: all listed."""
    with pytest.raises(ConfigFileError) as caught:
        parse(
            {
                "mcp_servers": [
                    {"name": "a"},
                    {"name": "b", "command": 3, "bogus": True},
                    {"name": "c", "command": "x", "args": "not a list"},
                    {"name": "d d", "command": "x"},
                    {"name": "e", "command": "x"},
                    {"name": "e", "url": "http://h/mcp"},
                ]
            }
        )
    problems = caught.value.problems
    expected = [
        r"mcp_servers\[0\]: MCP server 'a' needs exactly one of 'command' .* and 'url' .*",
        r"mcp_servers\[1\]\.command: expected str, got int 3",
        r"mcp_servers\[1\]: unknown keys: bogus",
        r"mcp_servers\[2\]\.args: expected a list, got str 'not a list'",
        r"mcp_servers\[3\]\.name: an MCP server's name is 1-48 letters, .*got 'd d'",
        r"mcp_servers\[5\]\.name: 'e' is declared already \(mcp_servers\[4\]\); names are unique",
    ]
    assert len(problems) == len(expected), problems
    for pattern in expected:
        assert any(re.fullmatch(pattern, p) for p in problems), (pattern, problems)


async def test_the_command_runs_the_servers_and_stops_them_on_exit(tmp_path: Path) -> None:
    """The runtime the command opens has the server's tools; closing it ends the process."""
    config = parse(
        {
            "mcp_servers": [
                {"name": "t", "command": sys.executable, "args": [TOOLS_SERVER], "ask": []}
            ]
        }
    )
    settings = Settings(model=resolve_model(None), store="memory", config=config)
    async with open_cli_runtime(settings, shell=False) as root:
        tools = root.get("tools")
        assert "t__add" in tools.names()
        with trio.fail_after(20):
            pid = int((await tools.invoke("t__pid", {})).content)
    await gone(lambda p: [p] if os.path.exists(f"/proc/{p}") else [], pid)


def test_a_server_that_cannot_start_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """``trio-agents run`` with a broken server: one readable line, exit code 1, no process."""
    script = str(SERVERS / "not_mcp.py")
    path = _write(
        tmp_path,
        f"""
        [[mcp_servers]]
        name = "broken"
        command = {sys.executable!r}
        args = [{script!r}]
        """,
    )
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    result = subprocess.run(
        [str(TRIO_AGENTS), "run", "--config", str(path), "--store", "memory", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result
    assert re.fullmatch(
        r"trio-agents: error: MCP server 'broken' failed to start \(.*not_mcp\.py\): the "
        r"connection closed \(the server exited\?\); its stderr ends with: "
        r"not_mcp: no MCP here, exiting\n",
        result.stderr,
    ), result.stderr
    assert processes_with(script) == []
