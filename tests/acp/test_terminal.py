"""End to end: ``bash`` over ACP runs in the client's terminal when the client offers
``terminal`` (the real ``agent-client-protocol`` client, on asyncio, implementing
``terminal/*`` with real subprocesses), and locally when it does not.

Each test is a sync function running its own ``asyncio.run``: the client is not trio code.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from tests.helpers.support import TRIO_AGENTS

acp = pytest.importorskip("acp")

from acp import text_block  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome,
    ClientCapabilities,
    CreateTerminalResponse,
    PermissionOption,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

T = TypeVar("T")
# Safety net only: every wait below ends on an event, this bounds a broken run.
LIMIT = 30.0


class _Term:
    """One terminal of the client: a real process group and its merged output."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.output = b""
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk

    def kill(self) -> None:
        if self.process.returncode is None:
            os.killpg(self.process.pid, signal.SIGKILL)

    async def status(self) -> tuple[int | None, str | None]:
        code = await self.process.wait()
        await self.reader
        return (code, None) if code >= 0 else (None, signal.Signals(-code).name)


class TerminalClient:
    """A client that implements ``terminal/*`` with subprocesses, allows every call, records
    the updates and counts the terminals it created and released."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.terminals: dict[str, _Term] = {}
        self.created: list[tuple[str, list[str], str | None]] = []
        self.released: list[str] = []
        self.killed: list[str] = []
        self.changed = asyncio.Event()

    def _changed(self) -> None:
        self.changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self.changed.clear()
            await self.changed.wait()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        chosen = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self._changed()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: Any = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        process = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal_id = f"term-{len(self.created) + 1}"
        self.terminals[terminal_id] = _Term(process)
        self.created.append((command, list(args or []), cwd))
        self._changed()
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        term = self.terminals[terminal_id]
        exit_status = None
        if term.process.returncode is not None:
            code, name = await term.status()
            exit_status = TerminalExitStatus(exit_code=code, signal=name)
        return TerminalOutputResponse(
            output=term.output.decode(), truncated=False, exit_status=exit_status
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        code, name = await self.terminals[terminal_id].status()
        return WaitForTerminalExitResponse(exit_code=code, signal=name)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        self.terminals[terminal_id].kill()
        self.killed.append(terminal_id)
        self._changed()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        # As the spec says: release kills a command still running.
        term = self.terminals.pop(terminal_id)
        term.kill()
        await term.status()
        self.released.append(terminal_id)
        self._changed()

    def tool_updates(self) -> list[Any]:
        return [u for u in self.updates if u.session_update == "tool_call_update"]


@asynccontextmanager
async def agent(client: TerminalClient, *, terminal: bool) -> AsyncIterator[Any]:
    async with acp.spawn_agent_process(
        client,
        str(TRIO_AGENTS),
        "acp",
        "--store",
        "memory",
        transport_kwargs={"stderr": None},
        env=dict(os.environ),
    ) as (conn, _):
        await conn.initialize(
            protocol_version=1, client_capabilities=ClientCapabilities(terminal=terminal)
        )
        yield conn


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), LIMIT)

    return asyncio.run(bounded())


def test_bash_runs_in_the_clients_terminal_and_releases_it() -> None:
    """With terminal offered, bash creates a client terminal (/bin/sh -c in the session's
    cwd), embeds it in the call, reads its output for the model and releases it; a
    background job stays local."""

    async def main() -> None:
        client = TerminalClient()
        async with agent(client, terminal=True) as conn:
            cwd = os.getcwd()
            session = await conn.new_session(cwd=cwd, mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id,
                prompt=[text_block("!bash echo from-the-terminal; exit 3")],
            )
            assert response.stop_reason == "end_turn"
            await client.wait_for(lambda: len(client.released) == 1)
            # A background job stays with the local executor, which owns it.
            args = '{"command": "echo bg", "run_in_background": true}'
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block(f"!tool bash {args}")]
            )
            assert response.stop_reason == "end_turn"
        assert client.tool_updates()[-1].raw_output["content"].startswith("bash-")
        assert client.created == [("/bin/sh", ["-c", "echo from-the-terminal; exit 3"], cwd)]
        assert client.released == ["term-1"]
        assert client.killed == []
        updates = client.tool_updates()[:3]
        embedded = [
            [c.terminal_id for c in u.content or () if c.type == "terminal"] for u in updates
        ]
        # in_progress (approved), in_progress with the terminal, then failed (exit 3) with it.
        assert [u.status for u in updates] == ["in_progress", "in_progress", "failed"]
        assert embedded == [[], ["term-1"], ["term-1"]]
        assert "from-the-terminal" in updates[-1].raw_output["content"]
        assert "exited with code 3" in updates[-1].raw_output["content"]

    run(main)


def test_a_client_without_terminal_gets_the_local_executor() -> None:
    """A client that implements terminal/* but does not announce it is never asked: the
    command runs on the agent's machine and its output is the call's text."""

    async def main() -> None:
        client = TerminalClient()
        async with agent(client, terminal=False) as conn:
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("!bash echo ran-locally")]
            )
            assert response.stop_reason == "end_turn"
        assert client.created == []
        last = client.tool_updates()[-1]
        assert last.status == "completed"
        assert [c.type for c in last.content] == ["content"]
        assert "ran-locally" in last.raw_output["content"]

    run(main)


@pytest.mark.parametrize("how", ["cancel", "close"])
def test_a_command_stopped_mid_run_is_killed_and_released(how: str) -> None:
    """session/cancel (or session/close) while the command runs in the client's terminal:
    the terminal is killed and released (created == released), its process is gone."""

    async def main() -> None:
        client = TerminalClient()
        marker = uuid.uuid4().hex
        async with agent(client, terminal=True) as conn:
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[text_block(f"!bash sleep 60; echo {marker}")],
                )
            )
            await client.wait_for(lambda: len(client.created) == 1)
            process = client.terminals["term-1"].process
            if how == "cancel":
                await conn.cancel(session_id=session.session_id)
            else:
                await conn.close_session(session_id=session.session_id)
            response = await prompt
            assert response.stop_reason == "cancelled"
            await client.wait_for(lambda: client.released == ["term-1"])
            assert client.killed == ["term-1"]
            assert process.returncode == -signal.SIGKILL
            assert client.terminals == {}

    run(main)
