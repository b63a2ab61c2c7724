"""ACP prompt round trip (echo model, memory store, one session) against a JSON-RPC echo.

A client in the same process talks newline-delimited JSON-RPC over a real socket pair to the
:class:`~trio_agents.acp.AcpBridge` plugin on a runtime with a :class:`MemoryStore` and the
default echo model: ``initialize``, ``session/new``, then ``session/prompt`` after
``session/prompt``, each timed from the request's first byte sent until its response is read
(the ``session/update`` with the echoed text comes before it). The floor is the least a
JSON-RPC server does for the same exchange over the same kind of socket pair: read a line,
``json.loads`` it, write one ``session/update`` notification and the result, each
``json.dumps``-ed; the client is the same code. Both sides run in one ``trio.run``, samples
interleaved in blocks. Goals: p50 at most 0.5 ms, at least 2,000 prompts/s.

To tell the bridge's share from the agent's, a third side times the same turn without the
bridge: ``agent.prompt(text)`` then ``await agent.when_idle()`` on a second echo agent of the
same runtime, whose session grows by the same number of turns as the bridge's (so history
costs match). The round trip's p50 less that turn's p50 is what the client, the socket pair
and the bridge add to the turn; of that, the floor's p50 is what any JSON-RPC server pays.

A fourth figure is an editor's edit (issue #40): a prompt whose turn calls ``edit_file``
through a second connection whose client offers ``fs/*``, so the tool reads and writes the
file as the client's buffer (two more requests to the client in the turn).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import trio

import trio_agents as ta
from trio_agents.acp import AcpBridge
from trio_agents.workspace import LocalFiles, tool_files

from ._common import line

PROMPTS = 300
ROUNDS = 3


class _Client:
    """Lines out, JSON-RPC messages in."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._next_id = 0
        #: Answers the agent's requests (``fs/*``, permissions): the result member.
        self.answer: Callable[[dict[str, Any]], Any] | None = None

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request; read messages until its response, which is returned."""
        self._next_id += 1
        request_id = self._next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self._stream.send_all(json.dumps(message).encode() + b"\n")
        while True:
            answer = await self._read()
            if "method" in answer and "id" in answer and self.answer is not None:
                reply = {"jsonrpc": "2.0", "id": answer["id"], "result": self.answer(answer)}
                await self._stream.send_all(json.dumps(reply).encode() + b"\n")
                continue
            if "method" not in answer and answer.get("id") == request_id:
                if "error" in answer:
                    raise RuntimeError(f"{method} failed: {answer['error']}")
                result: dict[str, Any] = answer["result"]
                return result

    async def _read(self) -> dict[str, Any]:
        while (end := self._buffer.find(b"\n")) < 0:
            data = await self._stream.receive_some(1 << 16)
            if not data:
                raise EOFError("the server closed the connection")
            self._buffer += data
        frame = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        message: dict[str, Any] = json.loads(frame)
        return message


async def _echo_server(stream: trio.SocketStream) -> None:
    """The floor: a minimal JSON-RPC server answering session/prompt like the bridge."""
    buffer = bytearray()
    while data := await stream.receive_some(1 << 16):
        buffer += data
        while (end := buffer.find(b"\n")) >= 0:
            request = json.loads(bytes(buffer[:end]))
            del buffer[: end + 1]
            params = request.get("params", {})
            out = b""
            if request["method"] == "session/prompt":
                update = {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": params["sessionId"],
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": params["prompt"][0]["text"]},
                        },
                    },
                }
                out += json.dumps(update).encode() + b"\n"
                result: dict[str, Any] = {"stopReason": "end_turn"}
            elif request["method"] == "session/new":
                result = {"sessionId": "s1"}
            else:
                result = {"protocolVersion": 1}
            out += json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
            await stream.send_all(out + b"\n")


async def _open(client: _Client, *, fs: bool = False) -> str:
    capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}} if fs else {}
    await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    session = await client.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    session_id: str = session["sessionId"]
    return session_id


async def _prompts(client: _Client, session_id: str, count: int, into: list[float]) -> None:
    for i in range(count):
        start = time.perf_counter()
        await client.call(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": f"hello {i}"}]},
        )
        into.append(time.perf_counter() - start)


async def _turns(agent: ta.Agent, count: int, into: list[float]) -> None:
    for i in range(count):
        start = time.perf_counter()
        agent.prompt(f"hello {i}")
        await agent.when_idle()
        into.append(time.perf_counter() - start)


class _Buffers:
    """The client's side of ``fs/*``: one file's text in memory, as an editor's buffer."""

    def __init__(self) -> None:
        self.text = "a\n"

    def __call__(self, request: dict[str, Any]) -> Any:
        method, params = request["method"], request["params"]
        if method == "fs/read_text_file":
            return {"content": self.text}
        if method == "fs/write_text_file":
            self.text = params["content"]
            return None
        # session/request_permission: always allow, so only the first edit asks.
        return {"outcome": {"outcome": "selected", "optionId": "allow-always"}}


async def _edits(client: _Client, session_id: str, count: int, into: list[float]) -> None:
    """``edit_file`` through the client's ``fs/*`` (read, then write), as an editor runs it."""
    for i in range(count):
        old, new = ("a", "b") if i % 2 == 0 else ("b", "a")
        args = json.dumps({"path": "note.txt", "old_text": old, "new_text": new})
        start = time.perf_counter()
        await client.call(
            "session/prompt",
            {
                "sessionId": session_id,
                "prompt": [{"type": "text", "text": f"!tool edit_file {args}"}],
            },
        )
        into.append(time.perf_counter() - start)


def _p50(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


async def measure(prompts: int = PROMPTS, rounds: int = ROUNDS) -> dict[str, float]:
    """p50 round trip (ms) and prompts/s of the bridge and of the floor."""
    floor_samples: list[float] = []
    bridge_samples: list[float] = []
    turn_samples: list[float] = []
    edit_samples: list[float] = []
    floor_best = bridge_best = float("inf")
    async with trio.open_nursery() as nursery:
        a, b = trio.socket.socketpair()
        nursery.start_soon(_echo_server, trio.SocketStream(a))
        floor = _Client(trio.SocketStream(b))
        floor_session = await _open(floor)
        async with ta.open_runtime(store=ta.MemoryStore()) as root:
            await root.plugin(LocalFiles())
            await root.plugin(tool_files)
            c, d = trio.socket.socketpair()
            server_stream = trio.SocketStream(c)
            bridge = AcpBridge(server_stream)
            fiber = await root.plugin(bridge)
            client_stream = trio.SocketStream(d)
            client = _Client(client_stream)
            session_id = await _open(client)
            # A second connection whose client offers fs/*: edit_file goes through it.
            e, f = trio.socket.socketpair()
            editor_bridge = AcpBridge(trio.SocketStream(e))
            editor_fiber = await root.plugin(editor_bridge)
            editor_stream = trio.SocketStream(f)
            editor = _Client(editor_stream)
            buffers = editor.answer = _Buffers()
            editor_session = await _open(editor, fs=True)
            await _edits(editor, editor_session, 21, [])  # warm-up (asked once, always)
            assert buffers.text == "b\n", "the edits did not reach the client's buffer"
            alone = await root.agents.create()
            await _prompts(floor, floor_session, 20, [])  # warm-up
            await _prompts(client, session_id, 20, [])
            await _turns(alone.agent, 20, [])
            for _ in range(rounds):
                block: list[float] = []
                await _prompts(floor, floor_session, prompts, block)
                floor_best = min(floor_best, sum(block))
                floor_samples += block
                block = []
                await _prompts(client, session_id, prompts, block)
                bridge_best = min(bridge_best, sum(block))
                bridge_samples += block
                await _turns(alone.agent, prompts, turn_samples)
                await _edits(editor, editor_session, prompts // 3 // 2 * 2, edit_samples)
            await alone.dispose()
            await editor_stream.aclose()
            await editor_bridge.wait_closed()
            await editor_fiber.dispose()
            await client_stream.aclose()
            await bridge.wait_closed()
            await fiber.dispose()
        nursery.cancel_scope.cancel()
    ms = 1e3
    r = {
        "floor_p50": _p50(floor_samples) * ms,
        "bridge_p50": _p50(bridge_samples) * ms,
        "floor_rate": prompts / floor_best,
        "bridge_rate": prompts / bridge_best,
    }
    r["ratio"] = r["bridge_p50"] / r["floor_p50"]
    r["turn_p50"] = _p50(turn_samples) * ms
    r["bridge_share_p50"] = r["bridge_p50"] - r["turn_p50"]
    r["edit_p50"] = _p50(edit_samples) * ms
    return r


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(
        f"ACP session/prompt round trip over a socket pair, echo model, MemoryStore "
        f"({ROUNDS} x {PROMPTS}):"
    )
    print(line("floor p50 (minimal JSON-RPC echo server):", r["floor_p50"] * 1000, "us"))
    print(line("trio_agents AcpBridge p50:", r["bridge_p50"] * 1000, "us"))
    print(line("floor prompts/s (best block):", r["floor_rate"]))
    print(line("trio_agents AcpBridge prompts/s (best block):", r["bridge_rate"]))
    print(f"  ratio: a prompt round trip takes {r['ratio']:.1f}x the floor (p50)")
    print(line("the same echo turn without the bridge, p50:", r["turn_p50"] * 1000, "us"))
    print(
        line(
            "round trip p50 - turn p50 (client, socket, bridge):",
            r["bridge_share_p50"] * 1000,
            "us",
        )
    )
    print(
        line("edit_file through the client's fs/* (read + write), p50:", r["edit_p50"] * 1000, "us")
    )
    return r


if __name__ == "__main__":
    main()
