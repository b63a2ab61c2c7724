"""A stdio MCP server run like a shell job: under the per-job supervisor (Linux).

Rules:
- The server's command runs under ``trio_agents.shell.SupervisedChild``: a child subreaper
  that forks it as a process-group leader with a parent-death signal, and ends every
  descendant when the owner says so or is gone (even killed with SIGKILL: its control socket
  closes). So every process a server starts ends with the server's plugin.
- The transport is the SDK's stdio protocol: one JSON-RPC message per line each way, the
  server's stderr to the caller's file, the environment the SDK would give
  (``get_default_environment()`` and the server's ``env``).
- Stopping (shielded, every wait bounded by ``GRACE``): close the server's stdin, wait;
  SIGTERM to every process of the server, wait; SIGKILL, wait; then the supervisor is killed
  outright (``force``). Once the server has exited, what it left behind gets the same SIGTERM,
  ``GRACE``, SIGKILL. A server that ignores end of file and SIGTERM is killed after
  ``2 * GRACE``.
- Reading stdout is linear in its size (a line is joined once, when its newline comes), and
  after the session closed it goes on discarding, so a server is never blocked writing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import IO

import anyio
import trio
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ..shell import SupervisedChild
from ._server import McpServer
from ._stdio import LineFramer, parse_message

#: Seconds between the steps of a server's stop (end of file, SIGTERM, SIGKILL).
GRACE = 2.0
_READ_SIZE = 65536


def _argv(server: McpServer, env: dict[str, str]) -> list[str]:
    assert server.command is not None
    found = shutil.which(server.command, path=env.get("PATH"))
    if found is None:
        # What the SDK's spawn said for it: the command is named, no supervisor involved.
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), server.command)
    return [found, *server.args]


@contextlib.asynccontextmanager
async def supervised_stdio(server: McpServer, errlog: IO[str]) -> AsyncIterator[TransportStreams]:
    """Start ``server``'s command under the supervisor; its read and write streams."""
    env = get_default_environment() | dict(server.env or {})
    child = await SupervisedChild.spawn(
        _argv(server, env),
        None if server.cwd is None else str(server.cwd),
        env,
        GRACE,
        stdin=subprocess.PIPE,
        stderr=errlog.fileno(),
    )
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read, child, read_in)
            nursery.start_soon(_write, child, write_out, read_in)
            try:
                yield read_out, write_in
            finally:
                with trio.CancelScope(shield=True):
                    await _stop(child)
                nursery.cancel_scope.cancel()
    finally:
        for stream in (read_in, read_out, write_in, write_out):
            stream.close()


async def _read(
    child: SupervisedChild, out: anyio.abc.ObjectSendStream[SessionMessage | Exception]
) -> None:
    """Lines of the server's stdout to ``out``; then discard the rest until end of file."""
    framer = LineFramer()
    listening = True
    async with out:
        while True:
            try:
                data = await child.stdout.receive_some(_READ_SIZE)
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                return
            if not data:
                return
            if not listening:
                continue
            for line in framer.feed(data):
                if not line.strip():
                    continue
                try:
                    await out.send(parse_message(line))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    listening = False
                    break


async def _write(
    child: SupervisedChild,
    messages: anyio.abc.ObjectReceiveStream[SessionMessage],
    read_in: anyio.abc.ObjectSendStream[SessionMessage | Exception],
) -> None:
    """Messages from the session to the server's stdin, one line each."""
    stdin = child.stdin
    assert stdin is not None
    try:
        async with messages:
            async for message in messages:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send_all(text.encode() + b"\n")
    except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
        # The server no longer reads: the session sees the connection end.
        await read_in.aclose()


async def _stop(child: SupervisedChild) -> None:
    """End the server and everything it started (see the module's rules)."""
    if child.stdin is not None:
        with contextlib.suppress(trio.BusyResourceError, OSError):
            await child.stdin.aclose()
    for step in (None, signal.SIGTERM, signal.SIGKILL):
        if step is not None:
            child.signal(step)
        with trio.move_on_after(GRACE):
            await child.wait()
        if child.returncode is not None:
            break
    else:
        await child.force()
        await child.wait()
    for step in (signal.SIGTERM, signal.SIGKILL):
        if not child.signal(step):
            break
        with trio.move_on_after(GRACE):
            await child.settle()
            break
    await child.aclose()
