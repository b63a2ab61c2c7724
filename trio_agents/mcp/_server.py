"""``McpServer``: the description of one MCP server, which is also the plugin that runs it.

Rules:
- One server is either a child process spoken to over stdio (``command``, ``args``, ``env``,
  ``cwd``) or a streamable HTTP endpoint (``url``, ``headers``): exactly one of ``command``
  and ``url``. A field of the other transport is refused, so a typo cannot pass unnoticed.
- ``await ctx.plugin(server)`` applies it in a fiber of its own: the fiber's one task holds
  the connection (:mod:`._connection`), and every task the SDK starts lives under it. The
  plugin is ``active`` once the server answered ``initialize`` and its tools are registered;
  a server that cannot start within ``startup_timeout`` makes ``ctx.plugin`` raise
  :class:`McpServerError`. After that, the server going away never fails the fiber: it is
  restarted under ``restart`` (:mod:`._restart`), or stays down with its tools removed.
- The same value structures from a config table (``[[mcp_servers]]``), strictly.
"""

from __future__ import annotations

import math
import os
import shlex
from typing import Any, ClassVar, final

import attrs

from .._base import api_name_refusal
from ..agent import TOOLS, ToolRegistry
from ..kernel import Context, ServiceKey
from ._errors import McpConfigError, McpError
from ._restart import McpRestart
from ._snapshot import McpServerSnapshot


def _check_name(_: object, __: object, name: str) -> None:
    refusal = api_name_refusal(name, "an MCP server's name", 48, "it prefixes its tool names")
    if refusal is not None:
        raise McpConfigError(refusal)


def _check_timeout(_: object, __: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise McpConfigError(f"startup_timeout must be a number of seconds; got {value!r}")
    if value <= 0:
        raise McpConfigError(f"startup_timeout must be > 0 seconds; got {value!r}")


def _check_call_timeout(_: object, __: object, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise McpConfigError(f"call_timeout must be a number of seconds; got {value!r}")
    if value <= 0:
        raise McpConfigError(f"call_timeout must be > 0 seconds; got {value!r}")


def _check_roots(_: object, __: object, roots: tuple[str, ...] | None) -> None:
    for root in roots or ():
        if not os.path.isabs(root):
            raise McpConfigError(f"roots are absolute directory paths; got {root!r}")


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise McpConfigError(f"expected a list of strings, not one string; got {value!r}")
    return tuple(value)


def _optional_strings(value: Any) -> tuple[str, ...] | None:
    return None if value is None else _strings(value)


def _restart(value: Any) -> McpRestart | None:
    if value is True:
        return McpRestart()
    if value is None or value is False:
        return None
    if not isinstance(value, McpRestart):
        raise McpConfigError(
            f"restart is an McpRestart, True (the default policy) or None/False (never "
            f"restarted); got {value!r}"
        )
    return value


@final
@attrs.frozen
class McpServer:
    """An MCP server whose tools agents can call; apply it with ``await ctx.plugin(server)``.

    Args:
        name: the server's name: the plugin's name, and the default prefix of its tools
            (``<name>__<tool>``).
        command: the executable of a stdio server (looked up on ``PATH``).
        args: its arguments.
        env: environment variables for it, on top of the few the SDK passes on (``HOME``,
            ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``).
        cwd: its working directory.
        url: the endpoint of a streamable HTTP server.
        headers: HTTP headers sent with every request (an ``Authorization``, say).
        tools: the server's tools to offer (their names on the server); ``None``, all of them.
        prefix: what goes before each tool's name; ``None`` means ``"<name>__"``.
        startup_timeout: seconds the server has to start and answer ``initialize``.
        roots: absolute directories offered to the server as its MCP roots (what a file
            server may work in); ``None``, no roots capability is announced.
        call_timeout: seconds a tool call may take before it is cancelled on the server and
            answered with an error (default 300); ``None``, no limit (cancelling the turn
            still stops it).
        agent: the id of the one agent that sees these tools; ``None``, every agent.
        ask: the server's tools (their names on the server) whose every call needs approval,
            ``["*"]`` for all of them but those the server marks read-only
            (``readOnlyHint``; see :doc:`/tools`).
        restart: what happens when the server goes away after it started: restarted with
            backoff under this policy (the default: :class:`McpRestart`'s defaults);
            ``None`` or ``False``, it stays down with its tools removed.

    Raises:
        McpConfigError: a field is invalid, or the fields name no transport or two.
    """

    inject: ClassVar[tuple[ServiceKey[ToolRegistry], ...]] = (TOOLS,)

    name: str = attrs.field(validator=_check_name)
    command: str | None = attrs.field(default=None, kw_only=True)
    args: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_strings)
    env: dict[str, str] | None = attrs.field(default=None, kw_only=True, hash=False)
    cwd: str | None = attrs.field(default=None, kw_only=True)
    url: str | None = attrs.field(default=None, kw_only=True)
    headers: dict[str, str] | None = attrs.field(default=None, kw_only=True, hash=False)
    tools: tuple[str, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_optional_strings
    )
    prefix: str | None = attrs.field(default=None, kw_only=True)
    startup_timeout: float = attrs.field(default=30.0, kw_only=True, validator=_check_timeout)
    roots: tuple[str, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_optional_strings, validator=_check_roots
    )
    call_timeout: float | None = attrs.field(
        default=300.0, kw_only=True, validator=_check_call_timeout
    )
    agent: str | None = attrs.field(default=None, kw_only=True)
    ask: tuple[str, ...] = attrs.field(default=(), kw_only=True, converter=_strings)
    restart: McpRestart | None = attrs.field(
        default=attrs.Factory(McpRestart), kw_only=True, converter=_restart
    )

    def asks(self, tool: str, *, read_only: bool = False) -> bool:
        """Whether calls of the server's tool ``tool`` need approval: named in ``ask``, or
        ``ask`` is ``["*"]`` and the server does not mark the tool ``read_only``."""
        return tool in self.ask or ("*" in self.ask and not read_only)

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise McpConfigError(
                f"MCP server {self.name!r} needs exactly one of 'command' (a stdio server) "
                f"and 'url' (a streamable HTTP server)"
            )
        if self.command is not None and not self.command:
            raise McpConfigError(f"MCP server {self.name!r}: 'command' is empty")
        stdio_only = [f for f in ("env", "cwd") if getattr(self, f) is not None]
        if self.url is not None and (self.args or stdio_only):
            fields = ", ".join(repr(f) for f in (["args"] if self.args else []) + stdio_only)
            raise McpConfigError(
                f"MCP server {self.name!r} has a 'url', so {fields} (stdio fields) do not apply"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise McpConfigError(
                f"MCP server {self.name!r}: 'url' must be an http:// or https:// URL; "
                f"got {self.url!r}"
            )
        if self.command is not None and self.headers is not None:
            raise McpConfigError(
                f"MCP server {self.name!r} has a 'command', so 'headers' (an HTTP field) "
                f"does not apply"
            )

    @property
    def tool_prefix(self) -> str:
        """What goes before each of its tools' names."""
        return self.prefix if self.prefix is not None else f"{self.name}__"

    @property
    def transport(self) -> str:
        """``"stdio"`` or ``"http"``."""
        return "stdio" if self.command is not None else "http"

    def describe(self, now: float) -> McpServerSnapshot:
        """Which server this is, for a snapshot of the ownership tree."""
        target = shlex.join([self.command, *self.args]) if self.command else self.url or ""
        return McpServerSnapshot(self.name, self.transport, target, self.agent)

    async def apply(self, ctx: Context, config: None) -> None:
        """Connect, register the server's tools, and follow it while the fiber is loaded."""
        try:
            from ._connection import Connection
        except ImportError as exc:
            raise McpError(
                f"MCP server {self.name!r} needs the MCP SDK, which is not installed "
                f"({exc}); install the 'mcp' extra (from a checkout: pip install -e '.[mcp]')"
            ) from exc
        await ctx.start(Connection(self).run)
