"""End to end with the real ACP client (the ``agent-client-protocol`` package, on asyncio)
and the installed ``trio-agents acp`` command: the modes and config options a session offers,
set_session_mode and set_config_option, and a resume in another process that keeps them."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.support import TRIO_AGENTS

acp = pytest.importorskip("acp")

from acp import text_block  # noqa: E402

# Safety net only: every wait below ends on an answer, this bounds a broken run.
LIMIT = 30.0


class Recorder:
    """The client side: keeps every session update; permission is never asked here."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    def kinds(self, kind: str) -> list[Any]:
        return [u for u in self.updates if u.session_update == kind]


@asynccontextmanager
async def agent_process(recorder: Recorder, *args: str) -> AsyncIterator[Any]:
    async with acp.spawn_agent_process(
        recorder,
        str(TRIO_AGENTS),
        "acp",
        *args,
        transport_kwargs={"stderr": None},
        env=dict(os.environ),
    ) as (conn, _):
        await conn.initialize(protocol_version=1)
        yield conn


def test_the_sdk_client_switches_mode_and_model_and_a_resume_keeps_them(tmp_path: Path) -> None:
    """new_session offers the modes and options (typed by the SDK); set_session_mode plan and
    set_config_option model are announced; the next turn's usage_update has the switched
    model's window; another process resumes the session in plan with that model."""
    config = tmp_path / "agents.toml"
    config.write_text('models = ["echo?context_window=900"]\n')
    store = str(tmp_path / "sessions")
    args = ("--store", store, "--config", str(config))

    async def first() -> str:
        recorder = Recorder()
        async with agent_process(recorder, *args) as conn:
            new = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            assert new.modes.current_mode_id == "ask"
            assert [m.id for m in new.modes.available_modes] == ["ask", "edit", "plan"]
            mode, model = new.config_options
            assert (mode.category, model.category) == ("mode", "model")
            assert [o.value for o in model.options] == ["echo?context_window=900", "echo"]
            await conn.set_session_mode(session_id=new.session_id, mode_id="plan")
            answer = await conn.set_config_option(
                config_id="model", session_id=new.session_id, value="echo?context_window=900"
            )
            values = {o.id: o.current_value for o in answer.config_options}
            assert values == {"mode": "plan", "model": "echo?context_window=900"}
            await conn.prompt(session_id=new.session_id, prompt=[text_block("hello")])
            assert [u.current_mode_id for u in recorder.kinds("current_mode_update")][-1] == "plan"
            assert recorder.kinds("config_option_update")
            [usage] = recorder.kinds("usage_update")
            assert usage.size == 900
            session_id: str = new.session_id
            return session_id

    session_id = asyncio.run(asyncio.wait_for(first(), LIMIT))

    async def second() -> None:
        async with agent_process(Recorder(), *args) as conn:
            resumed = await conn.resume_session(
                cwd=os.getcwd(), session_id=session_id, mcp_servers=[]
            )
            assert resumed.modes.current_mode_id == "plan"
            values = {o.id: o.current_value for o in resumed.config_options}
            assert values == {"mode": "plan", "model": "echo?context_window=900"}

    asyncio.run(asyncio.wait_for(second(), LIMIT))
