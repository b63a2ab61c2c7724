"""The ACP bridge against hostile session data (issue 18 item 3): a prompt the store cannot keep
is answered with an error and queues nothing; session/load of a damaged session answers a
JSON-RPC error naming the reason, publishes nothing, and the bridge goes on serving."""

from __future__ import annotations

from pathlib import Path

import trio_agents.agent as ag
from tests.helpers.acp_bridge import serve
from tests.helpers.acp_support import CWD
from trio_agents.session import JsonlStore, UserMessage, dump_record

HEADER = '{"format":"trio-agents-session","version":1,"session_id":"%s"}\n'


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def state(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


async def test_a_prompt_with_a_lone_surrogate_is_refused_and_nothing_is_queued(
    tmp_path: Path,
) -> None:
    """The frame's own decoder refuses it (-32700 with the request's id, so the client knows
    which request failed); the agent has nothing queued or recorded; the next prompt runs."""
    async with serve(store=JsonlStore(tmp_path)) as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        agent = s.agent(session_id)
        before = agent.session.records
        frame = (
            b'{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"'
            + session_id.encode()
            + b'","prompt":[{"type":"text","text":"a \\ud800 b"}]}}\n'
        )
        await s.client.stream.send_all(frame)
        _, answer = await s.client.until(7)
        assert answer["error"]["code"] in (-32700, -32602), answer
        assert "surrogate" in answer["error"]["message"]
        assert agent.queued() == ()
        assert agent.session.records == before
        _, ok = await s.client.until(await s.client.prompt(session_id, "fine"))
        assert ok["result"] == {"stopReason": "end_turn"}
    text = (tmp_path / f"{session_id}.jsonl").read_bytes().decode("utf-8")
    assert "ud800" not in text


async def test_load_of_a_damaged_session_names_the_reason_and_publishes_nothing(
    tmp_path: Path,
) -> None:
    """-32602 with the reason (not an internal error); no agent, no AgentCreated, no update
    claiming a replay; the file untouched; a good session loads after it on the same
    connection."""
    good = dump_record(UserMessage(message_id="m", content="hi", turn_id="t", seq=0)) + "\n"
    bad = tmp_path / "bad.jsonl"
    write(bad, (HEADER % "bad").encode() + b"[" * 10_000 + b"\n" + good.encode())
    write(tmp_path / "good.jsonl", (HEADER % "good" + good).encode())
    before = state(bad)
    async with serve(store=JsonlStore(tmp_path)) as s:
        created: list[ag.AgentCreated] = []
        s.root.on(ag.AgentCreated, created.append)
        await s.client.initialize()
        request_id = await s.client.request(
            "session/load", {"sessionId": "bad", "cwd": CWD, "mcpServers": []}
        )
        seen, answer = await s.client.until(request_id)
        assert seen == []
        assert answer["error"]["code"] == -32602, answer
        assert "session 'bad' cannot be loaded" in answer["error"]["message"]
        assert "nested too deep" in answer["error"]["message"]
        assert "nested too deep" in answer["error"]["data"]["damaged"]
        assert s.agents.get("bad") is None
        assert created == []
        # The bridge has no session 'bad': a prompt to it is an unknown session.
        _, prompted = await s.client.until(await s.client.prompt("bad", "x"))
        assert prompted["error"]["code"] == -32002
        loaded = await s.client.call(
            "session/load", {"sessionId": "good", "cwd": CWD, "mcpServers": []}
        )
        assert set(loaded) == {"modes", "configOptions"}
        assert [e.agent_id for e in created] == ["good"]
    assert state(bad) == before


async def test_load_of_a_symlinked_session_is_refused_with_the_reason(tmp_path: Path) -> None:
    """A session file that is a link out of the store is not followed."""
    store, outside = tmp_path / "store", tmp_path / "outside"
    store.mkdir()
    outside.mkdir()
    write(outside / "x.jsonl", (HEADER % "x").encode())
    (store / "x.jsonl").symlink_to(outside / "x.jsonl")
    async with serve(store=JsonlStore(store)) as s:
        await s.client.initialize()
        request_id = await s.client.request(
            "session/load", {"sessionId": "x", "cwd": CWD, "mcpServers": []}
        )
        _, answer = await s.client.until(request_id)
        assert answer["error"]["code"] == -32602, answer
        assert "is a symbolic link" in answer["error"]["message"]
        assert s.agents.get("x") is None
    assert (outside / "x.jsonl").read_bytes() == (HEADER % "x").encode()
