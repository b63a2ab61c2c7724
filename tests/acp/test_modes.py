"""Over ACP, in process: the modes and config options a session offers, session/set_mode and
session/set_config_option, their announcements, and a load that restores them."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio.testing

import trio_agents.agent as ag
from tests.helpers.acp_support import Client, Message, serve_bridge
from tests.helpers.paths import TYPING
from trio_agents.acp import AcpBridge
from trio_agents.model import Say, ScriptedModel, register_model_scheme
from trio_agents.session import MemoryStore, ModeChanged


def updates(messages: list[Message], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    ]


def option(options: list[dict[str, Any]], config_id: str) -> dict[str, Any]:
    [found] = [o for o in options if o["id"] == config_id]
    return found


@pytest.fixture
def fixed_scheme() -> Iterator[None]:
    """``fixed:TEXT``: a model that answers every request with TEXT."""

    def factory(text: str) -> ScriptedModel:
        return ScriptedModel([[Say(text)]] * 20, name=f"fixed:{text}")

    unregister = register_model_scheme("fixed", factory)
    yield
    unregister()


async def new(client: Client, cwd: str = "/tmp") -> dict[str, Any]:
    await client.initialize()
    result: dict[str, Any] = await client.call("session/new", {"cwd": cwd, "mcpServers": []})
    return result


async def run(client: Client, session_id: str, text: str) -> list[Message]:
    seen, response = await client.until(await client.prompt(session_id, text))
    assert response["result"] == {"stopReason": "end_turn"}, response
    return seen


async def test_a_new_session_offers_the_modes_and_the_mode_and_model_options() -> None:
    """session/new answers modes (ask current; ask, edit, plan) and two select options: mode
    (category mode) and model (category model: the declared specs, then the current one)."""
    async with serve_bridge(models=("echo?delay=1", "echo?context_window=900")) as s:
        result = await new(s.client)
    modes = result["modes"]
    assert modes["currentModeId"] == "ask"
    assert [m["id"] for m in modes["availableModes"]] == ["ask", "edit", "plan"]
    assert all(m["name"] and m["description"] for m in modes["availableModes"])
    mode, model = result["configOptions"]
    assert (mode["id"], mode["type"], mode["category"], mode["currentValue"]) == (
        "mode",
        "select",
        "mode",
        "ask",
    )
    assert [o["value"] for o in mode["options"]] == ["ask", "edit", "plan"]
    assert (model["id"], model["category"], model["currentValue"]) == ("model", "model", "echo")
    assert [o["value"] for o in model["options"]] == [
        "echo?delay=1",
        "echo?context_window=900",
        "echo",
    ]


async def test_set_mode_plan_is_announced_and_refuses_a_command_unasked(tmp_path: Path) -> None:
    """set_mode plan answers {}, then current_mode_update and config_option_update; bash is
    then refused without a permission request, and read_file still runs."""
    (tmp_path / "notes.txt").write_text("hello\n")
    async with serve_bridge(workspace=True) as s:
        session_id = (await new(s.client, str(tmp_path)))["sessionId"]
        seen, answer = await s.client.until(
            await s.client.request("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
        )
        assert answer["result"] == {}
        assert updates(seen, "current_mode_update") == []  # queued after the answer
        after = await run(s.client, session_id, f"!bash touch {tmp_path}/made")
        read = await run(s.client, session_id, '!tool read_file {"path": "notes.txt"}')
        records = s.agents.get(session_id).session.records  # type: ignore[union-attr]
    [mode] = updates(after, "current_mode_update")
    assert mode["currentModeId"] == "plan"
    [options] = updates(after, "config_option_update")
    assert option(options["configOptions"], "mode")["currentValue"] == "plan"
    assert s.client.permission_requests == []
    [failed] = [u for u in updates(after, "tool_call_update") if u["status"] == "failed"]
    text = failed["content"][0]["content"]["text"]
    assert re.match(r"^tool 'bash' is not available in the 'plan' mode \(", text)
    assert not (tmp_path / "made").exists()
    assert [u["status"] for u in updates(read, "tool_call_update")][-1] == "completed"
    assert [r.mode for r in records if isinstance(r, ModeChanged)] == ["plan"]


async def test_edit_mode_writes_files_unasked_and_asks_before_commands(tmp_path: Path) -> None:
    """edit (set as the mode config option): write_file runs with no permission request;
    bash is still asked."""
    async with serve_bridge(workspace=True) as s:
        session_id = (await new(s.client, str(tmp_path)))["sessionId"]
        result = await s.client.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "mode", "value": "edit"},
        )
        assert option(result["configOptions"], "mode")["currentValue"] == "edit"
        write = {"path": "a.txt", "content": "made\n"}
        await run(s.client, session_id, f"!tool write_file {json.dumps(write)}")
        assert s.client.permission_requests == []
        await run(s.client, session_id, "!bash true")
    assert (tmp_path / "a.txt").read_text() == "made\n"
    [asked] = s.client.permission_requests
    assert asked["params"]["toolCall"]["title"].startswith("bash")


async def test_a_loaded_session_is_back_in_its_mode_and_model(fixed_scheme: None) -> None:
    """The mode and the model a session was switched to are recorded: session/load answers
    them, and the loaded agent answers with the switched model."""
    store = MemoryStore()
    async with serve_bridge(store=store, models=("fixed:switched",)) as s:
        session_id = (await new(s.client))["sessionId"]
        await s.client.call("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
        await s.client.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "model", "value": "fixed:switched"},
        )
        await s.client.call("session/close", {"sessionId": session_id})
    async with serve_bridge(store=store, models=("fixed:switched",)) as s:
        await s.client.initialize()
        loaded = await s.client.call(
            "session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []}
        )
        seen = await run(s.client, session_id, "hello")
    assert loaded["modes"]["currentModeId"] == "plan"
    assert option(loaded["configOptions"], "model")["currentValue"] == "fixed:switched"
    said = [u["content"]["text"] for u in updates(seen, "agent_message_chunk")]
    assert "".join(said) == "switched"


async def test_set_config_option_model_answers_the_next_prompt(fixed_scheme: None) -> None:
    """The model option switches the running agent: the answer and config_option_update
    carry the new value, and the next prompt is answered by it."""
    async with serve_bridge(models=("fixed:other",)) as s:
        session_id = (await new(s.client))["sessionId"]
        before = await run(s.client, session_id, "first")
        result = await s.client.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "model", "value": "fixed:other"},
        )
        after = await run(s.client, session_id, "second")
    assert option(result["configOptions"], "model")["currentValue"] == "fixed:other"
    [update] = updates(after, "config_option_update")
    assert option(update["configOptions"], "model")["currentValue"] == "fixed:other"
    assert updates(after, "current_mode_update") == [
        {"sessionUpdate": "current_mode_update", "currentModeId": "ask"}
    ]
    assert "".join(u["content"]["text"] for u in updates(before, "agent_message_chunk")) == "first"
    assert "".join(u["content"]["text"] for u in updates(after, "agent_message_chunk")) == "other"


@pytest.mark.parametrize(
    ("method", "params", "pattern"),
    [
        (
            "session/set_mode",
            {"modeId": "yolo"},
            r"^invalid params: unknown mode 'yolo'; the modes are ask, edit, plan$",
        ),
        (
            "session/set_config_option",
            {"configId": "thought_level", "value": "high"},
            r"^invalid params: unknown config option 'thought_level'; the options are mode, model$",
        ),
        (
            "session/set_config_option",
            {"configId": "model", "value": "openai:gpt-5"},
            r"^invalid params: unknown model 'openai:gpt-5'; the models here are echo$",
        ),
        (
            "session/set_config_option",
            {"configId": "mode", "type": "boolean", "value": True},
            r"^invalid params: config option 'mode' is a select: 'value' is one of its ids$",
        ),
    ],
)
async def test_a_bad_setting_is_invalid_params_and_changes_nothing(
    method: str, params: dict[str, Any], pattern: str
) -> None:
    """An unknown mode, option or model (one not offered), or a boolean for a select, is
    -32602 with the choices; the session keeps its mode and model, and nothing is recorded."""
    async with serve_bridge() as s:
        session_id = (await new(s.client))["sessionId"]
        error = await s.client.error(method, {"sessionId": session_id, **params})
        agent = s.agents.get(session_id)
        assert agent is not None
        assert (agent.mode.id, agent.config.model) == ("ask", None)
        assert not [r for r in agent.session.records if isinstance(r, ModeChanged)]
    assert error["code"] == -32602
    assert re.match(pattern, error["message"])


async def test_set_mode_of_an_unknown_session_is_resource_not_found() -> None:
    """A sessionId the bridge does not serve is -32002, as for a prompt."""
    async with serve_bridge() as s:
        await s.client.initialize()
        error = await s.client.error("session/set_mode", {"sessionId": "nope", "modeId": "plan"})
    assert error["code"] == -32002


async def test_another_factorys_agent_offers_no_modes_and_refuses_a_switch() -> None:
    """A session of an AgentLike that is not this package's Agent: session/new answers only
    its id, and set_mode is -32602 saying its agent has no modes."""
    path = TYPING / "echo_agents.py"
    spec = importlib.util.spec_from_file_location("echo_agents_for_modes", path)
    assert spec is not None
    assert spec.loader is not None
    echo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(echo)
    async with ag.open_runtime(factory=echo.EchoFactory()) as root:
        ours, theirs = trio.testing.memory_stream_pair()
        fiber = await root.plugin(AcpBridge(ours))
        client = Client(theirs)
        result = await new(client)
        assert set(result) == {"sessionId"}
        error = await client.error(
            "session/set_mode", {"sessionId": result["sessionId"], "modeId": "plan"}
        )
        await fiber.dispose()
    assert error["code"] == -32602
    assert re.match(
        r"^invalid params: the agent of session '\S+' \(EchoAgent\) has no modes", error["message"]
    )
