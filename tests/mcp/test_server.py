"""``McpServer``: real MCP servers (written with the SDK, run as child processes) as tools."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.paths import SERVERS
from tests.helpers.support import gone, processes_with, unreaped
from trio_agents.kernel import Context, FiberFailed, FiberState
from trio_agents.mcp import (
    McpConfigError,
    McpServer,
    McpServerError,
    McpServerFailed,
    McpToolsChanged,
)
from trio_agents.model import CallTool, ModelEvent, ModelRequest, Say, ScriptedModel
from trio_agents.session import StopReason, ToolCallEnded, TurnEnded

SERVERS = SERVERS
TOOLS_SERVER = str(SERVERS / "tools_server.py")


def tools_server(name: str = "t", **fields: Any) -> McpServer:
    return McpServer(name, command=sys.executable, args=(TOOLS_SERVER,), **fields)


@attrs.define
class Recording:
    """A model that plays a script and keeps every request it was sent."""

    inner: ScriptedModel
    requests: list[ModelRequest] = attrs.Factory(list)
    name: str = "recording"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        async with contextlib.aclosing(self.inner.stream(request)) as events:
            async for event in events:
                yield event


def registry(root: Context) -> ag.ToolRegistry:
    tools = root.get("tools")
    assert isinstance(tools, ag.ToolRegistry)
    return tools


async def invoke(root: Context, name: str, **arguments: Any) -> ag.ToolResult:
    with trio.fail_after(20):
        return await registry(root).invoke(name, arguments)


def ended(agent: ag.Agent) -> list[ToolCallEnded]:
    return [r for r in agent.session.records if isinstance(r, ToolCallEnded)]


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with ag.open_runtime() as root:
        yield root


async def test_tools_appear_prefixed_with_the_servers_schema(root: Context) -> None:
    """Each server tool is registered as <server>__<tool>, with its description and schema."""
    fiber = await root.plugin(tools_server())
    assert fiber.state is FiberState.ACTIVE
    names = registry(root).names()
    assert {"t__add", "t__fail", "t__block"} <= set(names)
    # A character model APIs refuse ('.') becomes '_'.
    assert "t__dotted_name" in names
    [spec] = [s for s in registry(root).specs() if s.name == "t__add"]
    assert spec.description == "Add two integers."
    assert spec.parameters["type"] == "object"
    assert spec.parameters["required"] == ["a", "b"]
    assert spec.parameters["properties"]["a"]["type"] == "integer"


async def test_a_call_round_trips_through_an_agent_turn(root: Context) -> None:
    """A scripted model calls the MCP tool; the server's answer is the tool result it reads."""
    await root.plugin(tools_server())
    model = Recording(ScriptedModel([[CallTool("t__add", {"a": 2, "b": 40})], [Say("done")]]))
    agent = (await root.agents.create(model=model)).agent
    agent.prompt("add")
    with trio.fail_after(20):
        await agent.when_idle()
    [result] = ended(agent)
    assert (result.name, result.content, result.is_error) == ("t__add", "42", False)
    offered = {s.name: s for s in model.requests[0].tools}
    assert offered["t__add"].parameters["required"] == ["a", "b"]


async def test_a_tool_error_is_an_error_result_not_a_crash(root: Context) -> None:
    """isError from the server reaches the model as an error result; the plugin goes on."""
    fiber = await root.plugin(tools_server())
    result = await invoke(root, "t__fail", reason="no")
    assert result.is_error
    assert "failed on purpose: no" in result.content
    assert (await invoke(root, "t__add", a=1, b=1)).content == "2"
    assert fiber.state is FiberState.ACTIVE


async def test_bad_arguments_are_the_servers_to_refuse(root: Context) -> None:
    """Arguments the server's schema refuses come back as an error result."""
    await root.plugin(tools_server())
    result = await invoke(root, "t__add", a="one", b=1)
    assert result.is_error
    assert re.search(r"\ba\b", result.content)


async def test_other_content_kinds_are_described(root: Context) -> None:
    """Text passes as is; an image is a bracketed note and goes with the result."""
    await root.plugin(tools_server())
    result = await invoke(root, "t__picture")
    assert result.content == "a picture:\n[image: image/png, 5 bytes]"
    assert [image.data for image in result.images] == ["aGVsbG8="]


async def test_list_changed_registers_added_and_removes_dropped_tools(root: Context) -> None:
    """notifications/tools/list_changed re-lists: a new tool appears, a removed one goes."""
    await root.plugin(tools_server())
    changes: list[tuple[str, ...]] = []
    changed = trio.Event()

    def seen(event: McpToolsChanged) -> None:
        changes.append(event.tools)
        changed.set()

    root.on(McpToolsChanged, seen)
    assert (await invoke(root, "t__grow")).content == "grown"
    with trio.fail_after(20):
        await changed.wait()
    assert "t__extra" in changes[-1]
    assert (await invoke(root, "t__extra", text="ab")).content == "abab"
    changed = trio.Event()
    assert (await invoke(root, "t__shrink")).content == "shrunk"
    with trio.fail_after(20):
        await changed.wait()
    assert "t__add" not in registry(root).names()
    result = await invoke(root, "t__add", a=1, b=2)
    assert result.is_error
    assert result.content.startswith("unknown tool 't__add'")


async def test_the_allow_list_and_prefix_choose_what_is_offered(
    root: Context, caplog: pytest.LogCaptureFixture
) -> None:
    """``tools`` keeps only the named server tools (a name the server lacks is a warning);
    ``prefix`` replaces '<name>__'."""
    with caplog.at_level(logging.WARNING, "trio_agents.mcp"):
        await root.plugin(tools_server(tools=("add", "pid", "nope"), prefix="calc_"))
    assert set(registry(root).names()) == {"calc_add", "calc_pid"}
    assert "MCP server 't' does not offer 'nope' (named in its tools allow-list)" in (
        caplog.messages
    )


async def test_the_servers_log_messages_reach_the_logger(root: Context) -> None:
    """A server's error-level log message is a warning of the 'trio_agents.mcp' logger."""
    said = trio.Event()
    records: list[logging.LogRecord] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)
            said.set()

    logger = logging.getLogger("trio_agents.mcp")
    handler = Catch(logging.INFO)
    logger.addHandler(handler)
    try:
        await root.plugin(tools_server())
        assert (await invoke(root, "t__shout", text="disk on fire")).content == "sent"
        with trio.fail_after(20):
            await said.wait()
    finally:
        logger.removeHandler(handler)
    [record] = records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "MCP server 't' says: disk on fire"


async def test_a_server_crash_mid_call_answers_an_error_and_takes_its_tools_down(
    root: Context, caplog: pytest.LogCaptureFixture
) -> None:
    """The server dies during a call (restart off): the call is an error result, the failure is
    an event and an error log line, its tools disappear, its fiber and other tools go on."""
    failures: list[McpServerFailed] = []
    failed = trio.Event()

    def seen(event: McpServerFailed) -> None:
        failures.append(event)
        failed.set()

    root.on(McpServerFailed, seen)
    other = await root.plugin(tools_server("other"))
    fiber = await root.plugin(tools_server(restart=None))
    with caplog.at_level(logging.ERROR, "trio_agents"):
        result = await invoke(root, "t__crash")
        assert result.is_error
        assert "closed its connection during the call to 'crash'" in result.content
        with trio.fail_after(20):
            await failed.wait()
    [line] = caplog.messages
    assert re.match(r"^MCP server 't' closed its connection \(", line)
    assert line.endswith("; it stays down (restart is off): apply the plugin again")
    [failure] = failures
    assert failure.reason.startswith("MCP server 't' closed its connection")
    assert "crashing on purpose" in failure.reason
    assert not [n for n in registry(root).names() if n.startswith("t__")]
    assert fiber.state is FiberState.ACTIVE
    assert other.state is FiberState.ACTIVE
    assert (await invoke(root, "other__add", a=1, b=2)).content == "3"


async def test_cancelling_a_turn_mid_call_cancels_the_call_on_the_server(root: Context) -> None:
    """The turn is cancelled while the server's tool blocks: the SDK's cancellation reaches
    the server (its tool sees the cancel), the turn ends cancelled and the result says the
    call had started."""
    await root.plugin(tools_server())
    agent = (await root.agents.create(model=ScriptedModel([[CallTool("t__block", {})]]))).agent
    agent.prompt("block")
    assert (await invoke(root, "t__wait_started")).content == "started"
    assert agent.cancel()
    with trio.fail_after(5):
        await agent.when_idle()
    assert (await invoke(root, "t__wait_cancelled")).content == "cancelled"
    [result] = ended(agent)
    assert (result.started, result.is_error) == (True, True)
    [turn] = [r for r in agent.session.records if isinstance(r, TurnEnded)]
    assert turn.stop_reason is StopReason.CANCELLED


async def test_a_call_over_its_call_timeout_is_cancelled_on_the_server(root: Context) -> None:
    """``call_timeout``: the call answers an error naming the limit, and the server's tool
    sees the cancellation (the SDK's notifications/cancelled)."""
    await root.plugin(tools_server(call_timeout=0.5))
    result = await invoke(root, "t__block")
    assert result.is_error
    assert result.content == (
        "MCP server 't' did not answer the call to 'block' within 0.5 s (its call_timeout); "
        "the call was cancelled on the server"
    )
    assert (await invoke(root, "t__wait_cancelled")).content == "cancelled"


async def test_roots_are_offered_to_the_server(root: Context, tmp_path: Path) -> None:
    """``roots``: the server's roots/list request is answered with those directories."""
    await root.plugin(tools_server(roots=(str(tmp_path), "/")))
    assert (await invoke(root, "t__roots")).content == f"{tmp_path.as_uri()}\nfile:///"
    with pytest.raises(McpConfigError, match=r"^roots are absolute directory paths"):
        tools_server(roots=("relative",))


async def test_disposing_the_plugin_ends_the_server_process(root: Context) -> None:
    """After dispose, the server's process is gone (no orphan) and so are its tools."""
    fiber = await root.plugin(tools_server())
    pid = int((await invoke(root, "t__pid")).content)
    assert unreaped(pid) == [pid]
    with trio.fail_after(10):
        await fiber.dispose()
    await gone(unreaped, pid)
    assert registry(root).names() == ()


async def test_leaving_the_runtime_ends_the_server_process() -> None:
    """Closing the runtime (as the command does on exit) leaves no server process behind."""
    async with ag.open_runtime() as root:
        await root.plugin(tools_server())
        pid = int((await invoke(root, "t__pid")).content)
    await gone(unreaped, pid)


async def test_a_server_that_is_not_mcp_fails_the_plugin_with_its_stderr(root: Context) -> None:
    """A program that exits at once: ctx.plugin raises, naming the command and its stderr."""
    server = McpServer("bad", command=sys.executable, args=(str(SERVERS / "not_mcp.py"),))
    with pytest.raises(McpServerError, match=r"^MCP server 'bad' failed to start \(") as info:
        await root.plugin(server)
    assert "no MCP here, exiting" in str(info.value)
    assert registry(root).names() == ()


async def test_a_missing_command_fails_the_plugin_clearly(root: Context) -> None:
    """A command that does not exist: the error names it."""
    server = McpServer("gone", command="/nonexistent/mcp-server")
    with pytest.raises(McpServerError, match=r"^MCP server 'gone' could not start: /nonexistent"):
        await root.plugin(server)


async def test_a_server_that_never_answers_times_out_and_is_killed(root: Context) -> None:
    """No answer to initialize within startup_timeout: a clear error, and no process left."""
    script = str(SERVERS / "silent.py")
    server = McpServer("mute", command=sys.executable, args=(script,), startup_timeout=0.5)
    with pytest.raises(McpServerError, match=r"did not answer 'initialize' within 0\.5 s"):
        await root.plugin(server)
    await gone(processes_with, script)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, r"needs exactly one of 'command' \(a stdio server\) and 'url'"),
        ({"command": "x", "url": "http://h/mcp"}, r"needs exactly one of"),
        ({"url": "http://h/mcp", "cwd": "/"}, r"has a 'url', so 'cwd' \(stdio fields\)"),
        ({"command": "x", "headers": {"a": "b"}}, r"so 'headers' \(an HTTP field\)"),
        ({"url": "ftp://h"}, r"'url' must be an http:// or https:// URL"),
        ({"command": "x", "startup_timeout": 0}, r"startup_timeout must be > 0"),
        ({"command": "x", "call_timeout": -1}, r"call_timeout must be > 0"),
        ({"command": "x", "call_timeout": float("nan")}, r"call_timeout must be a number"),
        ({"command": "x", "args": "a b"}, r"not one string"),
    ],
)
def test_bad_descriptions_are_refused(fields: dict[str, Any], message: str) -> None:
    """A description names no transport, two, or a field of the other one: refused."""
    with pytest.raises(McpConfigError, match=message):
        McpServer("s", **fields)


def test_a_bad_name_is_refused() -> None:
    """The name prefixes tool names, so it has their alphabet."""
    with pytest.raises(McpConfigError, match=r"^an MCP server's name is 1-48 letters"):
        McpServer("my server", command="x")


async def test_private_servers_tools_are_seen_by_their_agent_only(root: Context) -> None:
    """With ``agent``, the tools are that agent's alone: another agent neither sees nor calls
    them, and two agents can each have a server of one name."""
    first = (await root.agents.create(session_id="first")).agent
    second = (await root.agents.create(session_id="second")).agent
    await root.plugin(tools_server(agent="first", tools=("add",)))
    await root.plugin(tools_server(agent="second", tools=("pid",)))
    tools = registry(root)
    assert tools.names() == ()
    assert tools.names(agent="first") == ("t__add",)
    assert tools.names(agent="second") == ("t__pid",)
    with trio.fail_after(20):
        assert (await tools.invoke("t__add", {"a": 1, "b": 2}, first)).content == "3"
        refused = await tools.invoke("t__add", {"a": 1, "b": 2}, second)
    assert refused.is_error
    assert refused.content.startswith("unknown tool 't__add'")


async def test_the_sdk_is_the_pinned_version_running_under_trio(root: Context) -> None:
    """The SDK is at least the version pyproject asks for, and its session runs in trio."""
    import importlib.metadata

    import sniffio

    major, minor = (int(p) for p in importlib.metadata.version("mcp").split(".")[:2])
    assert (major, minor) >= (2, 3)
    await root.plugin(tools_server(tools=("add",)))
    assert sniffio.current_async_library() == "trio"
    assert (await invoke(root, "t__add", a=2, b=2)).content == "4"


async def test_a_server_killed_while_idle_is_noticed_at_once(root: Context) -> None:
    """The server process is killed from outside between calls: the plugin notices the end
    of its output at once (no call needed), reports it, its tools go; no fiber fails."""
    failed = trio.Event()
    failures: list[McpServerFailed] = []
    fiber_failed: list[FiberFailed] = []

    def seen(event: McpServerFailed) -> None:
        failures.append(event)
        failed.set()

    root.on(McpServerFailed, seen)
    root.on(FiberFailed, fiber_failed.append)
    fiber = await root.plugin(tools_server(restart=None))
    pid = int((await invoke(root, "t__pid")).content)
    os.kill(pid, signal.SIGKILL)
    with trio.fail_after(20):
        await failed.wait()
    assert fiber.state is FiberState.ACTIVE
    [failure] = failures
    assert re.match(
        r"^MCP server 't' closed its connection \(.*tools_server\.py\)$", failure.reason
    )
    assert registry(root).names() == ()
    assert fiber_failed == []
