"""The serving loop on its own, with fake method tables: failures are answered, EOF drains."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.acp import AcpBridge, _serving
from trio_agents.acp._framing import encode_frame
from trio_agents.acp._jsonrpc import Request, Response, RpcError
from trio_agents.acp._serving import Serving
from trio_agents.session import MemoryStore


def serving(send: trio.abc.SendStream, receive: trio.abc.ReceiveStream, log: list[str]) -> Serving:
    def sync_fails(request: Request) -> Any:
        raise ValueError("sync handler bug")

    async def concurrent_fails(request: Request) -> Any:
        await trio.lowlevel.checkpoint()
        raise KeyError("concurrent handler bug")

    async def refuses(request: Request) -> Any:
        await trio.lowlevel.checkpoint()
        raise RpcError(-32000, "refused", {"why": "test"})

    def responses(response: Response) -> None:
        log.append(f"response {response.id}")

    return Serving(
        send,
        receive,
        max_frame=1024,
        max_unsent=1 << 20,
        stall_seconds=10,
        sync={"sync": sync_fails},
        concurrent={"concurrent": concurrent_fails, "refuses": refuses},
        notifications={},
        on_response=responses,
        initialized=lambda: True,
    )


async def noop() -> None:
    await trio.lowlevel.checkpoint()


def decode(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.splitlines()]


async def test_handler_failures_are_internal_errors_and_serving_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sync or concurrent handler that raises is answered -32603 naming only the type."""
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    log: list[str] = []
    s = serving(agent_out, agent_in, log)
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "sync"},
        {"jsonrpc": "2.0", "id": 2, "method": "concurrent"},
        {"jsonrpc": "2.0", "id": 3, "method": "refuses"},
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: s.serve(
                on_eof=lambda: log.append("eof"),
                on_broken=nursery.cancel_scope.cancel,
                after_eof=noop,
                drain_seconds=1.0,
            )
        )
        await to_agent.send_all(b"".join(encode_frame(r) for r in requests))
        await trio.testing.wait_all_tasks_blocked()
        await to_agent.aclose()
    answers = {a["id"]: a for a in decode(bytes(await from_agent.receive_some()))}
    assert answers[1]["error"] == {"code": -32603, "message": "internal error: ValueError"}
    assert answers[2]["error"] == {"code": -32603, "message": "internal error: KeyError"}
    assert answers[3]["error"] == {"code": -32000, "message": "refused", "data": {"why": "test"}}
    assert log == ["eof"]
    failures = [r.getMessage() for r in caplog.records if r.exc_info]
    assert sorted(failures) == ["the 'concurrent' handler failed", "the 'sync' handler failed"]
    s.send(b"{}\n")  # after the connection closed: dropped, not raised
    await s.aclose()


class BrokenInput(trio.abc.ReceiveStream):
    """An input whose peer reset it: every read raises BrokenResourceError."""

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        raise trio.BrokenResourceError("connection reset")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_broken_input_counts_as_eof() -> None:
    """A read that fails is the client's EOF: on_eof, after_eof, then serve returns."""
    agent_out, _ = trio.testing.memory_stream_one_way_pair()
    log: list[str] = []

    async def after_eof() -> None:
        await trio.lowlevel.checkpoint()
        log.append("after_eof")

    s = serving(agent_out, BrokenInput(), log)
    with trio.fail_after(5):
        await s.serve(
            on_eof=lambda: log.append("eof"),
            on_broken=lambda: log.append("broken"),
            after_eof=after_eof,
            drain_seconds=1.0,
        )
    assert log == ["eof", "after_eof"]


class FailingAfter(trio.abc.ReceiveStream):
    """An input that delivers ``data``, then fails with ``error`` (a bug below serving)."""

    def __init__(self, data: bytes, error: Exception) -> None:
        self._data: bytes | None = data
        self._error = error

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if self._data is not None:
            data, self._data = self._data, None
            return data
        raise self._error

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def ok_serving(
    send: trio.abc.SendStream, receive: trio.abc.ReceiveStream, log: list[str]
) -> Serving:
    def notified(params: Any) -> None:
        raise RuntimeError("notification handler bug")

    def responded(response: Response) -> None:
        raise RuntimeError("response handler bug")

    return Serving(
        send,
        receive,
        max_frame=1024,
        max_unsent=1 << 20,
        stall_seconds=10,
        sync={"echo": lambda r: r.params, "nan": lambda r: {"x": float("nan")}},
        concurrent={},
        notifications={"n": notified},
        on_response=responded,
        initialized=lambda: True,
    )


async def test_a_failing_serve_still_sends_the_queued_answers() -> None:
    """Serving that fails (a bug) lets the answers already queued out, then raises."""
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    log: list[str] = []
    request = encode_frame({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1]})
    s = ok_serving(agent_out, FailingAfter(request, RuntimeError("boom")), log)
    with pytest.RaisesGroup(
        pytest.RaisesExc(RuntimeError, match=r"^boom$"), flatten_subgroups=True
    ):
        await s.serve(
            on_eof=lambda: log.append("eof"),
            on_broken=lambda: log.append("broken"),
            after_eof=noop,
            drain_seconds=1.0,
        )
    assert decode(bytes(await from_agent.receive_some())) == [
        {"jsonrpc": "2.0", "id": 1, "result": [1]}
    ]
    assert log == []


async def test_raising_handlers_and_unencodable_answers_never_end_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A raising notification or response handler is logged; a NaN answer is -32603."""
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    log: list[str] = []
    s = ok_serving(agent_out, agent_in, log)
    request_id, _ = s.rpc.request("session/request_permission", {})
    frames = [
        {"jsonrpc": "2.0", "method": "n", "params": {}},
        {"jsonrpc": "2.0", "id": request_id, "result": {}},
        {"jsonrpc": "2.0", "id": 1, "method": "nan"},
        {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": ["still serving"]},
    ]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: s.serve(
                on_eof=lambda: log.append("eof"),
                on_broken=nursery.cancel_scope.cancel,
                after_eof=noop,
                drain_seconds=1.0,
            )
        )
        await to_agent.send_all(b"".join(encode_frame(f) for f in frames))
        await trio.testing.wait_all_tasks_blocked()
        await to_agent.aclose()
    answers = decode(bytes(await from_agent.receive_some()))
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32603, "message": "internal error: the answer is not JSON"},
        },
        {"jsonrpc": "2.0", "id": 2, "result": ["still serving"]},
    ]
    assert log == ["eof"]
    messages = {r.getMessage() for r in caplog.records}
    assert "the 'n' notification handler failed" in messages
    assert f"handling the response to request {request_id} failed" in messages
    await s.aclose()


async def test_a_bridge_whose_serving_fails_closes_and_keeps_the_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The failure is one error log line and bridge.failure; the fiber and the runtime live on."""
    agent_out, from_agent = trio.testing.memory_stream_one_way_pair()
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    source = FailingAfter(encode_frame(initialize), RuntimeError("boom"))
    async with ag.open_runtime(store=MemoryStore(), model="echo") as root:
        bridge = AcpBridge(agent_out, source)
        fiber = await root.plugin(bridge)
        with trio.fail_after(5):
            await bridge.wait_closed()
        [answer] = decode(bytes(await from_agent.receive_some()))
        assert answer["result"]["protocolVersion"] == 1
        assert isinstance(bridge.failure, RuntimeError)
        assert str(bridge.failure) == "boom"
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert [r.getMessage() for r in errors] == [
            "the ACP server failed; every session was closed"
        ]
        assert errors[0].exc_info is not None
        assert errors[0].exc_info[1] is bridge.failure
        assert bridge.statistics().closed
        await fiber.dispose()


class RecordingOutput(trio.abc.SendStream):
    """An output that keeps each send_all's bytes, one entry per write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def _serving_in(
    nursery: trio.Nursery, output: RecordingOutput
) -> tuple[Serving, trio.testing.MemorySendStream]:
    to_agent, agent_in = trio.testing.memory_stream_one_way_pair()
    s = ok_serving(output, agent_in, [])
    nursery.start_soon(
        lambda: s.serve(
            on_eof=lambda: None,
            on_broken=nursery.cancel_scope.cancel,
            after_eof=noop,
            drain_seconds=1.0,
        )
    )
    await trio.testing.wait_all_tasks_blocked()
    return s, to_agent


async def test_frames_queued_in_consecutive_steps_leave_in_one_write_in_order() -> None:
    """A frame, then more queued by its producer's next step (a turn's last update and its
    answer): one write, in the order queued; a frame queued later gets a write of its own."""
    output = RecordingOutput()
    async with trio.open_nursery() as nursery:
        s, to_agent = await _serving_in(nursery, output)
        s.send(b"1\n")
        await trio.lowlevel.checkpoint()  # the producer's next step
        s.send(b"2\n")
        s.send(b"3\n")
        await trio.testing.wait_all_tasks_blocked()
        assert output.writes == [b"1\n2\n3\n"]
        assert s.unsent == 0
        s.send(b"4\n")
        await trio.testing.wait_all_tasks_blocked()
        assert output.writes == [b"1\n2\n3\n", b"4\n"]
        await to_agent.aclose()


async def test_one_write_joins_at_most_the_write_size_and_keeps_the_order() -> None:
    """Past _WRITE_SIZE bytes the queue leaves in several writes, in order, none of them
    larger than the bound unless it is one frame alone."""
    output = RecordingOutput()
    big = b"x" * (_serving._WRITE_SIZE - 1) + b"\n"
    frames = [b"a\n", b"b\n", big, big + big, b"c\n"]
    async with trio.open_nursery() as nursery:
        s, to_agent = await _serving_in(nursery, output)
        for frame in frames:
            s.send(frame)
        await trio.testing.wait_all_tasks_blocked()
        assert b"".join(output.writes) == b"".join(frames)
        assert output.writes == [b"a\nb\n", big, big + big, b"c\n"]
        assert s.unsent == 0
        await to_agent.aclose()


async def test_frames_queued_pass_after_pass_leave_in_one_write() -> None:
    """A producer that queues a frame a pass (a streamed reply's deltas) gets one write for
    all of them, once a pass queues nothing more."""
    output = RecordingOutput()
    async with trio.open_nursery() as nursery:
        s, to_agent = await _serving_in(nursery, output)
        for i in range(10):
            s.send(b"%d\n" % i, more=True)
            await trio.lowlevel.checkpoint()  # the producer's next step
        await trio.testing.wait_all_tasks_blocked()
        assert output.writes == [b"".join(b"%d\n" % i for i in range(10))]
        await to_agent.aclose()


async def test_a_producer_that_never_pauses_is_written_within_the_pass_bound() -> None:
    """Frames that keep coming, one a pass, still leave every _COALESCE_PASSES passes or so,
    in order: a frame never waits for later ones without bound."""
    output = RecordingOutput()
    frames = [b"%d\n" % i for i in range(5 * _serving._COALESCE_PASSES)]
    async with trio.open_nursery() as nursery:
        s, to_agent = await _serving_in(nursery, output)
        for frame in frames:
            s.send(frame, more=True)
            await trio.lowlevel.checkpoint()
        await trio.testing.wait_all_tasks_blocked()
        assert b"".join(output.writes) == b"".join(frames)
        assert len(output.writes) >= 4
        assert max(w.count(b"\n") for w in output.writes) <= _serving._COALESCE_PASSES + 2
        await to_agent.aclose()


async def test_frames_past_the_coalescing_bytes_leave_without_waiting_for_more() -> None:
    """Once _COALESCE_BYTES of frames wait, the writer writes them although more keep coming."""
    output = RecordingOutput()
    half = b"x" * (_serving._COALESCE_BYTES // 2) + b"\n"
    async with trio.open_nursery() as nursery:
        s, to_agent = await _serving_in(nursery, output)
        for _ in range(8):
            s.send(half, more=True)
            await trio.lowlevel.checkpoint()
        await trio.testing.wait_all_tasks_blocked()
        assert b"".join(output.writes) == half * 8
        assert max(len(w) for w in output.writes) <= 3 * len(half)
        await to_agent.aclose()


async def test_an_answer_ends_the_wait_for_more_streamed_frames() -> None:
    """Frames sent without more (an answer) leave at the writer's next pass, although
    streamed updates keep coming after it: an answer never waits for a stream."""
    output = RecordingOutput()
    async with trio.open_nursery() as nursery:
        s, to_agent = await _serving_in(nursery, output)
        for i in range(3):
            s.send(b"update %d\n" % i, more=True)
            await trio.lowlevel.checkpoint()
        s.send(b"answer\n")
        for i in range(3, 20):
            await trio.lowlevel.checkpoint()
            s.send(b"update %d\n" % i, more=True)
        await trio.testing.wait_all_tasks_blocked()
        assert b"answer\n" in output.writes[0]
        assert b"update 19\n" not in output.writes[0]
        await to_agent.aclose()
