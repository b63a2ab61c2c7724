"""Instructions per turn and per cancel, runtime and raw-trio floor: figures the load cannot move.

The wall-clock ratios of the other benchmarks move with the machine's load (a turn's floor read
40,825/s and 70,754/s fourteen minutes apart on an idle machine). Instruction counts do not: a
regression of a few percent shows in them at any load. ``perf stat -e instructions`` needs the
CPU's counters, which shared virtual machines often do not expose (``<not supported>`` on the
machines these benchmarks were written on), so the counts come from valgrind's callgrind, which
counts every instruction executed, on any machine, whatever else runs.

The workload runs in a child interpreter under ``valgrind --tool=callgrind --instr-atstart=no
--collect-atstart=no`` (with ``PYTHONHASHSEED=0``, so the run is the same each time). A tiny C
library (``callgrind_marks.c``, built with the machine's C compiler, called through ctypes)
starts the instrumentation once the imports are done (the run took 25 s instead of 63 s) and
turns the collection on around exactly what is counted, and dumps one total per side:

- a turn: ``TURNS`` rounds of ``agent.prompt`` + ``await agent.when_idle()`` on a fresh echo
  agent (``bench_agents``' model and ``MemoryStore``), against ``TURNS`` rounds of
  ``bench_agents``' raw floor (a task, two memory channels, five records in a list);
- a tool turn: the same rounds on ``bench_tools``' model (model -> ``echo`` tool -> model),
  untraced and traced (an SDK ``TracerProvider`` with the in-memory exporter, four spans a
  turn, ``bench_tracing``'s two sides), each on a fresh agent: what a tool step adds to a
  plain turn (issue #43's "tool turn vs plain turn") and what tracing adds to a tool turn
  (issue #41's "traced within 2x"); and the floor of the traced side, the SDK's own work
  for the same four spans and their attributes with no runtime around them (``turn_sdk``),
  and the runtime's own part of it, the same turn traced with OpenTelemetry's no-op tracer
  provider (``turn_traced_noop``: every span point and its context, no span made);
- a cancel: ``CANCELS`` times, from ``agent.cancel()`` of a turn parked in its model's stream
  until ``when_idle()`` returns, against ``scope.cancel()`` of a task blocked on an Event until
  it has signalled its exit (``bench_cancel``'s two sides); only that span is collected, and
  the cost of the two ctypes calls that bracket it (a span with nothing in it, counted the
  same way) is subtracted.

Both sides are warmed up first (``WARMUP`` rounds uncounted). The counts include the
interpreter's own work (CPython's eval loop), which is what a user's process pays; they are
of one CPython build, so compare them run to run on one machine, and read the ratios across
machines.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import trio
import trio.testing
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trio_agents as ta
from trio_agents.kernel import Context
from trio_agents.model import Model

from . import bench_agents, bench_cancel, bench_tools
from ._common import line

TURNS = 200
CANCELS = 200
WARMUP = 20
SIDES = (
    "turn_raw",
    "turn_agent",
    "turn_tool",
    "turn_traced",
    "turn_traced_noop",
    "turn_sdk",
    "cancel_raw",
    "cancel_agent",
    "null",
)

_SOURCE = Path(__file__).with_name("callgrind_marks.c")
_LIBRARY_VARIABLE = "TRIO_AGENTS_CALLGRIND_MARKS"


class Marks:
    """The callgrind client requests; no-ops when the library is absent or not under valgrind."""

    def __init__(self, library: str | None) -> None:
        self._lib = ctypes.CDLL(library) if library else None
        if self._lib is not None:
            self._lib.marks_dump.argtypes = [ctypes.c_char_p]

    def start(self) -> None:
        """Start instrumenting (what ran before ran at valgrind's uninstrumented speed)."""
        if self._lib is not None:
            self._lib.marks_start()

    def toggle(self) -> None:
        """Turn the collection on if it is off, off if it is on."""
        if self._lib is not None:
            self._lib.marks_toggle()

    def dump(self, label: str) -> None:
        """Write what was collected since the last dump, under ``label``, and start again."""
        if self._lib is not None:
            self._lib.marks_dump(label.encode())


async def _turns_raw(marks: Marks, turns: int) -> None:
    send_inbox, receive_inbox = trio.open_memory_channel[str](1)
    send_reply, receive_reply = trio.open_memory_channel[str](0)
    records: list[tuple[str, ...]] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bench_agents.raw_agent, receive_inbox, send_reply, records)
        for i in range(WARMUP):
            send_inbox.send_nowait(f"hello {i}")
            await receive_reply.receive()
        marks.toggle()
        for i in range(turns):
            send_inbox.send_nowait(f"hello {i}")
            await receive_reply.receive()
        marks.toggle()
        nursery.cancel_scope.cancel()
    marks.dump("turn_raw")


async def _turns_agent(
    marks: Marks, root: Context, turns: int, model: Model | None = None, label: str = "turn_agent"
) -> None:
    handle = await root.agents.create(model=model or bench_agents.Echo())
    agent = handle.agent
    for i in range(WARMUP):
        agent.prompt(f"hello {i}")
        await agent.when_idle()
    marks.toggle()
    for i in range(turns):
        agent.prompt(f"hello {i}")
        await agent.when_idle()
    marks.toggle()
    await handle.dispose()
    marks.dump(label)


async def _tool_turns(
    marks: Marks, turns: int, provider: trace.TracerProvider | None, label: str = "turn_tool"
) -> None:
    """A tool turn's rounds (``turn_tool``, or ``label`` with a tracer provider)."""
    async with ta.open_runtime(store=ta.MemoryStore(), tracer_provider=provider) as root:
        await root.plugin(bench_tools._EchoTool(bench_tools.echo))
        await _turns_agent(marks, root, turns, bench_tools._Caller(), label)


async def _cancels(marks: Marks, root: Context, cancels: int) -> None:
    handle = await root.agents.create(model=bench_cancel.Parked())
    agent = handle.agent
    async with trio.open_nursery() as nursery:
        for n in range(WARMUP + cancels):
            counted = n >= WARMUP
            done = trio.Event()
            scope = await nursery.start(bench_cancel.raw_waiter, trio.Event(), done)
            await trio.testing.wait_all_tasks_blocked()
            if counted:
                marks.toggle()
            scope.cancel()
            await done.wait()
            if counted:
                marks.toggle()
        marks.dump("cancel_raw")
        for n in range(WARMUP + cancels):
            counted = n >= WARMUP
            agent.prompt("go")
            await trio.testing.wait_all_tasks_blocked()
            if counted:
                marks.toggle()
            agent.cancel()
            await agent.when_idle()
            if counted:
                marks.toggle()
        marks.dump("cancel_agent")
        for _ in range(cancels):
            marks.toggle()
            marks.toggle()
        marks.dump("null")
    await handle.dispose()


async def workload(library: str | None, turns: int = TURNS, cancels: int = CANCELS) -> None:
    """Every side once, each dumped under its name (see the module's docstring)."""
    marks = Marks(library)
    marks.start()
    marks.dump("setup")
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        await _turns_raw(marks, turns)
        await _turns_agent(marks, root, turns)
        await _cancels(marks, root, cancels)
    await _tool_turns(marks, turns, None)
    await _tool_turns(marks, turns, _in_memory_provider(), "turn_traced")
    await _tool_turns(marks, turns, trace.NoOpTracerProvider(), "turn_traced_noop")
    _sdk_turns(marks, turns, _in_memory_provider())


def _sdk_turn(tracer: trace.Tracer, n: int) -> None:
    """The spans of one traced tool turn, made by calling the SDK directly: the turn's
    (current while it runs), two ``chat`` and one ``execute_tool``, with the attributes the
    runtime gives each, at their start and at their end."""
    agent = "bench-agent"
    turn = tracer.start_span(
        f"invoke_agent {agent}",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": agent,
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": agent,
            "trio_agents.turn.id": f"t-{n}",
        },
    )
    token = otel_context.attach(trace.set_span_in_context(turn))
    for step in range(2):
        chat = tracer.start_span(
            "chat bench-tool-caller",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "_Caller",
                "gen_ai.request.model": "bench-tool-caller",
            },
        )
        chat.set_attributes(
            {
                "gen_ai.response.model": "bench-tool-caller",
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.usage.input_tokens": 0,
                "gen_ai.usage.output_tokens": 0,
            }
        )
        chat.end()
        if step == 0:
            call = tracer.start_span(
                "execute_tool echo",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "echo",
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.id": "call-1",
                },
            )
            call.set_attributes({"trio_agents.tool.is_error": False})
            call.end()
    turn.set_attributes(
        {"trio_agents.turn.prompt_ids": [f"m-{n}"], "trio_agents.turn.stop_reason": "completed"}
    )
    otel_context.detach(token)
    turn.end()


def _sdk_turns(marks: Marks, turns: int, provider: TracerProvider) -> None:
    tracer = trace.get_tracer("trio_agents", tracer_provider=provider)
    for n in range(WARMUP):
        _sdk_turn(tracer, n)
    marks.toggle()
    for n in range(turns):
        _sdk_turn(tracer, n)
    marks.toggle()
    marks.dump("turn_sdk")


def _in_memory_provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return provider


def unavailable() -> str | None:
    """Why the counts cannot be taken here, or ``None``."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed"
    if (shutil.which("cc") or shutil.which("gcc")) is None:
        return "no C compiler (cc or gcc) to build callgrind_marks.c"
    header = Path("/usr/include/valgrind/callgrind.h")
    if not header.exists():
        return f"{header} is missing (install valgrind's development headers)"
    return None


def build_marks(directory: Path) -> Path:
    """Build the marks library (``callgrind_marks.c``) in ``directory``; its path."""
    compiler = shutil.which("cc") or shutil.which("gcc") or "cc"
    library = directory / "callgrind_marks.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(_SOURCE)], check=True
    )
    return library


_TRIGGER = re.compile(r"^desc: Trigger: Client Request: (\w+)$", re.MULTILINE)
_TOTALS = re.compile(r"^(?:totals|summary): (\d+)", re.MULTILINE)


def read_dumps(directory: Path) -> dict[str, int]:
    """``{label: instructions}`` from callgrind's dump files in ``directory``."""
    counts: dict[str, int] = {}
    for path in directory.glob("callgrind.out*"):
        text = path.read_text(errors="replace")
        label, total = _TRIGGER.search(text), _TOTALS.search(text)
        if label and total:
            counts[label.group(1)] = int(total.group(1))
    return counts


def per_operation(counts: dict[str, int], turns: int, cancels: int) -> dict[str, float]:
    """Instructions per turn and per cancel of each side, and the runtime-to-floor ratios."""
    null = counts["null"] / cancels
    r = {
        "turn_raw": counts["turn_raw"] / turns,
        "turn_agent": counts["turn_agent"] / turns,
        "cancel_raw": counts["cancel_raw"] / cancels - null,
        "cancel_agent": counts["cancel_agent"] / cancels - null,
        "marks": null,
    }
    r["turn_ratio"] = r["turn_agent"] / r["turn_raw"]
    r["cancel_ratio"] = r["cancel_agent"] / r["cancel_raw"]
    if "turn_tool" in counts and "turn_traced" in counts:
        r["turn_tool"] = counts["turn_tool"] / turns
        r["turn_traced"] = counts["turn_traced"] / turns
        r["turn_sdk"] = counts.get("turn_sdk", 0) / turns
        r["turn_traced_noop"] = counts.get("turn_traced_noop", 0) / turns
        r["own_share"] = r["turn_traced_noop"] / r["turn_tool"] - 1
        r["tool_vs_plain"] = r["turn_agent"] / r["turn_tool"]
        r["traced_vs_untraced"] = r["turn_traced"] / r["turn_tool"]
        r["sdk_floor"] = 1 + r["turn_sdk"] / r["turn_tool"]
    return r


def measure(turns: int = TURNS, cancels: int = CANCELS) -> dict[str, float]:
    """Run the workload under callgrind in a child interpreter; the per-operation counts."""
    with tempfile.TemporaryDirectory(prefix="trio-agents-callgrind-") as tmp:
        directory = Path(tmp)
        library = build_marks(directory)
        env = dict(os.environ, PYTHONHASHSEED="0", **{_LIBRARY_VARIABLE: str(library)})
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                "--collect-atstart=no",
                f"--callgrind-out-file={directory / 'callgrind.out'}",
                sys.executable,
                "-m",
                "benchmarks.bench_instructions",
                "--workload",
                str(turns),
                str(cancels),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        counts = read_dumps(directory)
    missing = [side for side in SIDES if side not in counts]
    if missing:
        raise RuntimeError(f"callgrind wrote no count for {', '.join(missing)}")
    return per_operation(counts, turns, cancels)


def main() -> dict[str, float]:
    """Measure and print; the figures, or none (with the reason) where callgrind cannot run."""
    reason = unavailable()
    if reason is not None:
        print(f"instruction counts: not measured ({reason})")
        return {}
    r = measure()
    print(
        f"instructions per operation, valgrind --tool=callgrind ({TURNS} turns, "
        f"{CANCELS} cancels, after {WARMUP} uncounted; load-independent):"
    )
    print(line("raw trio floor, a turn (channel in, reply out, 5 records):", r["turn_raw"], "Ir"))
    print(line("trio_agents, a turn (prompt + when_idle):", r["turn_agent"], "Ir"))
    print(line("raw trio floor, a cancel (scope.cancel -> task exited):", r["cancel_raw"], "Ir"))
    print(line("trio_agents, a cancel (agent.cancel -> when_idle):", r["cancel_agent"], "Ir"))
    print(line("trio_agents, a tool turn (model -> echo tool -> model):", r["turn_tool"], "Ir"))
    print(line("trio_agents, a tool turn traced (in-memory exporter):", r["turn_traced"], "Ir"))
    print(f"  ratio: a turn executes {r['turn_ratio']:.1f}x the floor's instructions")
    print(f"  ratio: a tool turn runs at {r['tool_vs_plain']:.2f}x the plain turn rate")
    print(line("  the SDK alone, the same four spans and attributes:", r["turn_sdk"], "Ir"))
    print(f"  ratio: a traced tool turn executes {r['traced_vs_untraced']:.2f}x an untraced one")
    print(f"  ratio: the SDK's own work alone would make it {r['sdk_floor']:.2f}x")
    print(line("  the runtime's own part (no-op tracer provider):", r["turn_traced_noop"], "Ir"))
    print(f"  ratio: the runtime's own part adds {100 * r['own_share']:.1f}% to a tool turn")
    print(f"  ratio: a cancel executes {r['cancel_ratio']:.1f}x the floor's instructions")
    return r


if __name__ == "__main__":
    if sys.argv[1:2] == ["--workload"]:
        trio.run(workload, os.environ.get(_LIBRARY_VARIABLE), int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
