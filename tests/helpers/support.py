"""Helpers shared by the test modules: plugin fakes, the installed command, /proc scans, FIFOs,
a loopback HTTP server for the model providers.

Imported as ``from tests.helpers.support import ...``: the suite is a package (``tests/``, one
folder per layer of the code, helpers in ``tests/helpers/``), and pytest's default ``prepend``
import mode puts the repository's root on ``sys.path``.
Fixtures live in ``conftest.py``; everything here is a plain function or class.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import attrs
import httpx
import trio

import trio_agents.agent as ag
from trio_agents.agent._history import History
from trio_agents.kernel import Context, Fiber, FiberState
from trio_agents.model._messages import ChatMessage
from trio_agents.session import Record
from trio_agents.shell._local import LocalShellExecutor
from trio_agents.shell._output import OutputBuffer

T = TypeVar("T")

# The ``trio-agents`` console script installed next to this interpreter (the real entry point).
TRIO_AGENTS = Path(sys.executable).parent / "trio-agents"


# -- plugin fakes ----------------------------------------------------------------------------------

Apply = Callable[[Context, Any], Awaitable[None]]


@attrs.define
class P:
    """A plugin built from a function."""

    name: str
    fn: Apply
    inject: tuple[str, ...] = ()

    async def apply(self, ctx: Context, config: Any) -> None:
        await self.fn(ctx, config)


class Tools:
    """Registers the given tools on its own fiber."""

    inject = ("tools",)

    def __init__(self, *tools: ag.Tool, name: str = "test-tools") -> None:
        self.name = name
        self._tools = tools

    async def apply(self, ctx: Context, config: None) -> None:
        for tool in self._tools:
            ctx.tools.register(tool)


def state_of(fiber: Fiber) -> FiberState:
    """The fiber's state, read afresh (mypy would otherwise narrow it across awaits)."""
    return fiber.state


@asynccontextmanager
async def rec(log: list[str], name: str) -> AsyncIterator[str]:
    """A context manager that logs ``enter NAME`` and ``exit NAME``."""
    log.append(f"enter {name}")
    try:
        yield name
    finally:
        log.append(f"exit {name}")


# -- processes -------------------------------------------------------------------------------------


def marker() -> str:
    """A unique word to put in a command line, to find its processes again."""
    return f"marker-{uuid.uuid4().hex}"


def _processes() -> Iterator[tuple[int, list[str]]]:
    """Every process, zombies too: its pid, and the fields of its stat after the name."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        yield int(entry), fields


def _live_processes() -> Iterator[tuple[int, list[str]]]:
    """Every live (non-zombie) process, as :func:`_processes`."""
    return ((pid, fields) for pid, fields in _processes() if fields[0] not in ("Z", "X"))


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, zombies not yet reaped included."""
    return [child for child, fields in _processes() if int(fields[1]) == pid]


def processes_with(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for pid, _ in _live_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(pid)
    return found


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``."""
    return [pid for pid, fields in _live_processes() if int(fields[2]) == pgid]


async def gone(find: Callable[[T], list[int]], what: T) -> None:
    """Wait until ``find(what)`` finds nothing.

    A process killed with its group is dead for every purpose once kill() returned, but the
    kernel may take a moment to turn a grandchild (not ours to reap) into a zombie.
    """
    with trio.fail_after(10):
        # No event exists for "the kernel finished an exit we do not reap": poll.
        while find(what):  # noqa: ASYNC110
            await trio.sleep(0.01)


async def read_fifo(path: Path) -> str:
    """One line from the FIFO ``path`` (blocks, in a thread, until a writer opens it)."""

    def read() -> str:
        with open(path) as f:
            return f.readline()

    return await trio.to_thread.run_sync(read, abandon_on_cancel=True)


async def write_fifo(path: Path, text: str) -> None:
    """Write ``text`` to the FIFO ``path`` (blocks, in a thread, until a reader opens it)."""

    def write() -> None:
        with open(path, "w") as f:
            f.write(text)

    await trio.to_thread.run_sync(write, abandon_on_cancel=True)


class CountingBuffer:
    """An :class:`OutputBuffer` that also counts every byte fed (what a test sums drops to)."""

    def __init__(self, cap: int) -> None:
        self.buffer = OutputBuffer(cap)
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        self.buffer.feed(data)

    def take(self, *, final: bool = False) -> tuple[str, int]:
        return self.buffer.take(final=final)


def shell_of(root: Context) -> LocalShellExecutor:
    """The ``shell`` service of ``root``, checked to be the local one."""
    shell = root.get("shell")
    assert isinstance(shell, LocalShellExecutor)
    return shell


# -- a job's process family (the shell, a setsid sleep, a double-forked sleep, a sleep) ------


def family(directory: Path) -> str:
    """A command that starts a ``setsid`` sleep, a double-forked (orphaned) sleep and a plain
    background sleep, writes their pids and its own, and waits."""
    d = directory
    return (
        f"setsid sleep 1000 & echo $! > {d}/setsid; "
        f"(sleep 1000 & echo $! > {d}/double); "
        f"sleep 1000 & echo $! > {d}/sleep; "
        f"echo $$ > {d}/sh.tmp; mv {d}/sh.tmp {d}/sh; wait"
    )


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` that exist and are not zombies."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(pid)
    return found


def unreaped(pid: int) -> list[int]:
    """``[pid]`` while the process has a /proc entry (running, or a zombie not yet reaped)."""
    return [pid] if os.path.exists(f"/proc/{pid}") else []


# -- a loopback HTTP server for the model providers ------------------------------------------------


@attrs.frozen
class Reply:
    """One scripted HTTP response: ``chunks``, then ``repeat`` sent forever if given (every
    ``every`` seconds), until the client closes the connection."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    chunks: Sequence[bytes] = ()
    hang: bool = False  # after the chunks, keep the connection open until the client closes
    cut: bool = False  # close the connection without ending the chunked body
    repeat: bytes = b""
    every: float = 0.0


@attrs.define
class Seen:
    """One request the server received, and how many body bytes it sent back."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float
    sent: int = 0
    closed: trio.Event = attrs.Factory(trio.Event)


@attrs.define
class FakeServer:
    """A raw-socket HTTP/1.1 server playing scripted replies (chunked bodies, one request per
    connection), run in-process under trio. ``prefix`` is the API root's path (``/v1``)."""

    prefix: str = ""
    replies: deque[Reply] = attrs.Factory(deque)
    seen: list[Seen] = attrs.Factory(list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    async def handle(self, stream: trio.SocketStream) -> None:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some()
            if not data:
                return
            buffer += data
        head, _, rest = buffer.partition(b"\r\n\r\n")
        request_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            rest += await stream.receive_some()
        seen = Seen(request_line.split()[1], headers, json.loads(rest), trio.current_time())
        self.seen.append(seen)
        reply = self.replies.popleft()
        try:
            await self._respond(stream, reply, seen)
            if reply.hang:
                while await stream.receive_some():
                    pass
        except trio.BrokenResourceError:
            pass
        finally:
            seen.closed.set()
            await stream.aclose()

    @staticmethod
    async def _respond(stream: trio.SocketStream, reply: Reply, seen: Seen) -> None:
        head = [f"HTTP/1.1 {reply.status} X", "Transfer-Encoding: chunked", "Connection: close"]
        kind = "text/event-stream" if reply.status == 200 else "application/json"
        head.append(f"Content-Type: {kind}")
        head += [f"{k}: {v}" for k, v in reply.headers]
        await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode())

        async def send(chunk: bytes) -> None:
            await stream.send_all(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            seen.sent += len(chunk)

        for chunk in reply.chunks:
            await send(chunk)
        while reply.repeat:
            await trio.sleep(reply.every)
            await send(reply.repeat)
        if not (reply.cut or reply.hang):
            await stream.send_all(b"0\r\n\r\n")


async def serve(nursery: trio.Nursery, prefix: str = "") -> FakeServer:
    """A :class:`FakeServer` listening on a free port of 127.0.0.1, served in ``nursery``."""
    fake = FakeServer(prefix)
    listeners = await nursery.start(partial(trio.serve_tcp, fake.handle, 0, host="127.0.0.1"))
    fake.port = listeners[0].socket.getsockname()[1]
    return fake


@attrs.define(eq=False)
class _Counted(httpx.AsyncByteStream):
    inner: httpx.AsyncByteStream
    transport: CountingTransport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self.inner:
            self.transport.received += len(part)
            yield part

    async def aclose(self) -> None:
        await self.inner.aclose()


class CountingTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, counting the body bytes the client took from the network."""

    def __init__(self) -> None:
        super().__init__()
        self.received = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Counted(response.stream, self),
            extensions=response.extensions,
        )


def conversation(records: Iterable[Record], instructions: str | None = None) -> list[ChatMessage]:
    """The chat history a model request would carry for ``records``, folded at once."""
    history = History(instructions)
    history.fold(records)
    return list(history.messages())


# -- the suite's guards ------------------------------------------------------------------------

#: The bus logs every contained listener failure with this message before it emits
#: ``ListenerFailed`` (trio_agents/kernel/_bus.py); tests/project/test_suite_guards.py pins that
#: the guard below still sees one, so a new wording cannot switch the guard off unnoticed.
LISTENER_FAILED_MESSAGE = "listener %s failed on %s"


class ListenerFailures(logging.Handler):
    """Collects the listener failures the bus reports while a test runs."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == LISTENER_FAILED_MESSAGE:
            self.records.append(record)

    def describe(self) -> str:
        lines = []
        for record in self.records:
            exc = record.exc_info[1] if record.exc_info else None
            lines.append(f"{record.getMessage()}: {type(exc).__name__}: {exc}")
        return "; ".join(lines)
