"""Worker processes of the PostgreSQL tests, driven line by line over their stdin and stdout.

Imported as ``from tests.helpers.pg_workers import ...``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from tests.helpers.support import TRIO_AGENTS


class Worker:
    """A worker process (``pg_worker.py``, ``pg_lease_worker.py``), its stdin and the lines
    of its stdout."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self._buffer = b""

    @classmethod
    async def start(cls, script: Path, dsn: str, mode: str, lease: float) -> Worker:
        """Run ``script DSN s MODE LEASE`` (a worker of session ``s``)."""
        process = await trio.lowlevel.open_process(
            [sys.executable, str(script), dsn, "s", mode, str(lease)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        return cls(process)

    @classmethod
    async def command(cls, dsn: str, *options: str) -> Worker:
        """Run the installed ``trio-agents worker --store DSN OPTIONS``; its lines are its
        stdout and stderr together (the command says on stderr when it serves and drains)."""
        process = await trio.lowlevel.open_process(
            [str(TRIO_AGENTS), "worker", "--store", dsn, *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return cls(process)

    async def line(self) -> str:
        assert self.process.stdout is not None
        with trio.fail_after(60):
            while b"\n" not in self._buffer:
                data = await self.process.stdout.receive_some(1 << 16)
                if not data:
                    raise EOFError(f"the worker exited ({self.process.returncode}) before a line")
                self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    async def until(self, prefix: str) -> list[str]:
        """The lines up to and including the first that starts with ``prefix``."""
        seen = [await self.line()]
        while not seen[-1].startswith(prefix):
            seen.append(await self.line())
        return seen

    async def send(self, text: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(text.encode() + b"\n")

    async def end(self) -> int:
        """Close its stdin (it ends its runtime) and wait for its exit status."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        with trio.fail_after(60):
            return await self.process.wait()


@asynccontextmanager
async def workers() -> AsyncIterator[list[Worker]]:
    """Workers started in the block are killed (and reaped) after it, whatever happened."""
    started: list[Worker] = []
    try:
        yield started
    finally:
        for worker in started:
            if worker.process.returncode is None:
                worker.process.send_signal(signal.SIGCONT)
                worker.process.kill()
            with trio.CancelScope(shield=True):
                await worker.process.wait()
