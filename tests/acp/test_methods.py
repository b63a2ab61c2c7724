"""The ACP session lifecycle beyond new/load/list, in process: session/close, session/delete,
session/resume, authenticate, logout, $/cancel_request and embedded resources."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import trio
import trio.testing

from tests.helpers.acp_support import CWD, serve_bridge
from tests.helpers.support import gone, processes_with
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import MemoryStore, UserMessage


async def test_close_disposes_the_agent_and_releases_its_store_entry() -> None:
    """session/close answers {} once the agent is gone: unregistered, not live in the store,
    not served; a prompt to it afterwards is -32002."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        assert s.store.statistics().live == 1
        assert await s.client.call("session/close", {"sessionId": session_id}) == {}
        assert s.agents.get(session_id) is None
        assert s.store.statistics().live == 0
        assert s.bridge.statistics().sessions == ()
        _, refused = await s.client.until(await s.client.prompt(session_id, "still there?"))
        assert refused["error"]["code"] == -32002


async def test_close_while_a_prompt_runs_answers_the_prompt_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A prompt pending on a closed session ends with stopReason cancelled, then close answers."""
    async with serve_bridge("echo?delay=3600") as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        prompt = await s.client.prompt(session_id, "never said")
        await trio.testing.wait_all_tasks_blocked()
        close = await s.client.request("session/close", {"sessionId": session_id})
        seen, answer = await s.client.until(prompt)
        assert answer["result"] == {"stopReason": "cancelled"}
        # Nothing of the turn; only the title its claimed prompt gave the session.
        assert [m["params"]["update"]["sessionUpdate"] for m in seen] == ["session_info_update"]
        _, closed = await s.client.until(close)
        assert closed["result"] == {}
        assert s.agents.get(session_id) is None


async def test_close_kills_the_session_background_jobs() -> None:
    """A background bash job of the session is killed by session/close, before it answers."""
    sleeper = f"sleep 3599.{uuid.uuid4().int % 10**6:06d}"
    model = ScriptedModel(
        [[CallTool("bash", {"command": sleeper, "run_in_background": True})], [Say("started")]]
    )
    async with serve_bridge(model, allow_bash=True) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        _, answer = await s.client.until(await s.client.prompt(session_id, "start it"))
        assert answer["result"] == {"stopReason": "end_turn"}
        assert processes_with(sleeper) != []
        assert await s.client.call("session/close", {"sessionId": session_id}) == {}
        await gone(processes_with, sleeper)
        # The bridge still serves: its other work goes on.
        assert await s.client.new_session() != session_id


async def test_close_during_a_permission_question_cancels_the_prompt_unrun(
    tmp_path: Path,
) -> None:
    """session/close while the client is asked about a command: the command never runs,
    the prompt answers cancelled, close answers {}."""
    marker = tmp_path / "ran"
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        prompt = await s.client.prompt(session_id, f"!bash touch {marker}")
        while (await s.client.next()).get("method") != "session/request_permission":
            pass
        close = await s.client.request("session/close", {"sessionId": session_id})
        _, answer = await s.client.until(prompt)
        assert answer["result"] == {"stopReason": "cancelled"}
        _, closed = await s.client.until(close)
        assert closed["result"] == {}
        assert s.bridge.statistics().permission_requests == 0
        assert not marker.exists()


async def test_close_of_an_unknown_session_is_resource_not_found() -> None:
    """session/close of a session the bridge does not serve is -32002."""
    async with serve_bridge() as s:
        await s.client.initialize()
        error = await s.client.error("session/close", {"sessionId": "nope"})
        assert error["code"] == -32002
        assert re.match(r"^unknown session 'nope'; ", error["message"])


async def test_delete_of_a_session_open_here_is_refused_until_it_is_closed() -> None:
    """session/delete of an open session is -32600 (close it first); once closed it is
    deleted and no longer listed."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "keep me"))
        refused = await s.client.error("session/delete", {"sessionId": session_id})
        assert refused["code"] == -32600
        assert re.match(
            rf"^session '{session_id}' is open in this connection; close it with "
            r"session/close, then delete it$",
            refused["message"],
        )
        assert await s.store.is_stored(session_id)
        await s.client.call("session/close", {"sessionId": session_id})
        assert await s.client.call("session/delete", {"sessionId": session_id}) == {}
        assert not await s.store.is_stored(session_id)
        assert (await s.client.call("session/list", {}))["sessions"] == []


async def test_delete_of_a_session_live_in_another_owner_is_refused() -> None:
    """A session another owner of the process has live (not the bridge) is not deleted."""
    async with serve_bridge() as s:
        await s.client.initialize()
        handle = await s.agents.create(cwd=CWD)
        try:
            refused = await s.client.error("session/delete", {"sessionId": handle.agent.id})
            assert refused["code"] == -32600
            assert re.match(
                rf"^session '{handle.agent.id}' cannot be deleted: .*live", refused["message"]
            )
            assert s.agents.get(handle.agent.id) is handle.agent
        finally:
            await handle.dispose()


async def test_delete_of_an_unknown_session_is_resource_not_found() -> None:
    """session/delete of a session the store does not hold is -32002."""
    async with serve_bridge() as s:
        await s.client.initialize()
        error = await s.client.error("session/delete", {"sessionId": "s-none"})
        assert error["code"] == -32002


async def test_resume_restores_the_session_without_replaying_it() -> None:
    """session/resume answers {} with no update before it; the agent has the history and
    takes the next prompt."""
    store = MemoryStore()
    async with serve_bridge(store=store) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "first words"))
    async with serve_bridge(store=store) as s:
        await s.client.initialize()
        request_id = await s.client.request(
            "session/resume", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        )
        seen, answer = await s.client.until(request_id)
        assert set(answer["result"]) == {"modes", "configOptions"}
        assert seen == []
        agent = s.agents.get(session_id)
        assert agent is not None
        said = [r.content for r in agent.session.records if isinstance(r, UserMessage)]
        assert said == ["first words"]
        seen, answer = await s.client.until(await s.client.prompt(session_id, "again"))
        assert answer["result"] == {"stopReason": "end_turn"}
        # The resumed session is served like a new one: it can be closed.
        assert await s.client.call("session/close", {"sessionId": session_id}) == {}


async def test_resume_of_an_unknown_session_is_resource_not_found() -> None:
    """session/resume of a session the store does not hold is -32002, and nothing is made."""
    async with serve_bridge() as s:
        await s.client.initialize()
        error = await s.client.error(
            "session/resume", {"sessionId": "s-none", "cwd": CWD, "mcpServers": []}
        )
        assert error["code"] == -32002
        assert s.bridge.statistics().sessions == ()


async def test_authenticate_is_invalid_params_and_logout_succeeds() -> None:
    """No auth method is announced: authenticate with any id is -32602; logout answers {}."""
    async with serve_bridge() as s:
        result = await s.client.initialize()
        assert result["authMethods"] == []
        error = await s.client.error("authenticate", {"methodId": "oauth"})
        assert error["code"] == -32602
        assert re.match(
            r"^invalid params: unknown authentication method 'oauth'; this agent needs no "
            r"authentication",
            error["message"],
        )
        assert await s.client.call("logout", {}) == {}


async def test_cancel_request_of_a_pending_prompt_answers_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    """$/cancel_request naming a pending session/prompt ends it as session/cancel would."""
    async with serve_bridge("echo?delay=3600") as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        prompt = await s.client.prompt(session_id, "never said")
        await trio.testing.wait_all_tasks_blocked()
        await s.client.notify("$/cancel_request", {"requestId": prompt})
        seen, answer = await s.client.until(prompt)
        assert answer["result"] == {"stopReason": "cancelled"}
        # Nothing of the turn; only the title its claimed prompt gave the session.
        assert [m["params"]["update"]["sessionUpdate"] for m in seen] == ["session_info_update"]
        # The session stays: the next prompt runs.
        assert s.agents.get(session_id) is not None


async def test_cancel_request_of_a_running_request_answers_request_cancelled() -> None:
    """A session/new cancelled by $/cancel_request read with it answers -32800 and leaves
    no session behind."""
    async with serve_bridge() as s:
        await s.client.initialize()
        request_id, new = s.client.request_frame("session/new", {"cwd": CWD, "mcpServers": []})
        cancel = {
            "jsonrpc": "2.0",
            "method": "$/cancel_request",
            "params": {"requestId": request_id},
        }
        await s.client.send(new, cancel)
        _, answer = await s.client.until(request_id)
        assert answer["error"]["code"] == -32800
        assert re.match(
            r"^session/new was cancelled by \$/cancel_request$", answer["error"]["message"]
        )
        assert s.bridge.statistics().sessions == ()
        # A cancel for a request already answered, or of another id type, changes nothing.
        await s.client.notify("$/cancel_request", {"requestId": str(request_id)})
        await s.client.notify("$/cancel_request", {"requestId": request_id})
        assert (await s.client.call("session/list", {}))["sessions"] == []


async def test_an_embedded_text_resource_reaches_the_model_with_its_uri() -> None:
    """embeddedContext is announced: a resource block gives the model its URI and its text."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        blocks = [
            {"type": "text", "text": "look:"},
            {"type": "resource", "resource": {"uri": "file:///tmp/b.py", "text": "print(1)"}},
        ]
        request_id = await s.client.request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}
        )
        seen, answer = await s.client.until(request_id)
        assert answer["result"] == {"stopReason": "end_turn"}
        echoed = "".join(
            m["params"]["update"]["content"]["text"]
            for m in seen
            if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert echoed == "look:\nfile:///tmp/b.py\nprint(1)"
