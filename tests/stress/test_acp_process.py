"""The installed ``trio-agents acp`` under a stream of hostile frames, for a bounded time.

One server process takes batch after batch of frames drawn (with a seeded ``random.Random``,
printed on failure) from the shapes the red-team run used: deep nesting, lone surrogates in
ids, params and ``cwd``, invalid UTF-8, big and oversized frames, valid prompts to a live
session, cancels, and answers to nothing. After every batch a ``session/list`` with a fresh id
must be answered with a result: the server is still serving. At the end the client closes its
output and the server must exit 0 with no traceback on stderr.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import subprocess
from collections.abc import Callable
from typing import Any

import trio

from tests.helpers import budget
from tests.helpers.raw_acp import Raw
from tests.helpers.support import TRIO_AGENTS

Make = Callable[[random.Random, str], bytes]


def _frame(message: object) -> bytes:
    return json.dumps(message, ensure_ascii=True).encode() + b"\n"


def _request(request_id: object, method: str, params: object) -> bytes:
    return _frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def _prompt(session_id: str, text: str) -> object:
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


SHAPES: list[Make] = [
    lambda r, s: b"[" * r.choice([100, 10_000, 100_000]) + b"\n",
    lambda r, s: b'{"a":' * r.randint(60, 5_000) + b"1" + b"}" * 10 + b"\n",
    lambda r, s: (
        bytes(r.randrange(256) for _ in range(r.randint(1, 300))).replace(b"\n", b"") + b"\n"
    ),
    lambda r, s: _request("\ud800", "session/list", {}),
    lambda r, s: _request(
        r.randint(0, 10**6),
        "session/load",
        {"sessionId": "\ud800", "cwd": "/tmp", "mcpServers": []},
    ),
    lambda r, s: _request(
        r.randint(0, 10**6), "session/new", {"cwd": "/tmp/\udcff", "mcpServers": []}
    ),
    lambda r, s: _request(r.randint(0, 10**6), "session/prompt", _prompt(s, "a\ud800b")),
    lambda r, s: _request(
        r.randint(0, 10**6), "session/prompt", _prompt(s, "x" * r.choice([10, 10_000, 1_000_000]))
    ),
    lambda r, s: _frame({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": s}}),
    lambda r, s: _frame({"jsonrpc": "2.0", "id": r.randint(0, 10**6), "result": {"x": [1] * 10}}),
    lambda r, s: _request([1], "initialize", {"protocolVersion": "1"}),
    lambda r, s: _request(r.random(), "session/list", {"cwd": 5}),
    lambda r, s: (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":NaN}}\n'
    ),
    lambda r, s: b"x" * (17 * 1024 * 1024) + b"\n",  # past the 16 MiB frame bound
]
# The oversized frame costs 17 MiB a time: rare in the small budget.
WEIGHTS = [3] * (len(SHAPES) - 1) + [budget.count(0, 1)]


async def test_the_command_keeps_serving_through_hostile_frames() -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    deadline = trio.current_time() + budget.seconds(3, 60)
    process = await trio.lowlevel.open_process(
        [str(TRIO_AGENTS), "acp", "--store", "memory"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = bytearray()

    async def read_stderr() -> None:
        assert process.stderr is not None
        while data := await process.stderr.receive_some(1 << 16):
            errors.extend(data[-65536:])
            del errors[:-65536]

    raw = Raw(process)
    answers_in, answers = trio.open_memory_channel[dict[str, Any]](math.inf)

    async def read_stdout() -> None:
        # Always reading: a server blocked on a full pipe would stop reading us too.
        with contextlib.suppress(EOFError):
            while True:
                message = await raw.next()
                if "method" not in message:
                    answers_in.send_nowait(message)

    async def answer_to(request_id: str) -> dict[str, Any]:
        with trio.fail_after(60):
            async for message in answers:
                if message["id"] == request_id:
                    return message
        raise AssertionError(f"the server closed its output before answering {request_id}")

    sent = batches = 0
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_stderr)
            nursery.start_soon(read_stdout)
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
            await answer_to("init")
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": "new",
                    "method": "session/new",
                    "params": {"cwd": "/tmp", "mcpServers": []},
                }
            )
            session_id = (await answer_to("new"))["result"]["sessionId"]
            while trio.current_time() < deadline:
                batch = [
                    rng.choices(SHAPES, WEIGHTS)[0](rng, session_id)
                    for _ in range(rng.randint(1, 20))
                ]
                await raw.write(b"".join(batch))
                sent += len(batch)
                batches += 1
                ping = f"ping-{batches}"
                await raw.send(
                    {"jsonrpc": "2.0", "id": ping, "method": "session/list", "params": {}}
                )
                answer = await answer_to(ping)
                assert "result" in answer, (seed, answer)
            await raw.stdin.aclose()
            with trio.fail_after(60):
                status = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    print(f"acp fuzz (seed {seed}): {sent} hostile frames in {batches} batches, 0 crashes")
    assert status == 0, (seed, bytes(errors[-2000:]))
    assert b"Traceback" not in errors, (seed, bytes(errors[-2000:]))
