"""A client that stops reading: the bridge's queue of unsent frames stays bounded."""

from __future__ import annotations

import json
import logging

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.acp import AcpBridge
from trio_agents.acp._framing import LineFramer, Oversized, encode_frame


async def _call(
    stream: trio.abc.Stream, framer: LineFramer, request_id: int, method: str, params: object
) -> dict:  # type: ignore[type-arg]
    await stream.send_all(
        encode_frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    )
    while True:
        data = await stream.receive_some(1 << 16)
        assert data, f"the bridge closed before answering {method}"
        for frame in framer.feed(data):
            assert not isinstance(frame, Oversized)
            message = json.loads(frame)
            if message.get("id") == request_id and "method" not in message:
                return message  # type: ignore[no-any-return]


async def test_a_client_that_stops_reading_is_disconnected_at_the_bound(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Past ``max_unsent`` queued bytes and 10 s without a read, the bridge closes as if the
    client had gone: its sessions are disposed and a warning says why."""
    async with ag.open_runtime(model="echo") as root:
        # Lockstep: a write completes only when the other side reads it.
        ours, theirs = trio.testing.lockstep_stream_pair()
        bridge = AcpBridge(ours, max_unsent=20_000)
        fiber = await root.plugin(bridge)
        framer = LineFramer()
        await _call(theirs, framer, 1, "initialize", {"protocolVersion": 1})
        opened = await _call(theirs, framer, 2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = opened["result"]["sessionId"]
        text = " ".join(f"word{i}" for i in range(2_000))  # echoed word by word: ~250 kB of frames
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        with caplog.at_level(logging.WARNING, logger="trio_agents.acp"):
            await theirs.send_all(
                encode_frame(
                    {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": prompt}
                )
            )
            # ... and never read again.
            start = trio.current_time()
            await bridge.wait_closed()
        assert trio.current_time() - start == pytest.approx(10)
        assert root.agents.get(session_id) is None
        assert bridge.statistics().closed
        assert bridge.statistics().unsent_bytes > 20_000
        assert any("has read nothing for 10 s" in r.getMessage() for r in caplog.records)
        await fiber.dispose()


async def test_a_client_that_reads_gets_answers_far_past_the_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reading client gets every frame, however far past the bound the agent runs ahead."""
    async with ag.open_runtime(model="echo") as root:
        # Buffered: every write completes at once, as into a pipe a client keeps reading.
        ours, theirs = trio.testing.memory_stream_pair()
        bridge = AcpBridge(ours, max_unsent=20_000)
        fiber = await root.plugin(bridge)
        framer = LineFramer()
        await _call(theirs, framer, 1, "initialize", {"protocolVersion": 1})
        opened = await _call(theirs, framer, 2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        text = " ".join(f"word{i}" for i in range(2_000))
        prompt = {
            "sessionId": opened["result"]["sessionId"],
            "prompt": [{"type": "text", "text": text}],
        }
        answer = await _call(theirs, framer, 3, "session/prompt", prompt)
        assert answer["result"]["stopReason"] == "end_turn"
        assert not bridge.statistics().closed
        await fiber.dispose()
