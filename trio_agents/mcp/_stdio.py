"""The stdio transport: a server as a child process, one JSON-RPC message per line.

Rules:
- The same contract as the SDK's ``mcp.stdio_client`` (same parameters, same streams, same
  shutdown), with one difference that is the reason this module exists: reading costs time
  linear in what the server writes. The SDK joins its pending text with every 64 KiB chunk
  and splits the whole again (``(buffer + chunk).split("\\n")``), so one 100 MB answer took
  71 s; :class:`LineFramer` looks at each byte once.
- The child runs in a session (process group) of its own and gets no inherited stdin; its
  stderr goes to ``errlog`` (a file, so a tail of it can name what went wrong).
- A line that is not a JSON-RPC message reaches the session as an exception value (the SDK
  logs and skips it); an empty line is skipped.
- Shutdown runs shielded and bounded, whatever cancelled the caller: stop reading, let the
  writer flush what it accepted (0.5 s), close the child's stdin and give it
  ``PROCESS_TERMINATION_TIMEOUT`` to exit, then SIGTERM its process group, then SIGKILL it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from typing import TextIO, final

import anyio
import mcp.types as mt
import trio
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

log = logging.getLogger("trio_agents.mcp")

#: Seconds the child has to exit once its stdin is closed, and after SIGTERM.
PROCESS_TERMINATION_TIMEOUT = 2.0
_FLUSH_TIMEOUT = 0.5
_CHUNK = 1 << 16


@final
class LineFramer:
    """Splits a byte stream into lines, each byte looked at once.

    Invariant: ``_pending`` holds the chunks of the line not ended yet; none of them holds a
    newline, so a new chunk is searched, never the pending ones again.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """The lines that ``data`` ends (without their newline)."""
        lines: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._pending:
                self._pending.append(bytes(data[start:end]))
                lines.append(b"".join(self._pending))
                self._pending = []
            else:
                lines.append(bytes(data[start:end]))
            start = end + 1
        if start < len(data):
            self._pending.append(bytes(data[start:]))
        return lines


def parse_message(line: bytes) -> SessionMessage | Exception:
    """One line of a server's stdout as a message, or the error that says why it is not one."""
    try:
        return SessionMessage(mt.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        log.warning("an MCP server wrote a line that is not a JSON-RPC message: %s", exc)
        return exc


@contextlib.asynccontextmanager
async def stdio_client(
    server: StdioServerParameters, errlog: TextIO
) -> AsyncIterator[TransportStreams]:
    """Run ``server`` as a child process and yield the streams of its messages.

    Raises:
        OSError: the child could not be started (no such command, say).
    """
    process = await trio.lowlevel.open_process(
        [server.command, *server.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment() | (server.env or {}),
        cwd=server.cwd,
        start_new_session=True,
    )
    # No checkpoint from here to the nursery: a cancel in between would leak the child.
    assert process.stdin is not None
    assert process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    incoming_writer, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = trio.Event()

    async def read() -> None:
        framer = LineFramer()
        async with incoming_writer:
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                while data := await stdout.receive_some(_CHUNK):
                    for line in framer.feed(data):
                        if line.strip():
                            try:
                                await incoming_writer.send(parse_message(line))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return

    async def write() -> None:
        try:
            async with outgoing_reader:
                async for message in outgoing_reader:
                    json = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send_all((json + "\n").encode(server.encoding))
        except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            # The child stopped reading: end the session's reading too, so no request waits
            # for an answer that cannot come.
            await incoming_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        incoming.close()
        outgoing.close()
        with trio.move_on_after(_FLUSH_TIMEOUT):
            await writer_done.wait()
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError):
            await stdin.aclose()
        await _stop(process)
        await stdout.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        nursery.start_soon(write)
        try:
            yield incoming, outgoing
        finally:
            with trio.CancelScope(shield=True):
                await shutdown()
            nursery.cancel_scope.cancel()


async def _stop(process: trio.Process) -> None:
    """Wait for the child to exit; past the grace period, end its process group."""
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            # The leader's pid is the group's id (start_new_session): every descendant
            # that stayed in the group is reached, even after the leader exited.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with trio.move_on_after(PROCESS_TERMINATION_TIMEOUT):
            await process.wait()
            return
    log.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)
