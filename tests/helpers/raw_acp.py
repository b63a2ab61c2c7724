"""A raw-bytes client for the installed ``trio-agents acp`` command: bytes in, frames out."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from tests.helpers.support import TRIO_AGENTS
from trio_agents.acp._framing import LineFramer, Oversized

# Safety net only: every wait ends on a frame or on EOF.
LIMIT = 30


class Raw:
    """Bytes to the command's stdin, frames from its stdout."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self._framer = LineFramer(64 * 1024 * 1024)
        self._frames: list[bytes] = []

    async def write(self, data: bytes) -> None:
        await self.stdin.send_all(data)

    async def send(self, message: object) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    async def next(self) -> dict[str, Any]:
        while not self._frames:
            data = await self.stdout.receive_some(1 << 20)
            if not data:
                raise EOFError
            for frame in self._framer.feed(data):
                assert not isinstance(frame, Oversized)
                self._frames.append(frame)
        frame = self._frames.pop(0)
        message: dict[str, Any] = json.loads(frame)  # stdout holds nothing but frames
        assert message["jsonrpc"] == "2.0"
        return message

    async def answer_to(self, request_id: object) -> dict[str, Any]:
        while True:
            message = await self.next()
            if "method" not in message:
                assert message["id"] == request_id
                assert type(message["id"]) is type(request_id)
                return message

    async def initialize(self, request_id: object = 1) -> dict[str, Any]:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "initialize",
                "params": {"protocolVersion": 1},
            }
        )
        return await self.answer_to(request_id)

    async def new_session(self, request_id: object) -> dict[str, Any]:
        """session/new in /tmp; the answer to it (the commands update after it is read)."""
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "session/new",
                "params": {"cwd": "/tmp", "mcpServers": []},
            }
        )
        answer = await self.answer_to(request_id)
        if "result" in answer:
            commands = await self.next()
            assert commands["params"]["update"]["sessionUpdate"] == "available_commands_update"
        return answer


@asynccontextmanager
async def command(*args: str) -> AsyncIterator[Raw]:
    with trio.fail_after(LIMIT):
        process = await trio.lowlevel.open_process(
            [str(TRIO_AGENTS), "acp", "--store", "memory", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            raw = Raw(process)
            yield raw
            await raw.stdin.aclose()
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await raw.stdin.aclose()
            await raw.stdout.aclose()
