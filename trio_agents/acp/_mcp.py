"""The ``mcpServers`` of ``session/new`` and ``session/load``: parsed here, run per session.

Rules:
- The entries are checked before anything starts: each is a stdio server (``command``,
  ``args``, ``env`` as ``[{name, value}]``; ``type`` absent or ``"stdio"``) or, since the
  bridge announces ``mcpCapabilities.http``, an HTTP server (``type: "http"``, ``url``,
  ``headers`` as ``[{name, value}]``). ``sse`` is not announced and so refused. A bad entry is
  an invalid-params error naming it, and no session is created.
- ACP names are for humans ("My Files"); a tool prefix is not, so a name becomes
  ``[A-Za-z0-9_-]`` (others ``_``), and a repeated one gets ``_2``, ``_3``.
- Every tool of these servers needs approval (``ask=["*"]``): the client is asked before each
  call, as for ``bash`` (the editor's permission prompt decides).
- The servers belong to the session's agent: their tools are private to it (other sessions
  neither see nor call them, and may have servers of the same names), stdio servers run in
  the session's ``cwd``, which is also every server's one MCP root, and the agent's teardown
  disposes them. They start concurrently; one that cannot start fails the request (the first
  such in the request's order is named), and the session is disposed with what did start.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from ..kernel import Context, FiberClosedError
from ..mcp import McpConfigError, McpError, McpServer
from ._jsonrpc import ErrorCode, RpcError

log = logging.getLogger("trio_agents.acp")

_REFUSED = re.compile(r"[^A-Za-z0-9_-]")
#: A session's MCP tools change the world as far as the bridge knows: the client is asked.
_EVERY_TOOL = ("*",)


def _invalid(message: str) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {message}")


def _pairs(entry: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    items = entry.get(key, [])
    if not isinstance(items, list):
        raise _invalid(f"{where}.{key} must be an array of {{name, value}} objects")
    pairs: dict[str, str] = {}
    for index, item in enumerate(items):
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            raise _invalid(f"{where}.{key}[{index}] must be an object with string name and value")
        pairs[item["name"]] = item["value"]
    return pairs


def _name(raw: str, taken: set[str]) -> str:
    base = _REFUSED.sub("_", raw)[:44] or "mcp"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def _server(entry: object, where: str, taken: set[str], cwd: str) -> McpServer:
    if not isinstance(entry, Mapping):
        raise _invalid(f"{where} must be an object")
    raw_name = entry.get("name")
    if not isinstance(raw_name, str):
        raise _invalid(f"{where}.name must be a string")
    kind = entry.get("type", "stdio")
    try:
        if kind == "stdio":
            command, args = entry.get("command"), entry.get("args", [])
            if not isinstance(command, str) or not command:
                raise _invalid(f"{where}.command must be a non-empty string")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise _invalid(f"{where}.args must be an array of strings")
            env = _pairs(entry, "env", where)
            return McpServer(
                _name(raw_name, taken),
                command=command,
                args=tuple(args),
                env=env,
                cwd=cwd,
                roots=(cwd,),
                ask=_EVERY_TOOL,
            )
        if kind == "http":
            url = entry.get("url")
            if not isinstance(url, str):
                raise _invalid(f"{where}.url must be a string")
            headers = _pairs(entry, "headers", where)
            return McpServer(
                _name(raw_name, taken), url=url, headers=headers, roots=(cwd,), ask=_EVERY_TOOL
            )
    except McpConfigError as exc:
        raise _invalid(f"{where}: {exc}") from None
    raise _invalid(
        f"{where}.type {kind!r} is not supported (this agent announces stdio and http MCP "
        f"servers, not sse)"
    )


def parse_mcp_servers(params: Mapping[str, Any], cwd: str) -> tuple[McpServer, ...]:
    """The servers a request names, not yet tied to an agent.

    Raises:
        RpcError: invalid params, naming the entry and what is wrong with it.
    """
    entries = params.get("mcpServers")
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise _invalid("'mcpServers' must be an array")
    taken: set[str] = set()
    return tuple(
        _server(entry, f"mcpServers[{index}]", taken, cwd) for index, entry in enumerate(entries)
    )


async def start_mcp_servers(
    host: Context, agents: Any, agent: Any, servers: Sequence[McpServer]
) -> None:
    """Start the servers for ``agent`` alone, all at once, each owned by the agent (its
    teardown disposes them).

    Raises:
        RpcError: a server could not start (the first one named; those that started stay
            owned by the agent, whose disposal ends them).
    """
    scope = agents.scope_of(agent)
    failures: list[tuple[McpServer, McpError]] = []

    async def start(server: McpServer) -> None:
        try:
            fiber = await host.plugin(attrs.evolve(server, agent=agent.id))
        except McpError as exc:
            failures.append((server, exc))
            return
        try:
            scope.defer(fiber.dispose)
        except FiberClosedError:
            # The agent is being torn down already: nobody is left to use the server.
            await fiber.dispose()

    async with trio.open_nursery() as nursery:
        for server in servers:
            nursery.start_soon(start, server)
    if failures:
        order = {server.name: index for index, server in enumerate(servers)}
        failures.sort(key=lambda failure: order[failure[0].name])
        server, exc = failures[0]
        for _, error in failures[1:]:
            # The answer names the first; the others' failures would otherwise go unseen.
            log.error("%s (the answer names MCP server %r)", error, server.name)
        raise RpcError(ErrorCode.INTERNAL_ERROR, str(exc), {"server": server.name})
