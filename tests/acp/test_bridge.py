"""The ACP bridge in process, over a memory stream pair: sessions, prompts, cancel, load,
permission and ownership."""

from __future__ import annotations

import re

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.acp_bridge import chunks, serve
from tests.helpers.acp_support import CWD, Client, Message, allow
from trio_agents.acp import AcpBridge, BridgeStatistics
from trio_agents.cancel import UserCancel
from trio_agents.model import CallTool, Fail, Say, ScriptedModel
from trio_agents.session import MemoryStore, StopReason, TurnEnded


def cancelled(_: Message) -> Message:
    return {"result": {"outcome": {"outcome": "cancelled"}}}


def kinds(messages: list[Message]) -> list[str]:
    return [
        m["params"]["update"]["sessionUpdate"] if m["method"] == "session/update" else m["method"]
        for m in messages
    ]


async def test_initialize_answers_version_1_and_the_capabilities() -> None:
    """Any asked version gets protocolVersion 1 and exactly the capabilities handled."""
    async with serve() as s:
        result = await s.client.call(
            "initialize", {"protocolVersion": 7, "clientCapabilities": {"terminal": True}}
        )
        assert result["protocolVersion"] == 1
        capabilities = result["agentCapabilities"]
        assert capabilities["loadSession"] is True
        assert capabilities["sessionCapabilities"] == {
            "list": {},
            "resume": {},
            "close": {},
            "delete": {},
        }
        assert capabilities["promptCapabilities"] == {
            "image": True,
            "audio": False,
            "embeddedContext": True,
        }
        assert s.bridge.client_capabilities == {"terminal": True}


async def test_session_methods_before_initialize_are_refused() -> None:
    """session/new before initialize is -32600 and creates nothing."""
    async with serve() as s:
        _, response = await s.client.until(
            await s.client.request("session/new", {"cwd": CWD, "mcpServers": []})
        )
        assert response["error"]["code"] == -32600
        assert s.agents.list() == ()


async def test_new_session_creates_an_agent_the_bridge_owns() -> None:
    """session/new answers the id of a live agent recorded in the bridge."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        assert [a.id for a in s.agents.list()] == [session_id]
        assert s.bridge.statistics().sessions == (session_id,)


async def test_new_session_needs_an_absolute_cwd() -> None:
    """A relative cwd is -32602 invalid params."""
    async with serve() as s:
        await s.client.initialize()
        request_id = await s.client.request("session/new", {"cwd": "rel", "mcpServers": []})
        _, response = await s.client.until(request_id)
        assert response["error"]["code"] == -32602


async def test_prompt_streams_chunks_then_answers_end_turn() -> None:
    """The echo streams the prompt back as agent_message_chunk updates, then end_turn."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        seen, response = await s.client.until(await s.client.prompt(session_id, "hello big world"))
        assert response["result"] == {"stopReason": "end_turn"}
        assert chunks(seen) == "hello big world"
        assert kinds(seen) == [*["agent_message_chunk"] * 3, "session_info_update"]
        assert seen[-1]["params"]["update"]["title"] == "hello big world"
        assert all(m["params"]["sessionId"] == session_id for m in seen)


async def test_second_prompt_while_one_runs_is_refused(autojump_clock: trio.abc.Clock) -> None:
    """One prompt at a time per session: a concurrent one is -32600, the first goes on."""
    async with serve("echo?delay=1") as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        first = await s.client.prompt(session_id, "one")
        second = await s.client.prompt(session_id, "two")
        _, refused = await s.client.until(second)
        assert refused["error"]["code"] == -32600
        _, response = await s.client.until(first)
        assert response["result"] == {"stopReason": "end_turn"}


async def test_cancel_mid_turn_answers_cancelled_after_every_update(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A cancel after the first chunk ends the turn cancelled; nothing of it follows."""
    model = ScriptedModel([[Say("one two three four", delay=1.0)]])
    async with serve(model) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        request_id = await s.client.prompt(session_id, "go")
        first = await s.client.next()
        assert first["params"]["update"]["content"]["text"] == "one "
        await s.client.notify("session/cancel", {"sessionId": session_id})
        seen, response = await s.client.until(request_id)
        assert response["result"] == {"stopReason": "cancelled"}
        assert "four" not in chunks(seen)
        with trio.move_on_after(30) as waited:
            await s.client.next()
        assert waited.cancelled_caught, "a frame followed the cancelled response"
        ended = [r for r in s.agent(session_id).session.records if isinstance(r, TurnEnded)]
        assert ended[-1].stop_reason is StopReason.CANCELLED
        assert ended[-1].cause == UserCancel()


async def test_cancel_before_the_first_chunk(autojump_clock: trio.abc.Clock) -> None:
    """A cancel while the model still waits answers cancelled with no chunk at all."""
    async with serve("echo?delay=5") as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        request_id = await s.client.prompt(session_id, "never said")
        await trio.testing.wait_all_tasks_blocked()
        assert s.agent(session_id).statistics().running_turn is not None
        await s.client.notify("session/cancel", {"sessionId": session_id})
        seen, response = await s.client.until(request_id)
        assert response["result"] == {"stopReason": "cancelled"}
        assert kinds(seen) == ["session_info_update"]  # the prompt it claimed names it


async def test_cancel_before_the_prompt_is_claimed_never_runs_it() -> None:
    """A prompt and a cancel in one write: the prompt is removed unclaimed, answered cancelled."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        request_id, prompt = s.client.request_frame(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
        )
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
        await s.client.send(prompt, cancel)
        seen, response = await s.client.until(request_id)
        assert response["result"] == {"stopReason": "cancelled"}
        assert seen == []
        assert s.agent(session_id).statistics().turns == 0


async def test_idle_cancel_changes_nothing_and_the_next_prompt_runs() -> None:
    """session/cancel at idle is a no-op; a prompt after it ends end_turn."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        await s.client.notify("session/cancel", {"sessionId": session_id})
        await s.client.notify("session/cancel", {"sessionId": "s-unknown"})
        seen, response = await s.client.until(await s.client.prompt(session_id, "after"))
        assert response["result"] == {"stopReason": "end_turn"}
        assert chunks(seen) == "after"


async def test_cancelling_one_session_leaves_the_other_alone(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Two sessions prompt at once; cancelling one does not touch the other's turn."""
    async with serve("echo?delay=1") as s:
        await s.client.initialize()
        a = await s.client.new_session()
        b = await s.client.new_session()
        prompt_a = await s.client.prompt(a, "alpha")
        prompt_b = await s.client.prompt(b, "beta gamma")
        await trio.testing.wait_all_tasks_blocked()
        await s.client.notify("session/cancel", {"sessionId": a})
        responses: dict[int, Message] = {}
        updates: list[Message] = []
        while len(responses) < 2:
            message = await s.client.next()
            if "method" in message:
                updates.append(message)
            else:
                responses[message["id"]] = message
        assert responses[prompt_a]["result"] == {"stopReason": "cancelled"}
        assert responses[prompt_b]["result"] == {"stopReason": "end_turn"}
        assert kinds([m for m in updates if m["params"]["sessionId"] == a]) == [
            "session_info_update"
        ]
        assert chunks(updates) == "beta gamma"


async def test_load_replays_the_history_before_answering() -> None:
    """session/load of a stored session sends its conversation as updates, then {}."""
    store = MemoryStore()
    async with serve(store=store, allow_bash=True) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "first words"))
        await s.client.until(await s.client.prompt(session_id, "!bash ls"))
    async with serve(store=store) as s:
        await s.client.initialize()
        request_id = await s.client.request(
            "session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        )
        seen, response = await s.client.until(request_id)
        assert set(response["result"]) == {"modes", "configOptions"}
        assert kinds(seen) == [
            "user_message_chunk",
            "agent_message_chunk",
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
        assert chunks(seen, "user_message_chunk") == "first words!bash ls"
        assert seen[3]["params"]["update"]["kind"] == "execute"
        assert seen[4]["params"]["update"]["status"] == "completed"
        # The loaded session is live and owned by the bridge: it takes prompts.
        _, answer = await s.client.until(await s.client.prompt(session_id, "again"))
        assert answer["result"] == {"stopReason": "end_turn"}


async def test_list_shows_stored_sessions() -> None:
    """session/list lists the store's sessions with their cwd and title."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "a title"))
        result = await s.client.call("session/list", {})
        assert [(e["sessionId"], e["cwd"], e["title"]) for e in result["sessions"]] == [
            (session_id, CWD, "a title")
        ]
        assert (await s.client.call("session/list", {"cwd": "/elsewhere"}))["sessions"] == []


async def test_unknown_session_is_resource_not_found() -> None:
    """prompt and load of an unknown session answer -32002."""
    async with serve() as s:
        await s.client.initialize()
        _, prompted = await s.client.until(await s.client.prompt("s-nope", "x"))
        assert prompted["error"]["code"] == -32002
        request_id = await s.client.request(
            "session/load", {"sessionId": "s-nope", "cwd": CWD, "mcpServers": []}
        )
        _, loaded = await s.client.until(request_id)
        assert loaded["error"]["code"] == -32002


async def test_unknown_method_and_malformed_frames_keep_the_bridge_serving() -> None:
    """-32601 for an unknown method, -32700 for garbage, and the next request still works."""
    async with serve() as s:
        await s.client.initialize()
        await s.client.stream.send_all(b"{oops\n")
        garbage = await s.client.next()
        assert garbage["error"]["code"] == -32700
        assert garbage["id"] is None
        _, unknown = await s.client.until(await s.client.request("session/fork", {}))
        assert unknown["error"]["code"] == -32601
        await s.client.notify("$/cancel_request", {"id": 1})
        await s.client.notify("something/else", None)
        assert await s.client.new_session()


async def test_bash_asks_permission_and_runs_when_allowed() -> None:
    """allow_once: the request names the command, then the tool runs and the turn ends."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        seen, response = await s.client.until(await s.client.prompt(session_id, "!bash echo hi"))
        assert response["result"] == {"stopReason": "end_turn"}
        assert s.bash.ran == ["echo hi"]
        assert kinds(seen)[:3] == ["tool_call", "session/request_permission", "tool_call_update"]
        request = s.client.permission_requests[0]["params"]
        assert request["sessionId"] == session_id
        assert request["toolCall"]["toolCallId"] == seen[0]["params"]["update"]["toolCallId"]
        assert {o["kind"] for o in request["options"]} == {
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        }


async def test_rejected_bash_does_not_run_and_the_turn_goes_on() -> None:
    """reject_once: the model gets an error result and the turn still ends end_turn."""
    async with serve() as s:
        await s.client.initialize()
        s.client.permission = allow("reject-once")
        session_id = await s.client.new_session()
        seen, response = await s.client.until(await s.client.prompt(session_id, "!bash rm x"))
        assert response["result"] == {"stopReason": "end_turn"}
        assert s.bash.ran == []
        update = next(m for m in seen if kinds([m]) == ["tool_call_update"])
        assert update["params"]["update"]["status"] == "failed"
        assert "rejected" in chunks(seen)


async def test_cancelled_permission_does_not_run_and_ends_the_turn_cancelled() -> None:
    """outcome cancelled: the command never runs and the prompt answers cancelled."""
    async with serve() as s:
        await s.client.initialize()
        s.client.permission = cancelled
        session_id = await s.client.new_session()
        _, response = await s.client.until(await s.client.prompt(session_id, "!bash touch m"))
        assert response["result"] == {"stopReason": "cancelled"}
        assert s.bash.ran == []
        _, after = await s.client.until(await s.client.prompt(session_id, "still here"))
        assert after["result"] == {"stopReason": "end_turn"}


async def test_session_cancel_while_permission_is_pending() -> None:
    """A session/cancel during the permission question ends the turn cancelled, unrun."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        request_id = await s.client.prompt(session_id, "!bash touch m")
        assert kinds([await s.client.next()]) == ["tool_call"]
        question = await s.client.next()
        assert question["method"] == "session/request_permission"
        await s.client.notify("session/cancel", {"sessionId": session_id})
        # The client answers late, as the spec asks it to; the answer is dropped.
        await s.client.send({"jsonrpc": "2.0", "id": question["id"], **cancelled({})})
        _, response = await s.client.until(request_id)
        assert response["result"] == {"stopReason": "cancelled"}
        assert s.bash.ran == []
        assert s.bridge.statistics().permission_requests == 0


async def test_allow_always_stops_asking_in_that_session() -> None:
    """After allow_always the next bash in the session runs without a question."""
    async with serve() as s:
        await s.client.initialize()
        s.client.permission = allow("allow-always")
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "!bash one"))
        await s.client.until(await s.client.prompt(session_id, "!bash two"))
        assert s.bash.ran == ["one", "two"]
        assert len(s.client.permission_requests) == 1


async def test_reject_always_refuses_without_asking_again() -> None:
    """After reject_always the next bash is refused without a question."""
    async with serve() as s:
        await s.client.initialize()
        s.client.permission = allow("reject-always")
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "!bash one"))
        await s.client.until(await s.client.prompt(session_id, "!bash two"))
        assert s.bash.ran == []
        assert len(s.client.permission_requests) == 1


async def test_allow_bash_runs_without_asking() -> None:
    """With allow_bash no permission is requested."""
    async with serve(allow_bash=True) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        seen, _ = await s.client.until(await s.client.prompt(session_id, "!bash ok"))
        assert s.bash.ran == ["ok"]
        assert "session/request_permission" not in kinds(seen)


async def test_eof_disposes_every_session(autojump_clock: trio.abc.Clock) -> None:
    """Client EOF, one session mid-turn: no agent left, no live session in the store."""
    async with serve("echo?delay=100") as s:
        await s.client.initialize()
        a = await s.client.new_session()
        await s.client.new_session()
        await s.client.prompt(a, "pending forever")
        await trio.testing.wait_all_tasks_blocked()
        await s.client.stream.aclose()
        with trio.fail_after(5):
            await s.bridge.wait_closed()
        assert s.agents.list() == ()
        assert s.store.live() == ()
        assert s.bridge.statistics().sessions == ()
        ended = [r for r in (await s.store.load(a)).records if isinstance(r, TurnEnded)]
        assert [e.stop_reason for e in ended] == [StopReason.CANCELLED]


async def test_plugin_teardown_disposes_sessions_and_closes_the_stream() -> None:
    """Disposing the bridge's fiber disposes its sessions; the client then reads EOF."""
    store = MemoryStore()
    async with ag.open_runtime(store=store) as root:
        ours, theirs = trio.testing.memory_stream_pair()
        bridge = AcpBridge(ours)
        fiber = await root.plugin(bridge)
        client = Client(theirs)
        await client.initialize()
        await client.new_session()
        await client.new_session()
        await fiber.dispose()
        assert root.get("agents").list() == ()
        assert store.live() == ()
        with pytest.raises(EOFError):
            await client.next()


async def test_a_broken_connection_disposes_every_session(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The client stops reading (the bridge's next write breaks) with a session mid-turn:
    wait_closed() returns with no agent and no live session left, before any teardown of
    the bridge's fiber."""
    store = MemoryStore()
    async with ag.open_runtime(store=store, model="echo?delay=100") as root:
        to_bridge, from_client = trio.testing.memory_stream_one_way_pair()
        to_client, from_bridge = trio.testing.memory_stream_one_way_pair()
        bridge = AcpBridge(trio.StapledStream(to_client, from_client))
        await root.plugin(bridge)
        client = Client(trio.StapledStream(to_bridge, from_bridge))
        await client.initialize()
        session_id = await client.new_session()
        await client.prompt(session_id, "pending forever")
        await trio.testing.wait_all_tasks_blocked()
        await from_bridge.aclose()
        await client.request("session/list", {})  # its answer is the write that breaks
        with trio.fail_after(5):
            await bridge.wait_closed()
        assert root.get("agents").list() == ()
        assert store.live() == ()


async def test_new_session_racing_the_close_is_disposed() -> None:
    """session/new then EOF at once: the created handle is disposed, nothing is left."""
    async with serve() as s:
        await s.client.initialize()
        await s.client.request("session/new", {"cwd": CWD, "mcpServers": []})
        await s.client.stream.aclose()
        with trio.fail_after(5):
            await s.bridge.wait_closed()
        assert s.agents.list() == ()
        assert s.store.live() == ()


async def test_prompt_of_an_agent_disposed_elsewhere_is_answered() -> None:
    """An agent torn down by another owner: its session leaves the bridge."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        agent = s.agent(session_id)
        await s.agents._hosted[agent].disposer()()
        assert s.bridge.statistics().sessions == ()
        _, response = await s.client.until(await s.client.prompt(session_id, "x"))
        assert response["error"]["code"] == -32002


# -- more protocol behaviour ---------------------------------------------------------------------


@attrs.define
class Gate:
    """A tool ``hold`` that waits, shielded, until the test opens the gate."""

    entered: trio.Event = attrs.Factory(trio.Event)
    opened: trio.Event = attrs.Factory(trio.Event)

    async def run(self, call: ag.ToolContext, args: None) -> str:
        self.entered.set()
        with trio.CancelScope(shield=True):
            await self.opened.wait()
        return "held"

    def tool(self) -> ag.Tool:
        return ag.Tool("hold", "waits for the gate", None, self.run)


async def rest(client: Client) -> list[Message]:
    """Every frame until the agent closes its output."""
    frames: list[Message] = []
    while True:
        try:
            frames.append(await client.next())
        except EOFError:
            return frames


async def test_a_failed_turn_is_a_json_rpc_error() -> None:
    """A turn that ends in error has no stopReason: -32603 with stopReason error as data."""
    async with serve(ScriptedModel([[Fail("model down")], "fine"])) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        _, response = await s.client.until(await s.client.prompt(session_id, "go"))
        assert response["error"]["code"] == -32603
        assert re.match(r"^the turn failed: .*model down", response["error"]["message"])
        assert response["error"]["data"] == {"stopReason": "error"}
        _, again = await s.client.until(await s.client.prompt(session_id, "again"))
        assert again["result"] == {"stopReason": "end_turn"}


async def test_the_bridge_takes_a_send_and_a_receive_stream() -> None:
    """Two one-way streams serve like one bidirectional stream; one one-way is a TypeError."""
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    with pytest.raises(TypeError, match=r"^AcpBridge needs a receive stream"):
        AcpBridge(agent_out)
    async with ag.open_runtime(store=MemoryStore()) as root:
        bridge = AcpBridge(agent_out, agent_in)
        await root.plugin(bridge)
        client = Client(trio.StapledStream(to_agent, from_agent))
        assert (await client.initialize())["protocolVersion"] == 1
        await to_agent.aclose()
        with trio.fail_after(5):
            await bridge.wait_closed()
        with pytest.raises(EOFError):
            await client.next()


async def test_a_bridge_serves_one_connection_and_closes_unstarted() -> None:
    """A second apply is refused; aclose of a bridge never applied returns, closed."""
    async with serve() as s:
        with pytest.raises(RuntimeError, match=r"^this AcpBridge already served"):
            await s.bridge.apply(s.root, None)
    ours, _ = trio.testing.memory_stream_pair()
    unstarted = AcpBridge(ours)
    await unstarted.aclose()
    assert unstarted.statistics().closed


async def test_load_of_a_session_the_bridge_serves_replays_it_in_place() -> None:
    """session/load of a live bridge session replays it; the agent and its session stay."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        agent = s.agent(session_id)
        await s.client.until(await s.client.prompt(session_id, "remember me"))
        request_id = await s.client.request(
            "session/load", {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
        )
        seen, response = await s.client.until(request_id)
        assert set(response["result"]) == {"modes", "configOptions"}
        assert kinds(seen) == ["user_message_chunk", "agent_message_chunk"]
        assert chunks(seen, "user_message_chunk") == "remember me"
        assert s.agent(session_id) is agent
        assert s.bridge.statistics().sessions == (session_id,)


async def test_agents_of_another_owner_are_neither_streamed_nor_loaded_nor_guarded(
    autojump_clock: trio.abc.Clock,
) -> None:
    """An agent the bridge does not own: no frames, bash unasked, and load is -32600."""
    async with serve() as s:
        await s.client.initialize()
        handle = await s.agents.create()
        handle.agent.prompt("!bash uname")
        await handle.agent.when_idle()
        assert s.bash.ran == ["uname"]
        request_id = await s.client.request(
            "session/load", {"sessionId": handle.agent.id, "cwd": CWD, "mcpServers": []}
        )
        seen, response = await s.client.until(request_id)
        assert seen == []
        assert response["error"]["code"] == -32600
        assert re.match(r"^session '.*' is live in another owner", response["error"]["message"])
        await handle.dispose()


async def test_list_refuses_a_cursor_and_new_checks_mcp_servers() -> None:
    """A cursor is -32602; mcpServers must be an array; a server that cannot start fails
    session/new and leaves no agent (tests/acp/test_mcp.py has the servers that start)."""
    async with serve() as s:
        await s.client.initialize()
        _, listed = await s.client.until(await s.client.request("session/list", {"cursor": "c"}))
        assert listed["error"]["code"] == -32602
        assert re.match(r"^invalid params: unknown cursor", listed["error"]["message"])
        request_id = await s.client.request("session/new", {"cwd": CWD, "mcpServers": {}})
        _, refused = await s.client.until(request_id)
        assert refused["error"] == {
            "code": -32602,
            "message": "invalid params: 'mcpServers' must be an array",
        }
        assert s.agents.list() == ()
        server = {"name": "fs", "command": "/nonexistent/mcp-fs", "args": [], "env": []}
        request_id = await s.client.request("session/new", {"cwd": CWD, "mcpServers": [server]})
        _, refused = await s.client.until(request_id)
        assert refused["error"]["code"] == -32603
        assert re.match(r"^MCP server 'fs' could not start", refused["error"]["message"])
        assert s.agents.list() == ()


async def test_a_prompt_while_the_agent_is_being_disposed_is_an_internal_error() -> None:
    """Messages from elsewhere are streamed; a prompt during a disposal is -32603."""
    async with serve(ScriptedModel([[CallTool("hold")]])) as s:
        gate = Gate()
        s.root.get("tools").register(gate.tool())
        await s.client.initialize()
        session_id = await s.client.new_session()
        agent = s.agent(session_id)
        agent.prompt("from elsewhere")
        await gate.entered.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.agents._hosted[agent].disposer())
            await trio.testing.wait_all_tasks_blocked()
            assert agent.status is ag.AgentStatus.DISPOSING
            seen, response = await s.client.until(await s.client.prompt(session_id, "late"))
            assert response["error"]["code"] == -32603
            assert re.match(r"^agent .* takes no more messages", response["error"]["message"])
            assert kinds(seen) == ["user_message_chunk", "tool_call", "tool_call_update"]
            assert chunks(seen, "user_message_chunk") == "from elsewhere"
            assert seen[1]["params"]["update"]["title"] == "hold"
            assert seen[2]["params"]["update"]["status"] == "in_progress"
            gate.opened.set()
        assert s.bridge.statistics().sessions == ()


async def test_a_prompt_queued_behind_another_turn_is_cancelled_by_a_disposal(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Disposed elsewhere before its turn began: the prompt is answered cancelled, unrun."""
    async with serve("echo?delay=100") as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        agent = s.agent(session_id)
        agent.prompt("a turn of another owner")
        await trio.testing.wait_all_tasks_blocked()
        request_id = await s.client.prompt(session_id, "queued")
        await trio.testing.wait_all_tasks_blocked()
        assert s.bridge.statistics().prompts == 1
        await s.agents._hosted[agent].disposer()()
        _, response = await s.client.until(request_id)
        assert response["result"] == {"stopReason": "cancelled"}
        assert agent.statistics().turns == 1
        assert s.bridge.statistics() == BridgeStatistics((), 0, 0, closed=False)


async def test_cancel_withdraws_only_the_questions_of_its_session() -> None:
    """Two sessions ask at once; cancelling one leaves the other's question to be answered."""
    async with serve() as s:
        await s.client.initialize()
        a = await s.client.new_session()
        b = await s.client.new_session()
        prompt_a = await s.client.prompt(a, "!bash a")
        prompt_b = await s.client.prompt(b, "!bash b")
        questions: dict[str, Message] = {}
        while len(questions) < 2:
            message = await s.client.next()
            if message.get("method") == "session/request_permission":
                questions[message["params"]["sessionId"]] = message
        assert s.bridge.statistics().permission_requests == 2
        await s.client.notify("session/cancel", {"sessionId": a})
        _, response_a = await s.client.until(prompt_a)
        assert response_a["result"] == {"stopReason": "cancelled"}
        assert s.bridge.statistics().permission_requests == 1
        await s.client.send({"jsonrpc": "2.0", "id": questions[b]["id"], **allow("allow-once")({})})
        _, response_b = await s.client.until(prompt_b)
        assert response_b["result"] == {"stopReason": "end_turn"}
        assert s.bash.ran == ["b"]


@pytest.mark.parametrize(
    "answer",
    [
        {"error": {"code": -32603, "message": "the client broke"}},
        {"result": {"outcome": "selected"}},
        {"result": None},
        {"result": {"outcome": {"outcome": "selected", "optionId": "maybe"}}},
    ],
    ids=["error", "outcome-not-an-object", "no-result", "unknown-option"],
)
async def test_an_answer_that_is_not_an_offered_option_rejects_once(answer: Message) -> None:
    """An error, a malformed outcome or an unknown option: not run, and asked again next time."""
    async with serve() as s:
        await s.client.initialize()
        s.client.permission = lambda _: answer
        session_id = await s.client.new_session()
        _, response = await s.client.until(await s.client.prompt(session_id, "!bash one"))
        assert response["result"] == {"stopReason": "end_turn"}
        await s.client.until(await s.client.prompt(session_id, "!bash two"))
        assert s.bash.ran == []
        assert len(s.client.permission_requests) == 2


async def test_eof_answers_what_was_asked_before_it() -> None:
    """The client closes only its output: the answers it asked for still arrive, then EOF."""
    async with serve() as s:
        request_id, initialize = s.client.request_frame(
            "initialize", {"protocolVersion": 1, "clientCapabilities": {}}
        )
        await s.client.send(initialize)
        await s.client.close_output()
        frames = await rest(s.client)
        assert [f["id"] for f in frames] == [request_id]
        assert frames[0]["result"]["protocolVersion"] == 1
        assert s.bridge.statistics().closed


async def test_eof_during_a_permission_question_cancels_the_prompt_unrun() -> None:
    """EOF while asking: the command does not run and the prompt is answered cancelled."""
    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        request_id = await s.client.prompt(session_id, "!bash touch m")
        assert kinds([await s.client.next()]) == ["tool_call"]
        assert (await s.client.next())["method"] == "session/request_permission"
        await s.client.close_output()
        frames = await rest(s.client)
        responses = [f for f in frames if "method" not in f]
        assert responses == [
            {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "cancelled"}}
        ]
        assert s.bash.ran == []
        assert s.agents.list() == ()


async def test_bash_reaching_the_guard_after_the_close_is_cancelled_unasked() -> None:
    """The connection is closing, the session not yet disposed: bash is refused, not asked."""
    async with serve(ScriptedModel([[CallTool("hold")]])) as s:
        gate = Gate()
        tools: ag.ToolRegistry = s.root.get("tools")
        tools.register(gate.tool())
        await s.client.initialize()
        session_id = await s.client.new_session()
        agent = s.agent(session_id)
        agent.prompt("hold on")
        await gate.entered.wait()
        await s.client.close_output()
        await trio.testing.wait_all_tasks_blocked()
        assert s.bridge.statistics().closed
        assert s.bridge.statistics().sessions == (session_id,)
        with trio.fail_after(5):  # safety net: a question asked now would never be answered
            result = await tools.invoke("bash", {"command": "late"}, agent)
        assert result == ag.ToolResult(
            "the user cancelled; tool 'bash' did not run", is_error=True, started=False
        )
        gate.opened.set()
        frames = await rest(s.client)
        assert "session/request_permission" not in [f.get("method") for f in frames]
        assert s.bash.ran == []
        assert s.agents.list() == ()


async def test_a_failing_disposal_is_logged_and_the_shutdown_completes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A session whose teardown raises: logged, and the bridge still closes with no agent."""

    async def broken_cleanup() -> None:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("cleanup failed")

    async with serve() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        s.agents.scope_of(s.agent(session_id)).defer(broken_cleanup)
        await s.client.stream.aclose()
        with trio.fail_after(5):
            await s.bridge.wait_closed()
        assert f"disposing the agent of ACP session {session_id} failed" in caplog.messages
        assert s.agents.list() == ()
        assert s.bridge.statistics().sessions == ()


@pytest.mark.parametrize(
    ("cwd", "reason"),
    [
        ("rel/dir", r"'cwd' must be an absolute path; got 'rel/dir'"),
        ("/tmp/a\0b", r"'cwd' holds a NUL character; got '/tmp/a\\x00b'"),
        ("/nonexistent/trio-agents-cwd", r"'cwd' '/nonexistent/trio-agents-cwd' does not exist"),
        ("/etc/hostname", r"'cwd' '/etc/hostname' is not a directory"),
    ],
)
async def test_new_session_refuses_a_cwd_it_cannot_work_in(cwd: str, reason: str) -> None:
    """Relative, NUL, missing or a file: -32602 with the reason, and no agent is made."""
    async with serve() as s:
        await s.client.initialize()
        request_id = await s.client.request("session/new", {"cwd": cwd, "mcpServers": []})
        _, response = await s.client.until(request_id)
        assert response["error"]["code"] == -32602
        assert re.fullmatch(rf"invalid params: {reason}", response["error"]["message"])
        assert not s.agents.list()


async def test_load_refuses_a_cwd_that_does_not_exist() -> None:
    """session/load with a missing cwd is -32602 and leaves the stored session unloaded."""
    store = MemoryStore()
    async with serve(store=store) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        await s.client.until(await s.client.prompt(session_id, "kept"))
    async with serve(store=store) as s:
        await s.client.initialize()
        request_id = await s.client.request(
            "session/load",
            {"sessionId": session_id, "cwd": "/nonexistent/here", "mcpServers": []},
        )
        _, response = await s.client.until(request_id)
        assert response["error"]["code"] == -32602
        assert re.fullmatch(
            r"invalid params: 'cwd' '/nonexistent/here' does not exist",
            response["error"]["message"],
        )
        assert not s.agents.list()
