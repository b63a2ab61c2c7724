"""End to end with the real ACP client (the ``agent-client-protocol`` package, on asyncio)
and the installed ``trio-agents acp`` command: session/close, session/resume, session/delete,
authenticate, logout and $/cancel_request, and the capabilities that announce them.

The client SDK (0.12) has no ``delete_session`` or ``logout`` call: those go through its
connection's ``send_request``, as its own calls do.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.helpers.support import TRIO_AGENTS, processes_with

acp = pytest.importorskip("acp")

from acp import RequestError, text_block  # noqa: E402
from acp.connection import StreamEvent  # noqa: E402

T = TypeVar("T")
# Safety net only: every wait below ends on an event, this bounds a broken run.
LIMIT = 30.0


class Recorder:
    """The client side: records every update and every frame; permission is never asked
    (the commands run with --allow-bash)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.outgoing: list[dict[str, Any]] = []
        self.incoming: list[dict[str, Any]] = []
        self._sent = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    def observe(self, event: StreamEvent) -> None:
        side = self.incoming if event.direction.value == "incoming" else self.outgoing
        side.append(event.message)
        self._sent.set()

    async def request_id(self, method: str) -> Any:
        """The id of the first ``method`` request written to the agent (waits for it)."""
        while True:
            for message in self.outgoing:
                if message.get("method") == method and "id" in message:
                    return message["id"]
            self._sent.clear()
            await self._sent.wait()


@asynccontextmanager
async def agent_process(recorder: Recorder, *args: str) -> AsyncIterator[Any]:
    async with acp.spawn_agent_process(
        recorder,
        str(TRIO_AGENTS),
        "acp",
        *args,
        transport_kwargs={"stderr": None},
        env=dict(os.environ),
        observers=[recorder.observe],
    ) as (conn, _):
        await conn.initialize(protocol_version=1)
        yield conn


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), LIMIT)

    return asyncio.run(bounded())


def test_initialize_announces_exactly_the_session_and_prompt_capabilities() -> None:
    """The client reads list, resume, close and delete; embedded context but no image/audio."""

    async def main() -> None:
        async with acp.spawn_agent_process(
            Recorder(),
            str(TRIO_AGENTS),
            "acp",
            "--store",
            "memory",
            transport_kwargs={"stderr": None},
            env=dict(os.environ),
        ) as (conn, _):
            answer = await conn.initialize(protocol_version=1)
            sessions = answer.agent_capabilities.session_capabilities
            assert None not in (sessions.list, sessions.resume, sessions.close, sessions.delete)
            prompts = answer.agent_capabilities.prompt_capabilities
            assert (prompts.image, prompts.audio, prompts.embedded_context) == (True, False, True)
            assert answer.auth_methods == []

    run(main)


def test_close_ends_a_running_command_and_cancels_the_prompt(tmp_path: Path) -> None:
    """session/close during a command: the prompt answers cancelled, the command ends while
    the agent process still runs, and the session is no longer served."""
    started = tmp_path / "started"
    os.mkfifo(started)
    sleeper = f"sleep 3599.{uuid.uuid4().int % 10**6:06d}"

    def wait_started() -> str:
        with open(started) as f:
            return f.readline().strip()

    async def main() -> None:
        recorder = Recorder()
        async with agent_process(recorder, "--store", "memory", "--allow-bash") as conn:
            session_id = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            prompt = asyncio.ensure_future(
                conn.prompt(
                    session_id=session_id,
                    prompt=[text_block(f"!bash echo up > {started} && {sleeper}")],
                )
            )
            assert await asyncio.to_thread(wait_started) == "up"
            await conn.close_session(session_id=session_id)
            assert (await prompt).stop_reason == "cancelled"
            await gone(sleeper)
            with pytest.raises(RequestError) as caught:
                await conn.prompt(session_id=session_id, prompt=[text_block("again")])
            assert caught.value.code == -32002

    run(main)


async def gone(text: str) -> None:
    """Wait until no process has ``text`` in its command line (see ``support.gone``)."""
    async with asyncio.timeout(10):
        # No event exists for "the kernel finished an exit we do not reap": poll.
        while processes_with(text):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def test_resume_restores_a_stored_session_without_replaying_it(tmp_path: Path) -> None:
    """A session stored by one process is resumed by another: no update before the answer,
    and the next prompt runs in it."""

    async def first() -> str:
        async with agent_process(Recorder(), "--store", str(tmp_path)) as conn:
            session_id: str = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            await conn.prompt(session_id=session_id, prompt=[text_block("remember me")])
            return session_id

    session_id = run(first)

    async def second() -> None:
        recorder = Recorder()
        async with agent_process(recorder, "--store", str(tmp_path)) as conn:
            await conn.resume_session(cwd=os.getcwd(), session_id=session_id, mcp_servers=[])
            replayed = [
                m
                for m in recorder.incoming
                if m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] != "available_commands_update"
            ]
            assert replayed == []
            answer = await conn.prompt(session_id=session_id, prompt=[text_block("again")])
            assert answer.stop_reason == "end_turn"

    run(second)


def test_delete_is_refused_while_another_process_has_the_session_open(tmp_path: Path) -> None:
    """Process A has the stored session open: B's session/delete is refused; once A closed
    it, B deletes it and it is no longer listed."""

    async def main() -> None:
        async with (
            agent_process(Recorder(), "--store", str(tmp_path)) as a,
            agent_process(Recorder(), "--store", str(tmp_path)) as b,
        ):
            session_id = (await a.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            await a.prompt(session_id=session_id, prompt=[text_block("stored")])
            # Closed, the session is on disk (a live one may not be written yet); resumed,
            # A holds it again.
            await a.close_session(session_id=session_id)
            await a.resume_session(cwd=os.getcwd(), session_id=session_id, mcp_servers=[])
            with pytest.raises(RequestError) as caught:
                await b._conn.send_request("session/delete", {"sessionId": session_id})
            assert caught.value.code == -32600
            assert re.match(
                rf"^session '{session_id}' cannot be deleted: .*live", str(caught.value)
            )
            await a.close_session(session_id=session_id)
            assert await b._conn.send_request("session/delete", {"sessionId": session_id}) == {}
            listed = await b.list_sessions()
            assert session_id not in [s.session_id for s in listed.sessions]

    run(main)


def test_authenticate_is_invalid_params_and_logout_answers() -> None:
    """No auth method is announced: authenticate is -32602; logout succeeds."""

    async def main() -> None:
        async with agent_process(Recorder(), "--store", "memory") as conn:
            with pytest.raises(RequestError) as caught:
                await conn.authenticate(method_id="oauth")
            assert caught.value.code == -32602
            assert re.match(
                r"^invalid params: unknown authentication method 'oauth'", str(caught.value)
            )
            assert await conn._conn.send_request("logout", {}) == {}

    run(main)


def test_cancel_request_ends_a_pending_prompt_cancelled() -> None:
    """$/cancel_request naming a pending session/prompt: it answers cancelled at once (the
    model would answer after an hour)."""

    async def main() -> None:
        recorder = Recorder()
        async with agent_process(
            recorder, "--store", "memory", "--model", "echo?delay=3600"
        ) as conn:
            session_id = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session_id, prompt=[text_block("slow")])
            )
            request_id = await recorder.request_id("session/prompt")
            await conn._conn.send_notification("$/cancel_request", {"requestId": request_id})
            assert (await prompt).stop_reason == "cancelled"

    run(main)
