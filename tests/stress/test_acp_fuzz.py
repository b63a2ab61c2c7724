"""Hostile ACP input at the frame and at the byte level: every request is answered, and the
bridge goes on serving.

Each example opens a bridge on a memory stream pair (one ``trio.run`` under an autojumping
clock), initializes it and opens a session, then sends a generated mix of frames: requests
to every method with random and hostile params (lone surrogates, deep nesting, wrong types,
huge strings), notifications, answers to requests never made, and raw lines that are not JSON
at all, split into chunks at random places. Then it closes its output and reads to the end.

Invariants: every well-formed request (an object with a fresh int or clean str id and a str
method) gets exactly one answer with that id; every frame the bridge writes is UTF-8 JSON-RPC
2.0; the last request (``session/list``, sent after all the garbage) is answered with a
result; the bridge ends without a failure. The byte-level variant sends arbitrary bytes and
requires the same of the well-formed requests mixed into them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_agents.agent as ag
from tests.helpers import budget
from trio_agents.acp import AcpBridge
from trio_agents.acp._framing import LineFramer, Oversized
from trio_agents.kernel import FiberState

SESSION = "<session>"  # replaced by the id of the session the example opened
METHODS = (
    "initialize",
    "session/new",
    "session/load",
    "session/prompt",
    "session/cancel",
    "session/list",
    "session/set_mode",
    "authenticate",
    "no/such/method",
)

hostile_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\u2028", "\ufeff", SESSION, "/tmp", ""]),
    st.integers(1_000, 200_000).map(lambda n: "x" * n),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


def _prompt(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


params_by_method: dict[str, st.SearchStrategy[Any]] = {
    "session/prompt": st.fixed_dictionaries(
        {"sessionId": st.sampled_from([SESSION, "nope", "\ud800"]) | hostile_text},
        optional={"prompt": st.builds(_prompt, hostile_text) | json_values},
    ),
    "session/load": st.fixed_dictionaries(
        {"sessionId": hostile_text, "cwd": hostile_text, "mcpServers": st.just([]) | json_values}
    ),
    "session/new": st.fixed_dictionaries(
        {"cwd": st.just("/tmp") | hostile_text, "mcpServers": st.just([]) | json_values}
    ),
    "session/cancel": st.fixed_dictionaries({"sessionId": st.just(SESSION) | hostile_text}),
}


@attrs.frozen
class Frame:
    """One line to send: ``expect`` is the id whose single answer the invariant requires."""

    line: bytes
    expect: int | str | None = None


def _dump(message: object) -> bytes:
    # ensure_ascii writes a lone surrogate as the escape "\ud800": valid bytes, hostile text.
    return json.dumps(message, ensure_ascii=True).encode()


@st.composite
def requests(draw: st.DrawFn, ids: Iterator[int]) -> Frame:
    method = draw(st.sampled_from(METHODS))
    params = draw(params_by_method.get(method, json_values))
    well_formed = draw(st.booleans())
    request_id: Any = next(ids) if well_formed else draw(json_values)
    if well_formed and draw(st.booleans()):
        request_id = f"id-{request_id}"
    message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return Frame(_dump(message), request_id if well_formed else None)


raw_lines = st.one_of(
    st.just(b"[" * 100_000),
    st.just(b'{"jsonrpc": "2.0", "id": 1, "method": ' + b"[" * 5_000),
    st.just(b"\xff\xfe\xfd"),
    st.just(b'{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": NaN}'),
    st.just(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "session/list", "params": {}}'),
    st.just(b""),
    st.just(b"   "),
    st.binary(max_size=64).filter(lambda b: b"\n" not in b),
    json_values.map(_dump),
)


@st.composite
def programs(draw: st.DrawFn) -> list[Frame]:
    ids = itertools.count(1000)
    frame = st.one_of(
        requests(ids),
        raw_lines.map(Frame),
        st.builds(
            lambda method, params: Frame(
                _dump({"jsonrpc": "2.0", "method": method, "params": params})
            ),
            st.sampled_from(METHODS),
            json_values,
        ),
        json_values.map(
            lambda result: Frame(_dump({"jsonrpc": "2.0", "id": 99, "result": result}))
        ),
    )
    return draw(st.lists(frame, max_size=12))


@attrs.define
class Peer:
    """The client end: frames out (split at chosen places), every answer in."""

    stream: trio.StapledStream[Any, Any]
    framer: LineFramer = attrs.Factory(lambda: LineFramer(64 * 1024 * 1024))
    received: list[dict[str, Any]] = attrs.Factory(list)

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_to_end(self) -> None:
        """Read until the bridge closes its side (our side is closed for writing by then)."""
        while data := await self.stream.receive_some(1 << 16):
            for frame in self.framer.feed(data):
                assert not isinstance(frame, Oversized)
                message = json.loads(frame.decode("utf-8"))  # strict UTF-8, real JSON
                assert message["jsonrpc"] == "2.0", message
                self.received.append(message)

    async def call(self, request_id: int, method: str, params: object) -> dict[str, Any]:
        await self.send(
            _dump({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + b"\n"
        )
        while True:
            data = await self.stream.receive_some(1 << 16)
            assert data, "the bridge closed its output"
            for frame in self.framer.feed(data):
                assert not isinstance(frame, Oversized)
                message: dict[str, Any] = json.loads(frame)
                if message.get("id") == request_id and "method" not in message:
                    return message
                self.received.append(message)


def _answers(received: list[dict[str, Any]], request_id: int | str) -> list[dict[str, Any]]:
    return [m for m in received if "method" not in m and m.get("id") == request_id]


async def _exercise(chunks: list[bytes], expected: list[int | str], tail: bytes = b"") -> None:
    async with ag.open_runtime(model="echo") as root:
        ours, theirs = trio.testing.memory_stream_pair()
        bridge = AcpBridge(ours)
        fiber = await root.plugin(bridge)
        peer = Peer(theirs)
        assert "result" in await peer.call(1, "initialize", {"protocolVersion": 1})
        opened = await peer.call(2, "session/new", {"cwd": "/tmp", "mcpServers": []})
        session_id = opened["result"]["sessionId"]
        for chunk in chunks:
            await peer.send(chunk.replace(SESSION.encode(), session_id.encode()))
        await peer.send(
            _dump({"jsonrpc": "2.0", "id": "last", "method": "session/list", "params": {}}) + b"\n"
        )
        await peer.send(tail)  # the client may go away in the middle of a frame
        await theirs.send_stream.aclose()
        await peer.read_to_end()
        await bridge.wait_closed()
        assert fiber.state is not FiberState.FAILED
        for request_id in expected:
            assert len(_answers(peer.received, request_id)) == 1, request_id
        (last,) = _answers(peer.received, "last")
        assert "result" in last, last
        await fiber.dispose()


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]


@settings(
    max_examples=budget.examples(40, 500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    programs(),
    st.lists(st.integers(min_value=0), max_size=6),
    st.sampled_from([b"", b'{"jsonrpc": "2.0", "id": 5, "meth', b"[[[[", b"\xe2\x82"]),
)
def test_hostile_frames_are_answered_and_serving_goes_on(
    program: list[Frame], cuts: list[int], tail: bytes
) -> None:
    data = b"".join(f.line + b"\n" for f in program)
    expected = [f.expect for f in program if f.expect is not None]
    trio.run(
        _exercise,
        _split(data, cuts),
        expected,
        tail,
        clock=trio.testing.MockClock(autojump_threshold=0),
    )


@settings(
    max_examples=budget.examples(40, 500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.binary(max_size=200) | requests(itertools.count(5000)), max_size=10))
def test_arbitrary_bytes_never_stop_the_bridge(parts: list[bytes | Frame]) -> None:
    """Bytes with no structure at all (newlines anywhere), with well-formed requests between.

    A request is expected to be answered only when it starts a line: garbage before it on the
    same line makes it part of the garbage.
    """
    data = b""
    expected: list[int | str] = []
    for part in parts:
        if isinstance(part, Frame):
            data += b"\n" + part.line + b"\n"
            if part.expect is not None:
                expected.append(part.expect)
        else:
            data += part
    trio.run(
        _exercise, [data + b"\n"], expected, clock=trio.testing.MockClock(autojump_threshold=0)
    )
