"""Helpers shared by the test modules: plugin fakes, the installed command, /proc scans, FIFOs.

Imported as ``from support import ...`` (like ``strategies``): pytest's default ``prepend``
import mode puts this directory, which has no ``__init__.py``, on ``sys.path``.
Fixtures live in ``conftest.py``; everything here is a plain function or class.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

import trio_agents.agent as ag
from trio_agents.kernel import Context, Fiber, FiberState
from trio_agents.shell import LocalShellExecutor

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


def _live_processes() -> Iterator[tuple[int, list[str]]]:
    """Every live (non-zombie) process: its pid, and the fields of its stat after the name."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in ("Z", "X"):
            yield int(entry), fields


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


def shell_of(root: Context) -> LocalShellExecutor:
    """The ``shell`` service of ``root``, checked to be the local one."""
    shell = root.get("shell")
    assert isinstance(shell, LocalShellExecutor)
    return shell


def unreaped(pid: int) -> list[int]:
    """``[pid]`` while the process has a /proc entry (running, or a zombie not yet reaped)."""
    return [pid] if os.path.exists(f"/proc/{pid}") else []
