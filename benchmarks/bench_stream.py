"""Streamed deltas through ``trio-agents acp`` to a client process, against a bare trio writer.

The path a user watches while a reply streams in an editor: the model's deltas go through the
agent (its turn, the session's records, the ``AgentOutput`` events), the ACP bridge (one
``session/update`` ``agent_message_chunk`` notification per delta, the writer task) and a pipe
to the client. The agent side is a real ``trio-agents acp --store memory`` process (the
default echo model, which streams the prompt back one word per delta); the client is this
benchmark's process, which sends ``session/prompt`` with a text of :data:`DELTAS` short words
on a fresh session and reads every frame (split into lines, each ``json.loads``-ed, the
chunks' text checked against the prompt) until the prompt's answer. Deltas per second are
the words over the time from the request's first byte to the answer's last.

The floor (``_stream_floor.py``) is a process of its own too: a bare trio program that reads
the same requests from its stdin and writes the same frames, byte for byte, to its stdout,
each encoded and written with its own ``send_all`` as it is made, then the answer. Same kind
of pipe, same reader. Rounds are interleaved and each side keeps its best. Goal (issue #43
item 5): the bridge at least 0.5x the floor's deltas/s.

The reader's own rate (the same client code parsing the floor's frames from memory, no pipe)
is printed too: a side reading near it would be measuring the reader, not the writer.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_agents as ta
from trio_agents.acp import AcpBridge
from trio_agents.agent import AgentCreated
from trio_agents.session import SessionAppended, TurnEnded

from . import _stream_floor, bench_instructions
from ._common import line

#: Words (so deltas) per prompt, rounds per side.
DELTAS = 2_000
ROUNDS = 7
#: The two prompt sizes counted under callgrind: a delta's count is their difference over
#: the difference of their sizes, so what a prompt costs whatever its size cancels out.
COUNTED = (500, 2_500)


class _Peer:
    """A JSON-RPC client of one process over its stdin/stdout pipes."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._send = process.stdin
        self._receive = process.stdout
        self._buffer = bytearray()
        self._next_id = 0

    async def call(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Send one request; read every frame until its answer. Returns the answer's result and
        the text of the ``agent_message_chunk`` updates read before it."""
        self._next_id += 1
        request_id = self._next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self._send.send_all(json.dumps(message).encode() + b"\n")
        chunks: list[str] = []
        while True:
            while (end := self._buffer.find(b"\n")) < 0:
                data = await self._receive.receive_some(1 << 16)
                if not data:
                    raise EOFError(f"the process closed its output during {method}")
                self._buffer += data
            for frame in _frames(self._buffer, end):
                answer = json.loads(frame)
                if answer.get("method") == "session/update":
                    update = answer["params"]["update"]
                    if update["sessionUpdate"] == "agent_message_chunk":
                        chunks.append(update["content"]["text"])
                elif answer.get("id") == request_id:
                    if "error" in answer:
                        raise RuntimeError(f"{method} failed: {answer['error']}")
                    return answer["result"], "".join(chunks)

    async def aclose(self) -> None:
        await self._send.aclose()


def _frames(buffer: bytearray, end: int) -> list[bytes]:
    """The complete lines at the head of ``buffer`` (its last newline at or after ``end``),
    taken out of it."""
    last = buffer.rfind(b"\n")
    frames = bytes(buffer[:last]).split(b"\n")
    del buffer[: last + 1]
    return frames


def _prompt_text(deltas: int) -> str:
    # Short words, each a delta of the echo model (a word and its space): "w0 w1 ... ".
    return "".join(f"w{i} " for i in range(deltas))


async def _open(peer: _Peer) -> None:
    await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})


async def _stream_once(peer: _Peer, cwd: str, text: str) -> float:
    """Seconds for one prompt of ``text`` on a fresh session, until its answer."""
    session, _ = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    start = time.perf_counter()
    result, streamed = await peer.call(
        "session/prompt",
        {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": text}]},
    )
    elapsed = time.perf_counter() - start
    if result.get("stopReason") != "end_turn" or streamed != text:
        raise RuntimeError(f"the stream was not the prompt echoed: {result}, {streamed[:80]!r}")
    return elapsed


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``; clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _reader_rate(text: str) -> float:
    """Frames per second the client's parsing takes, on the floor's frames, from memory."""
    frames = bytearray()
    for word in text.split(" ")[:-1]:
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": word}}
        frames += json.dumps(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"update": update}},
            separators=(",", ":"),
        ).encode()
        frames += b"\n"
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        buffer = bytearray(frames)
        chunks = []
        for frame in _frames(buffer, 0):
            answer = json.loads(frame)
            if answer.get("method") == "session/update":
                chunks.append(answer["params"]["update"]["content"]["text"])
        best = min(best, time.perf_counter() - start)
    return len(chunks) / best


async def measure(deltas: int = DELTAS, rounds: int = ROUNDS) -> dict[str, float]:
    """Best deltas/s of ``trio-agents acp`` and of the bare writer, interleaved."""
    text = _prompt_text(deltas)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    acp_cmd = [sys.executable, "-m", "trio_agents", "acp", "--store", "memory"]
    floor_cmd = [sys.executable, str(Path(__file__).with_name("_stream_floor.py"))]
    best = {"floor": float("inf"), "acp": float("inf")}
    cpu = {"floor": 0.0, "acp": 0.0}
    with tempfile.TemporaryDirectory() as cwd:
        pipes: dict[str, Any] = {
            "stdin": subprocess.PIPE,
            "stdout": subprocess.PIPE,
            "env": env,
            "cwd": cwd,
        }
        acp = await trio.lowlevel.open_process(acp_cmd, stderr=subprocess.DEVNULL, **pipes)
        floor = await trio.lowlevel.open_process(floor_cmd, **pipes)
        peers = {"floor": _Peer(floor), "acp": _Peer(acp)}
        try:
            for peer in peers.values():
                await _open(peer)
                await _stream_once(peer, cwd, text)  # warm-up
            pids = {"floor": floor.pid, "acp": acp.pid}
            for _ in range(rounds):
                for name, peer in peers.items():
                    before = _cpu_seconds(pids[name])
                    best[name] = min(best[name], await _stream_once(peer, cwd, text))
                    cpu[name] += _cpu_seconds(pids[name]) - before
        finally:
            for peer in peers.values():
                await peer.aclose()
            for process in (acp, floor):
                with trio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
    r = {name: deltas / seconds for name, seconds in best.items()}
    r["ratio"] = r["acp"] / r["floor"]
    # CPU time per delta of each writer process over every timed round (incl. session/new):
    # what the load moves least, beside the wall-clock rates.
    r["floor_cpu_us"] = cpu["floor"] / (rounds * deltas) * 1e6
    r["acp_cpu_us"] = cpu["acp"] / (rounds * deltas) * 1e6
    # (A run too short for a clock tick of the acp process's CPU reads no ratio.)
    r["cpu_ratio"] = r["floor_cpu_us"] / r["acp_cpu_us"] if r["acp_cpu_us"] else math.nan
    r["reader"] = _reader_rate(text)
    r["deltas"] = deltas
    return r


class _Counted:
    """One writer (``trio-agents``' bridge or the bare floor) serving requests written to it
    in this process, its frames going to a ``cat`` process (whose reading is not counted)."""

    def __init__(self, cat: subprocess.Popen[bytes]) -> None:
        assert cat.stdin is not None
        # A pipe that holds a whole prompt's frames: no write waits for cat, so once every
        # task waits, every frame is written.
        fcntl.fcntl(cat.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        self.output = trio.lowlevel.FdStream(os.dup(cat.stdin.fileno()))
        ours, theirs = trio.socket.socketpair()
        self.requests = trio.SocketStream(ours)
        self.input = trio.SocketStream(theirs)
        self._next_id = 0

    async def send(self, method: str, params: dict[str, Any]) -> None:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        await self.requests.send_all(json.dumps(message).encode() + b"\n")


async def _settle() -> None:
    # Until every task waits: the writer has written all it had (the pipe holds it).
    await trio.testing.wait_all_tasks_blocked()


async def _count_bridge(marks: bench_instructions.Marks, cat: subprocess.Popen[bytes]) -> None:
    counted = _Counted(cat)
    ended = created = trio.Event()

    def on_appended(event: SessionAppended) -> None:
        if isinstance(event.record, TurnEnded):
            ended.set()

    def on_created(event: AgentCreated) -> None:
        created.set()

    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        root.on(SessionAppended, on_appended)
        root.on(AgentCreated, on_created)
        bridge = AcpBridge(counted.output, counted.input)
        fiber = await root.plugin(bridge)
        await counted.send("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        for n, deltas in enumerate((100, *COUNTED)):
            created = trio.Event()
            await counted.send("session/new", {"cwd": "/tmp", "mcpServers": []})
            await created.wait()  # (after a check of the cwd in a worker thread)
            await _settle()
            session_id = bridge.statistics().sessions[n]
            ended = trio.Event()
            marks.toggle()
            prompt = [{"type": "text", "text": _prompt_text(deltas)}]
            await counted.send("session/prompt", {"sessionId": session_id, "prompt": prompt})
            await ended.wait()
            await _settle()
            marks.toggle()
            assert not bridge.statistics().unsent_bytes, "the frames were not all written"
            marks.dump(f"acp_{deltas}")
        await counted.requests.aclose()
        await bridge.wait_closed()
        await fiber.dispose()


async def _count_floor(marks: bench_instructions.Marks, cat: subprocess.Popen[bytes]) -> None:
    counted = _Counted(cat)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stream_floor.serve, counted.input, counted.output)
        for deltas in (100, *COUNTED):
            marks.toggle()
            await counted.send(
                "session/prompt",
                {"sessionId": "floor", "prompt": [{"type": "text", "text": _prompt_text(deltas)}]},
            )
            await _settle()
            marks.toggle()
            marks.dump(f"floor_{deltas}")
        await counted.requests.aclose()  # the floor's serve() returns at this EOF
    await counted.input.aclose()
    await counted.output.aclose()


async def _workload(library: str | None, cat: subprocess.Popen[bytes]) -> None:
    marks = bench_instructions.Marks(library)
    marks.start()
    marks.dump("setup")
    await _count_floor(marks, cat)
    await _count_bridge(marks, cat)


def workload(library: str | None) -> None:
    """The counted writers, one after the other (see :func:`instructions`)."""
    with subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as cat:
        trio.run(_workload, library, cat)
        assert cat.stdin is not None
        cat.stdin.close()


def instructions() -> dict[str, float]:
    """Instructions per delta of the bridge and of the floor, under callgrind (load-free).

    Each writer serves in one child interpreter (under valgrind) prompts written to it
    from that interpreter, and writes its frames to a ``cat`` process; only the span from
    the prompt's request until its last frame is written is collected, for two prompt
    sizes (:data:`COUNTED`), and a delta's count is the difference over the sizes'.
    """
    with tempfile.TemporaryDirectory(prefix="trio-agents-callgrind-") as tmp:
        directory = Path(tmp)
        library = bench_instructions.build_marks(directory)
        env = dict(os.environ, PYTHONHASHSEED="0", TRIO_AGENTS_CALLGRIND_MARKS=str(library))
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                "--collect-atstart=no",
                f"--callgrind-out-file={directory / 'callgrind.out'}",
                sys.executable,
                "-m",
                "benchmarks.bench_stream",
                "--workload",
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        counts = bench_instructions.read_dumps(directory)
    small, large = COUNTED
    r = {
        side: (counts[f"{side}_{large}"] - counts[f"{side}_{small}"]) / (large - small)
        for side in ("acp", "floor")
    }
    r["ratio"] = r["acp"] / r["floor"]
    return r


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(
        f"streamed deltas, echo model, {DELTAS:,} one-word deltas a prompt, "
        f"to a client process over pipes (best of {ROUNDS}):"
    )
    print(line("floor (a bare trio writer process, send_all a frame):", r["floor"]))
    print(line("trio-agents acp --store memory (agent, session, bridge):", r["acp"]))
    print(line("the client's reading alone (from memory, no pipe):", r["reader"]))
    print(f"  {'floor CPU time per delta (its process):':<56}{r['floor_cpu_us']:>12.1f} us")
    print(f"  {'trio-agents acp CPU time per delta (its process):':<56}{r['acp_cpu_us']:>12.1f} us")
    print(f"  ratio: the streamed path runs at {r['ratio']:.2f}x the floor's deltas/s")
    print(f"  ratio: a delta costs the floor {r['cpu_ratio']:.2f}x the CPU time it costs acp")
    reason = bench_instructions.unavailable()
    if reason is not None:
        print(f"  instructions per delta: not measured ({reason})")
        return r
    counts = instructions()
    print(line("floor's instructions per delta (callgrind):", counts["floor"], "Ir"))
    print(line("trio_agents' instructions per delta (acp, agent, session):", counts["acp"], "Ir"))
    print(f"  ratio: a delta executes {counts['ratio']:.2f}x the floor's instructions")
    r.update({f"ir_{side}": value for side, value in counts.items()})
    return r


if __name__ == "__main__":
    if sys.argv[1:2] == ["--workload"]:
        workload(os.environ.get("TRIO_AGENTS_CALLGRIND_MARKS"))
    else:
        main()
