"""The installed ``trio-agents`` command as a child process with pipes, for the tests that
signal it, close its input or kill it.

Imported as ``from tests.helpers.command_support import ...``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import IO, Any

from tests.helpers.supervision_support import DEADLINE
from tests.helpers.support import TRIO_AGENTS


def env_for(home: Path) -> dict[str, str]:
    """The environment of a command whose sessions go under ``home``, without colour."""
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    return env


class Command:
    """The installed command with pipes; stderr collected to a file."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.stderr_path = tmp_path / "stderr"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [str(TRIO_AGENTS), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env_for(tmp_path),
        )

    @property
    def stdin(self) -> IO[bytes]:
        assert self.process.stdin is not None
        return self.process.stdin

    @property
    def stdout(self) -> IO[bytes]:
        assert self.process.stdout is not None
        return self.process.stdout

    def wait(self, timeout: float = DEADLINE) -> int:
        return self.process.wait(timeout=timeout)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()


def acp_prompt(command: Command, text: str) -> None:
    """Initialize, open a session and send ``text`` as a prompt (its answer is not awaited)."""

    def send(message: dict[str, Any]) -> None:
        command.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        command.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        while True:
            message: dict[str, Any] = json.loads(command.stdout.readline())
            if message.get("id") == request_id and "method" not in message:
                return message

    send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    answer(1)
    send({"id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
    session_id = answer(2)["result"]["sessionId"]
    prompt = [{"type": "text", "text": text}]
    params = {"sessionId": session_id, "prompt": prompt}
    send({"id": 3, "method": "session/prompt", "params": params})
