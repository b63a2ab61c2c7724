"""The task of an :class:`McpServer` fiber: one connection, and the tools it registers.

Rules:
- Everything the connection starts (the server process and its pipe tasks, the HTTP client,
  the session's dispatcher) lives under this one task, so the fiber owns it: the fiber's
  teardown cancels the task, and the transport's shielded, bounded stop ends the server (on
  Linux under the shell's per-job supervisor, :mod:`._process`: every process it started).
  No process outlives the plugin.
- The registry holds one entry per offered tool, each an entry of the fiber: registered after
  ``initialize``, re-synced on every ``notifications/tools/list_changed`` (added tools are
  registered, removed ones unregistered, changed ones replaced), all gone at teardown.
- Only the first start can fail the task (``ctx.plugin`` raises :class:`McpServerError`).
  After it, the connection ending (the server exited, the endpoint went away) is an
  operational fault, never the fiber's failure: its tools are unregistered, it is logged and
  emitted as :class:`McpServerFailed`, and the server is started again after the backoff of
  its restart policy (:mod:`._restart`), its tools registered again when it is back
  (:class:`McpServerRestarted`). Past the policy's limit, or with no policy, it stays down:
  the task waits, tool-less, for the fiber's teardown. A call in flight when it ended
  answers the model with an error result. A teardown that lands as it ends is no failure.
- A call runs in the calling agent's task; cancelling it (a cancelled turn) makes the SDK send
  ``notifications/cancelled`` to the server (shielded, bounded) and the cancel propagates.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import IO, Any, TextIO, cast, final

import attrs
import mcp.types as mt
import pydantic
import trio
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from ..agent import TOOLS, Tool, ToolContext, ToolResult
from ..kernel import Context, Entry, current_context
from ..shell import supervisor_available
from ._errors import McpServerError
from ._events import McpServerFailed, McpServerRestarted, McpToolsChanged
from ._process import supervised_stdio
from ._restart import Backoff
from ._results import to_result, tool_name
from ._server import McpServer
from ._stdio import stdio_client  # not the SDK's: its reading is quadratic (see ._stdio)
from ._watched import Watched

log = logging.getLogger("trio_agents.mcp")

_CONNECTION_CLOSED = -32000
_REQUEST_TIMEOUT = -32001
_STDERR_TAIL = 2000


@final
@attrs.define(eq=False)
class _Offered:
    """One server tool as registered here."""

    remote: str
    tool: Tool
    entry: Entry
    listed: mt.Tool


@final
class Connection:
    """One connection to one server; :meth:`run` is the fiber's task."""

    def __init__(self, server: McpServer) -> None:
        self._server = server
        self._session: ClientSession | None = None
        self._offered: dict[str, _Offered] = {}
        self._wake = trio.Event()
        self._changed = False
        self._closed = False
        self._stderr: IO[str] | None = None
        # Whether the current connection answered initialize and registered its tools.
        self._up = False
        self._raw_tools: list[Any] | None = None

    # -- the task ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Connect, register, report started, then follow the server until cancelled,
        restarting it under its policy. Raises only before it reported started."""
        ctx = current_context()
        backoff = Backoff(self._server.restart)

        def first() -> None:
            backoff.up(trio.current_time())
            task_status.started()

        reason = await self._once(ctx, first)
        if not self._up:
            raise McpServerError(reason)
        while True:
            # Invariant: a teardown that lands as the connection ends wins: no restart, no
            # failure reported (the end is the teardown's own doing).
            await trio.lowlevel.checkpoint_if_cancelled()
            await self._down(ctx)
            retry_in = backoff.ended(trio.current_time())
            self._report(ctx, reason, backoff.failures, retry_in)
            if retry_in is None:
                await trio.sleep_forever()
            await trio.sleep(retry_in)
            failures = backoff.failures

            def back(failures: int = failures) -> None:
                backoff.up(trio.current_time())
                log.warning("MCP server %r is back (restarted)", self._server.name)
                ctx.emit(McpServerRestarted(server=self._server.name, failures=failures))

            reason = await self._once(ctx, back)

    async def _once(self, ctx: Context, started: Callable[[], None]) -> str:
        """One connection, from start to end: why it ended or could not start (cancellation
        propagates)."""
        self._up = False
        self._closed = False
        self._changed = False
        self._wake = trio.Event()
        with contextlib.ExitStack() as files:
            if self._server.command is not None:
                self._stderr = files.enter_context(
                    tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
                )
            try:
                return await self._serve(ctx, started)
            except Exception as exc:
                # A transport's failure (a refused connection, an HTTP error) comes out of
                # the SDK's task groups; cancellation is not an Exception and passes.
                return self._failed(_leaf(exc))

    async def _serve(self, ctx: Context, started: Callable[[], None]) -> str:
        """Serve until the connection ends; the reason it ended (cancellation propagates)."""
        name = self._server.name
        roots = self._list_roots if self._server.roots is not None else None
        try:
            async with (
                self._transport() as (read, write),
                ClientSession(
                    Watched(read, self._on_closed, self._on_item),
                    write,
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    list_roots_callback=roots,
                ) as session,
            ):
                failure = await self._start(ctx, session)
                if failure is not None:
                    return failure
                self._up = True
                started()
                try:
                    return await self._follow(ctx, session)
                finally:
                    self._session = None
        except OSError as exc:
            if self._up:
                raise
            return f"MCP server {name!r} could not start: {self._what()}: {exc}{self._tail()}"

    async def _down(self, ctx: Context) -> None:
        """The connection is gone: unregister its tools until it is back."""
        offered, self._offered = self._offered, {}
        for entry in offered.values():
            await entry.entry.close()
        if offered:
            ctx.emit(McpToolsChanged(server=self._server.name, tools=()))

    def _report(self, ctx: Context, reason: str, failures: int, retry_in: float | None) -> None:
        """Say that the server failed: a log line and an event, never an exception."""
        policy = self._server.restart
        if retry_in is not None:
            assert policy is not None
            log.warning(
                "%s; restarting it in %g s (restart %d of at most %d in a row)",
                reason,
                retry_in,
                failures,
                policy.max_restarts,
            )
        elif policy is None:
            log.error("%s; it stays down (restart is off): apply the plugin again", reason)
        else:
            log.error(
                "%s; it stays down after %d failures in a row: apply the plugin again",
                reason,
                failures,
            )
        ctx.emit(
            McpServerFailed(
                server=self._server.name, reason=reason, failures=failures, retry_in=retry_in
            )
        )

    async def _start(self, ctx: Context, session: ClientSession) -> str | None:
        server = self._server
        with trio.move_on_after(server.startup_timeout) as startup:
            try:
                await session.initialize()
                self._session = session
                await self._sync(ctx, session)
            except MCPError as exc:
                return (
                    f"MCP server {server.name!r} failed to start ({self._what()}): "
                    f"{self._reason(exc)}{self._tail()}"
                )
            except McpServerError as exc:
                return str(exc)
        if startup.cancelled_caught:
            return (
                f"MCP server {server.name!r} did not answer 'initialize' within "
                f"{server.startup_timeout:g} s ({self._what()}); check that it speaks MCP "
                f"over {server.transport}, or raise startup_timeout{self._tail()}"
            )
        return None

    async def _follow(self, ctx: Context, session: ClientSession) -> str:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            if self._closed:
                return self._ended()
            if self._changed:
                self._changed = False
                try:
                    await self._sync(ctx, session)
                except MCPError as exc:
                    if self._closed or exc.code == _CONNECTION_CLOSED:
                        return self._ended()
                    log.warning(
                        "MCP server %r: re-listing its tools failed: %s", self._server.name, exc
                    )
                except McpServerError as exc:
                    log.warning("%s; its tools stay as they were", exc)

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[TransportStreams]:
        server = self._server
        if server.command is not None:
            assert self._stderr is not None
            if supervisor_available():
                # Like a shell job: every process the server starts ends with it.
                async with supervised_stdio(server, self._stderr) as streams:
                    yield streams
                return
            params = StdioServerParameters(
                command=server.command, args=list(server.args), env=server.env, cwd=server.cwd
            )
            async with stdio_client(params, errlog=cast(TextIO, self._stderr)) as streams:
                yield streams
            return
        assert server.url is not None
        async with (
            create_mcp_http_client(headers=server.headers) as client,
            streamable_http_client(server.url, http_client=client) as streams,
        ):
            yield streams

    # -- the registry --------------------------------------------------------------------------

    async def _sync(self, ctx: Context, session: ClientSession) -> None:
        listed = await _list_tools(session, self._server.name, lambda: self._raw_tools)
        server = self._server
        wanted: dict[str, mt.Tool] = {}
        for remote in listed:
            if server.tools is not None and remote.name not in server.tools:
                continue
            name = tool_name(server.tool_prefix, remote.name)
            if name in wanted:
                log.warning(
                    "MCP server %r: tools %r and %r both become %r here; only the first is offered",
                    server.name,
                    wanted[name].name,
                    remote.name,
                    name,
                )
                continue
            wanted[name] = remote
        if server.tools is not None:
            missing = sorted(set(server.tools) - {t.name for t in listed})
            if missing:
                log.warning(
                    "MCP server %r does not offer %s (named in its tools allow-list)",
                    server.name,
                    ", ".join(repr(m) for m in missing),
                )
        for name, offered in list(self._offered.items()):
            if wanted.get(name) != offered.listed:
                del self._offered[name]
                await offered.entry.close()
        registry = ctx.service(TOOLS)
        for name, remote in wanted.items():
            if name in self._offered:
                continue
            tool = self._tool(name, remote)
            entry = registry.register(tool, agent=server.agent)
            self._offered[name] = _Offered(remote.name, tool, entry, remote)
        ctx.emit(McpToolsChanged(server=server.name, tools=tuple(self._offered)))

    def _tool(self, name: str, remote: mt.Tool) -> Tool:
        schema: dict[str, Any] = dict(remote.input_schema)
        schema.setdefault("type", "object")
        description = remote.description or remote.title or f"the MCP tool {remote.name!r}"

        async def call(call: ToolContext, arguments: Mapping[str, Any]) -> ToolResult:
            return await self._call(remote.name, arguments)

        # The server's word that the tool only reads: it runs in the plan mode, and "*" does
        # not ask about it.
        read_only = remote.annotations is not None and remote.annotations.read_only_hint is True
        return Tool(
            name,
            description,
            None,
            call,
            schema=schema,
            ask=self._server.asks(remote.name, read_only=read_only),
            read_only=read_only,
        )

    async def _call(self, remote: str, arguments: Mapping[str, Any]) -> ToolResult:
        server = self._server.name
        session = self._session
        if session is None:
            await trio.lowlevel.checkpoint()
            return ToolResult(
                f"MCP server {server!r} is not connected (it exited or is stopping)",
                is_error=True,
                started=False,
            )
        try:
            timeout = self._server.call_timeout
            result = await session.call_tool(remote, dict(arguments), read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == _REQUEST_TIMEOUT and timeout is not None:
                return ToolResult(
                    f"MCP server {server!r} did not answer the call to {remote!r} within "
                    f"{timeout:g} s (its call_timeout); the call was cancelled on the server",
                    is_error=True,
                )
            if exc.code == _CONNECTION_CLOSED:
                return ToolResult(
                    f"MCP server {server!r} closed its connection during the call to "
                    f"{remote!r} (the server exited?); its tools are gone until it is back",
                    is_error=True,
                )
            return ToolResult(
                f"MCP server {server!r} refused the call to {remote!r}: {self._reason(exc)}",
                is_error=True,
            )
        return to_result(result)

    # -- what the SDK tells us -----------------------------------------------------------------

    def _on_item(self, item: object) -> None:
        # The last tools/list page as the server wrote it, to name a tool the SDK refuses.
        message = item.message if isinstance(item, SessionMessage) else None
        if isinstance(message, mt.JSONRPCResponse):
            tools = message.result.get("tools")
            if isinstance(tools, list):
                self._raw_tools = tools

    def _on_closed(self) -> None:
        self._closed = True
        self._wake.set()

    async def _on_message(self, message: mt.ServerNotification | Exception) -> None:
        await trio.lowlevel.checkpoint()
        if isinstance(message, mt.ToolListChangedNotification):
            self._changed = True
            self._wake.set()
        elif isinstance(message, Exception):
            log.warning("MCP server %r sent something unreadable: %s", self._server.name, message)

    async def _list_roots(self, context: Any) -> mt.ListRootsResult:
        await trio.lowlevel.checkpoint()
        roots = [
            mt.Root(uri=Path(root).as_uri(), name=Path(root).name or root)  # type: ignore[arg-type]
            for root in self._server.roots or ()
        ]
        return mt.ListRootsResult(roots=roots)

    async def _on_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        await trio.lowlevel.checkpoint()
        level = (
            logging.WARNING
            if params.level in ("error", "critical", "alert", "emergency")
            else logging.INFO
        )
        log.log(level, "MCP server %r says: %s", self._server.name, params.data)

    # -- wording -------------------------------------------------------------------------------

    def _what(self) -> str:
        server = self._server
        if server.command is not None:
            return " ".join([server.command, *server.args])
        return str(server.url)

    def _reason(self, exc: MCPError) -> str:
        if exc.code == _CONNECTION_CLOSED:
            return "the connection closed (the server exited?)"
        return f"{exc.message} (error {exc.code})"

    def _failed(self, exc: BaseException) -> str:
        what = "failed" if self._up else "failed to start"
        return (
            f"MCP server {self._server.name!r} {what} ({self._what()}): "
            f"{type(exc).__name__}: {exc}{self._tail()}"
        )

    def _ended(self) -> str:
        return (
            f"MCP server {self._server.name!r} closed its connection ({self._what()}){self._tail()}"
        )

    def _tail(self) -> str:
        """The end of the server's stderr, as a suffix of a message (stdio servers only)."""
        stderr = self._stderr
        if stderr is None:
            return ""
        fd = stderr.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, _STDERR_TAIL, max(0, size - _STDERR_TAIL))
        text = data.decode("utf-8", errors="replace").strip()
        if not text:
            return ""
        # One line, so a command's error stays one line: the last few lines, joined.
        lines = [line.strip() for line in text.splitlines() if line.strip()][-3:]
        return f"; its stderr ends with: {' | '.join(lines)}"


def _leaf(exc: BaseException) -> BaseException:
    # The first real error inside the task groups' exception groups.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _list_tools(
    session: ClientSession, server: str, raw: Callable[[], list[Any] | None]
) -> list[mt.Tool]:
    tools: list[mt.Tool] = []
    cursor: str | None = None
    while True:
        params = mt.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        try:
            page = await session.list_tools(params=params)
        except pydantic.ValidationError as exc:
            raise McpServerError(_malformed(raw(), server, exc)) from None
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


def _problem(exc: pydantic.ValidationError) -> tuple[int | None, str]:
    """Which tool of a tools/list answer is wrong (its index, if it is one), and how."""
    errors = exc.errors(include_url=False)
    loc = errors[0]["loc"]
    index = loc[1] if len(loc) > 1 and loc[0] == "tools" and isinstance(loc[1], int) else None
    where = ".".join(str(part) for part in (loc[2:] if index is not None else loc))
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return index, f"{where or 'the tool'}: {errors[0]['msg']}{more}"


def _malformed(raw: list[Any] | None, server: str, exc: pydantic.ValidationError) -> str:
    """One line for a tools/list answer the SDK refused: which tool, and what is wrong."""
    index, problem = _problem(exc)
    fix = "the server is refused; fix that definition on the server"
    if index is not None and raw is not None and index < len(raw):
        entry = raw[index]
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str):
            return f"MCP server {server!r} lists a malformed tool {name!r}: {problem}; {fix}"
    return (
        f"MCP server {server!r} answered tools/list with a malformed list: {problem}; "
        f"the server is refused; fix that definition on the server"
    )
