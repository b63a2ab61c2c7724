"""Raw frames against the installed ``trio-agents acp --store memory``: errors are answered,
ids are echoed exactly, big frames pass, and the command keeps serving."""

from __future__ import annotations

import json
import re
import subprocess

from tests.helpers.raw_acp import LIMIT, command
from tests.helpers.support import TRIO_AGENTS


async def test_malformed_json_is_answered_and_serving_goes_on() -> None:
    """Garbage is -32700 with id null; the next request is answered normally."""
    async with command() as raw:
        await raw.write(b"{this is not json\n")
        error = await raw.next()
        assert error["id"] is None
        assert error["error"]["code"] == -32700
        assert (await raw.initialize())["result"]["protocolVersion"] == 1


async def test_request_without_method_is_invalid_request() -> None:
    """An id with neither method nor result is -32600, the id echoed."""
    async with command() as raw:
        await raw.send({"jsonrpc": "2.0", "id": 9})
        error = await raw.answer_to(9)
        assert error["error"]["code"] == -32600
        assert (await raw.initialize())["result"]["protocolVersion"] == 1


async def test_unknown_method_is_method_not_found() -> None:
    """An unknown method is -32601; unknown notifications get nothing."""
    async with command() as raw:
        await raw.initialize()
        await raw.send({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"id": 1}})
        await raw.send({"jsonrpc": "2.0", "method": "x/unknown"})
        await raw.send({"jsonrpc": "2.0", "id": "m", "method": "x/unknown", "params": {}})
        error = await raw.answer_to("m")
        assert error["error"]["code"] == -32601


async def test_ids_zero_x_and_null_are_echoed_exactly() -> None:
    """initialize with ids 0, "x" and null: each answer carries the same id and type."""
    async with command() as raw:
        for request_id in (0, "x", None):
            answer = await raw.initialize(request_id)
            assert answer["result"]["protocolVersion"] == 1


async def test_five_megabyte_frames_pass_both_ways() -> None:
    """A 5 MB prompt is accepted, and the 5 MB echo comes back in one chunk frame."""
    word = "w" * (5 * 1024 * 1024)
    async with command() as raw:
        await raw.initialize()
        session_id = (await raw.new_session(2))["result"]["sessionId"]
        await raw.send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": word}]},
            }
        )
        update = await raw.next()
        assert update["method"] == "session/update"
        assert update["params"]["update"]["content"]["text"] == word
        assert (await raw.answer_to(3))["result"] == {"stopReason": "end_turn"}


async def test_frame_over_the_limit_is_refused_and_serving_goes_on() -> None:
    """A 17 MiB line is one -32700 error; the command answers the next request."""
    async with command() as raw:
        await raw.initialize()
        chunk = b"x" * (1024 * 1024)
        for _ in range(17):
            await raw.write(chunk)
        await raw.write(b"\n")
        error = await raw.next()
        assert error["error"]["code"] == -32700
        assert "larger than" in error["error"]["message"]
        assert (await raw.initialize(5))["result"]["protocolVersion"] == 1


async def test_eof_ends_the_command_with_status_zero() -> None:
    """Closing stdin with a session open ends the command cleanly (checked on exit)."""
    async with command() as raw:
        await raw.initialize()
        assert "sessionId" in (await raw.new_session(2))["result"]


def test_a_request_followed_by_eof_is_still_answered() -> None:
    """A client that sends initialize and closes its half still gets the answer, then exit 0."""
    request = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}
    done = subprocess.run(
        [str(TRIO_AGENTS), "acp", "--store", "memory"],
        input=json.dumps(request).encode() + b"\n",
        capture_output=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0
    [line] = done.stdout.splitlines()
    answer = json.loads(line)
    assert answer["id"] == 7
    assert answer["result"]["protocolVersion"] == 1


INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'

#: (frame, the id its answer carries): each of these killed the command before issue 18.
HOSTILE = [
    (b"[" * 100_000 + b"\n", None),
    (b'{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{}}\n', None),
    (
        b'{"jsonrpc":"2.0","id":2,"method":"session/load",'
        b'"params":{"sessionId":"\\ud800","cwd":"/tmp","mcpServers":[]}}\n',
        2,
    ),
    (
        b'{"jsonrpc":"2.0","id":3,"method":"session/new",'
        b'"params":{"cwd":"/tmp/\\ud800","mcpServers":[]}}\n',
        3,
    ),
    (b'{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"x":NaN}}\n', 4),
]


async def test_hostile_frames_are_parse_errors_and_the_command_goes_on() -> None:
    """Deep nesting and lone surrogates: -32700 each, queued answers kept, serving goes on."""
    async with command() as raw:
        # One write: the initialize answer is queued when the hostile frames arrive.
        await raw.write(INITIALIZE + b"".join(frame for frame, _ in HOSTILE))
        assert (await raw.answer_to(1))["result"]["protocolVersion"] == 1
        for _, request_id in HOSTILE:
            error = await raw.answer_to(request_id)
            assert error["error"]["code"] == -32700
            assert error["error"]["message"].startswith("parse error: ")
        session_id = (await raw.new_session(5))["result"]["sessionId"]
        await raw.send({"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {}})
        listed = (await raw.answer_to(6))["result"]["sessions"]
        assert [s["sessionId"] for s in listed] == [session_id]


def test_hostile_frames_leave_one_readable_line_each_and_status_zero() -> None:
    """Each refused frame is one warning line on stderr; EOF still ends the command with 0."""
    done = subprocess.run(
        [str(TRIO_AGENTS), "acp", "--store", "memory"],
        input=INITIALIZE + b"".join(frame for frame, _ in HOSTILE),
        capture_output=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0
    answers = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    assert [a["id"] for a in answers] == [1] + [request_id for _, request_id in HOSTILE]
    lines = done.stderr.decode().splitlines()
    assert len(lines) == len(HOSTILE)
    assert all(
        re.match(r"^trio-agents: warning: invalid frame .*: parse error: ", x) for x in lines
    )
    assert "Traceback" not in done.stderr.decode()
