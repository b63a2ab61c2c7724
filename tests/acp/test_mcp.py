"""ACP ``mcpServers``: the servers a session names run for its agent alone and die with it."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import pytest
import trio

from tests.helpers.acp_bridge import serve
from tests.helpers.acp_support import CWD
from tests.helpers.paths import SERVERS
from tests.helpers.support import gone, marker, processes_with
from trio_agents.acp._jsonrpc import RpcError
from trio_agents.acp._mcp import parse_mcp_servers
from trio_agents.mcp import McpServer
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import MemoryStore, ToolCallEnded

TOOLS_SERVER = str(SERVERS / "tools_server.py")


def stdio(name: str, *extra: str) -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": [TOOLS_SERVER, *extra],
        "env": [{"name": "MCP_TEST", "value": "1"}],
    }


async def test_initialize_announces_http_mcp_servers() -> None:
    """stdio needs no announcement; http is announced, sse is not."""
    async with serve() as s:
        result = await s.client.initialize()
        assert result["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}


async def test_a_sessions_servers_are_its_agents_alone_and_die_with_it() -> None:
    """The session's agent calls its server's tool; another session does not see it; closing
    the session ends the server process."""
    model = ScriptedModel([[CallTool("my_tools__add", {"a": 20, "b": 22})], [Say("ok")]])
    word = marker()
    async with serve(model) as s:
        await s.client.initialize()
        with trio.fail_after(30):
            result = await s.client.call(
                "session/new", {"cwd": CWD, "mcpServers": [stdio("my tools", word)]}
            )
        session_id = result["sessionId"]
        other = await s.client.new_session()
        tools = s.root.get("tools")
        assert "my_tools__add" in tools.names(agent=session_id)
        assert "my_tools__add" not in tools.names(agent=other)
        assert processes_with(word) != []
        agent = s.agent(session_id)
        with trio.fail_after(30):
            await s.client.until(await s.client.prompt(session_id, "add"))
        [ended] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
        assert (ended.content, ended.is_error) == ("42", False)
        # A session's MCP tool needs approval: the client was asked (and allowed it once).
        [asked] = s.client.permission_requests
        assert asked["params"]["toolCall"]["title"].startswith("my_tools__add ")
        with trio.fail_after(10):
            await s.agents._hosted[agent].disposer()()
        await gone(processes_with, word)
        assert "my_tools__add" not in tools.names(agent=session_id)


async def test_closing_the_connection_ends_every_sessions_servers() -> None:
    """Client EOF disposes the sessions, and with them their servers."""
    word = marker()
    async with serve() as s:
        await s.client.initialize()
        with trio.fail_after(30):
            await s.client.call("session/new", {"cwd": CWD, "mcpServers": [stdio("a", word)]})
        assert processes_with(word) != []
        await s.client.close_output()
        with trio.fail_after(10):
            await s.bridge.wait_closed()
        await gone(processes_with, word)


async def test_bad_entries_are_invalid_params_and_create_nothing() -> None:
    """A malformed entry or an unannounced transport: -32602 naming it, no agent."""
    cases = [
        ({"name": "x", "args": [], "env": []}, r"mcpServers\[0\]\.command must be"),
        ({"name": "x", "command": "c", "args": [], "env": [{"name": 1}]}, r"env\[0\] must be"),
        ({"type": "sse", "name": "x", "url": "http://h", "headers": []}, r"type 'sse' is not"),
        ({"type": "http", "name": "x", "url": "ftp://h", "headers": []}, r"must be an http://"),
    ]
    async with serve() as s:
        await s.client.initialize()
        for entry, pattern in cases:
            request_id = await s.client.request("session/new", {"cwd": CWD, "mcpServers": [entry]})
            _, refused = await s.client.until(request_id)
            assert refused["error"]["code"] == -32602, refused
            assert re.search(pattern, refused["error"]["message"]), refused
        assert s.agents.list() == ()


async def test_a_server_that_cannot_start_fails_the_session_and_stops_the_others() -> None:
    """The second server fails: the request errs naming it, the first server is stopped."""
    word = marker()
    broken = {"name": "broken", "command": "/nonexistent/server", "args": [], "env": []}
    async with serve() as s:
        await s.client.initialize()
        with trio.fail_after(30):
            request_id = await s.client.request(
                "session/new", {"cwd": CWD, "mcpServers": [stdio("good", word), broken]}
            )
            _, refused = await s.client.until(request_id)
        assert refused["error"]["code"] == -32603
        assert refused["error"]["data"] == {"server": "broken"}
        assert re.match(r"^MCP server 'broken' could not start", refused["error"]["message"])
        assert s.agents.list() == ()
        await gone(processes_with, word)


async def test_servers_that_cannot_start_are_each_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two servers fail: the answer names the first, the log the second (no failure unseen)."""
    first = {"name": "first", "command": "/nonexistent/one", "args": [], "env": []}
    second = {"name": "second", "command": "/nonexistent/two", "args": [], "env": []}
    with caplog.at_level(logging.ERROR, "trio_agents"):
        async with serve() as s:
            await s.client.initialize()
            with trio.fail_after(30):
                request_id = await s.client.request(
                    "session/new", {"cwd": CWD, "mcpServers": [first, second]}
                )
                _, refused = await s.client.until(request_id)
    assert refused["error"]["data"] == {"server": "first"}
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    seconds = [m for m in errors if "'second'" in m]
    assert len(seconds) == 1, errors
    assert re.match(
        r"^MCP server 'second' could not start.*\(the answer names MCP server 'first'\)$",
        seconds[0],
    ), seconds


async def test_load_starts_the_servers_for_the_resumed_agent() -> None:
    """session/load of a stored session starts its mcpServers for the resumed agent; loading
    it again while it is live keeps the servers it has (no second process)."""
    store = MemoryStore()
    async with serve(store=store) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
    word = marker()
    async with serve(store=store) as s:
        await s.client.initialize()
        params = {"sessionId": session_id, "cwd": CWD, "mcpServers": [stdio("t", word)]}
        with trio.fail_after(30):
            assert set(await s.client.call("session/load", params)) == {"modes", "configOptions"}
        assert "t__add" in s.root.get("tools").names(agent=session_id)
        # The server, and on Linux its supervisor (the marker is on both command lines).
        pids = processes_with(word)
        with trio.fail_after(30):
            assert set(await s.client.call("session/load", params)) == {"modes", "configOptions"}
        assert processes_with(word) == pids
    await gone(processes_with, word)


# A session's MCP servers ask the client about every tool.
ALL = ("*",)


def test_parse_turns_acp_entries_into_servers() -> None:
    """stdio and http entries, ACP names made tool prefixes (repeats numbered), cwd given."""
    servers = parse_mcp_servers(
        {
            "mcpServers": [
                {"name": "My Files", "command": "fs", "args": ["."], "env": []},
                {"type": "stdio", "name": "My Files", "command": "fs2"},
                {
                    "type": "http",
                    "name": "web",
                    "url": "http://127.0.0.1:1/mcp",
                    "headers": [{"name": "Authorization", "value": "Bearer t"}],
                },
            ]
        },
        "/work",
    )
    assert servers == (
        McpServer(
            "My_Files", command="fs", args=(".",), env={}, cwd="/work", roots=("/work",), ask=ALL
        ),
        McpServer("My_Files_2", command="fs2", env={}, cwd="/work", roots=("/work",), ask=ALL),
        McpServer(
            "web",
            url="http://127.0.0.1:1/mcp",
            headers={"Authorization": "Bearer t"},
            roots=("/work",),
            ask=ALL,
        ),
    )
    assert parse_mcp_servers({}, "/work") == ()


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({}, r"'mcpServers' must be an array"),
        (["x"], r"mcpServers\[0\] must be an object"),
        ([{"command": "c"}], r"mcpServers\[0\]\.name must be a string"),
        ([{"name": "n", "command": "c", "args": [1]}], r"\.args must be an array of strings"),
        ([{"name": "n", "command": "c", "env": {}}], r"\.env must be an array of \{name, value"),
        ([{"type": "http", "name": "n", "headers": []}], r"\.url must be a string"),
    ],
)
def test_parse_refuses_bad_entries(entries: object, message: str) -> None:
    """Each malformed entry is an invalid-params error naming where it is."""
    with pytest.raises(RpcError, match=rf"^invalid params: .*{message}"):
        parse_mcp_servers({"mcpServers": entries}, "/work")
