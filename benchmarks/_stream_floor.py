"""The floor of ``bench_stream``: a bare trio JSON-RPC writer on stdin/stdout.

Run as a process of its own (``python benchmarks/_stream_floor.py``): it answers
``initialize`` and ``session/new``, and a ``session/prompt`` with one ``session/update``
``agent_message_chunk`` notification per word of the prompt (the frames ``trio-agents acp``
sends for the echo model's reply, byte for byte: compact JSON, UTF-8, one line each), each
encoded and written with its own ``send_all`` as it is produced, then the answer. No agent,
no session, no buffering: the least a trio program does to put the same frames on the pipe.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import trio

_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
# The echo model's chunks: one word with its trailing whitespace (ScriptedModel's split_words).
_WORDS = re.compile(r"\S+\s*|\s+")


def _frame(message: dict[str, Any]) -> bytes:
    return _encode(message).encode() + b"\n"


async def serve(receive: trio.abc.ReceiveStream, send: trio.abc.SendStream) -> None:
    """Answer the requests read from ``receive`` on ``send`` until ``receive`` ends."""
    buffer = bytearray()
    sessions = 0
    while data := await receive.receive_some(1 << 16):
        buffer += data
        while (end := buffer.find(b"\n")) >= 0:
            request = json.loads(bytes(buffer[:end]))
            del buffer[: end + 1]
            method, params = request["method"], request.get("params") or {}
            result: dict[str, Any]
            if method == "session/prompt":
                for word in _WORDS.findall(params["prompt"][0]["text"]):
                    update = {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": word},
                    }
                    await send.send_all(
                        _frame(
                            {
                                "jsonrpc": "2.0",
                                "method": "session/update",
                                "params": {"sessionId": params["sessionId"], "update": update},
                            }
                        )
                    )
                result = {"stopReason": "end_turn"}
            elif method == "session/new":
                sessions += 1
                result = {"sessionId": f"floor-{sessions}"}
            else:
                result = {"protocolVersion": 1}
            await send.send_all(_frame({"jsonrpc": "2.0", "id": request["id"], "result": result}))


async def main() -> None:
    """Serve stdin/stdout until stdin closes."""
    receive = trio.lowlevel.FdStream(sys.stdin.fileno())
    send = trio.lowlevel.FdStream(sys.stdout.fileno())
    await serve(receive, send)


if __name__ == "__main__":
    trio.run(main)
