"""What tracing costs a turn: off (the default), and on with the SDK's in-memory exporter.

The turn is :mod:`bench_tools`' tool turn (model -> ``echo`` tool -> model: one turn span, two
``chat`` spans and one ``execute_tool`` span when on), on a fresh runtime per round, rounds of
the two sides interleaved. Goals (issue #41): on, within 2x the time of a turn with tracing
off. The off side is today's turn plus one context-variable read per instrumentation point;
the points' own cost is measured beside it (every point a tool turn passes, called off) and
printed as a share of an off turn, the in-run bound on "off within 1.05x of a turn without
the instrumentation" (which a run of ``bench_tools`` on the commit before it compares too).

Fair sides: the same runtime, model, tool and turns; only the tracer provider differs. The
metrics are off on the traced side (no meter provider: no instrument is called, no clock read
for them), as tracing is what the goal is about; a third side adds an SDK ``MeterProvider``
with an in-memory reader and is reported beside the goal, not in it. The exporter is emptied
after each traced round, so no side runs beside the spans another kept, and the garbage is
collected before each round, so no side pays a full collection that another side's objects
triggered (the garbage collector is a tenth of what tracing adds: the retained spans survive
every young collection).
"""

from __future__ import annotations

import gc
import time
from collections.abc import AsyncGenerator
from typing import cast

import trio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trio_agents as ta
from trio_agents import tracing
from trio_agents.model import ModelEvent, ModelRequest
from trio_agents.session import Session

from ._common import best_rates, line
from .bench_tools import _Caller, _EchoTool, echo, tool_turns

ROUNDS = 7
TURNS = 200
POINT_CALLS = 100_000


async def _turns(
    n: int, provider: TracerProvider | None, meter_provider: MeterProvider | None = None
) -> float:
    gc.collect()
    async with ta.open_runtime(
        store=ta.MemoryStore(), tracer_provider=provider, meter_provider=meter_provider
    ) as root:
        await root.plugin(_EchoTool(echo))
        return await tool_turns(root, n)


class _Stub:
    """A model whose ``stream()`` costs one attribute read: what chat() adds stands out."""

    name = "stub"

    def __init__(self) -> None:
        self._stream = _Caller().stream(ModelRequest(messages=()))

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        return self._stream


def _points_off(calls: int) -> float:
    """Seconds for ``calls`` passes through every point a tool turn meets, tracing off."""
    arguments = {"text": "x"}
    # Off, the points never read the session: any stands for the turn's.
    session = cast(Session, None)
    model, request = _Stub(), ModelRequest(messages=())
    start = time.perf_counter()
    for _ in range(calls):
        with tracing.invoke_agent(session, "t-1", parent_id=None):
            tracing.chat(model, request)
            with tracing.execute_tool("echo", "call-1", arguments) as span:
                span.answered(False, "x")
            tracing.chat(model, request)
    return time.perf_counter() - start


async def measure(rounds: int = ROUNDS, turns: int = TURNS) -> dict[str, float]:
    """Best-of-``rounds`` rates of tool turns with tracing off and on, and the ratios."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def off(n: int) -> float:
        return await _turns(n, None)

    async def on(n: int) -> float:
        seconds = await _turns(n, provider)
        assert len(exporter.get_finished_spans()) == 4 * n, "not every span was exported"
        exporter.clear()
        return seconds

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])

    async def metered(n: int) -> float:
        seconds = await _turns(n, provider, meters)
        exporter.clear()
        assert reader.get_metrics_data() is not None, "no metric was recorded"
        return seconds

    rates = await best_rates([("off", off), ("on", on), ("metered", metered)], rounds, turns)
    meters.shutdown()
    points = min(_points_off(POINT_CALLS) for _ in range(3)) / POINT_CALLS
    return {
        "off": rates["off"],
        "on": rates["on"],
        "metered": rates["metered"],
        "on_vs_off": rates["off"] / rates["on"],
        "metered_vs_off": rates["off"] / rates["metered"],
        "points_ns": points * 1e9,
        "points_share": points * rates["off"],
    }


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(f"tracing, tool turns on a fresh MemoryStore runtime (best of {ROUNDS} x {TURNS}):")
    print(line("tracing off (no tracer provider):", r["off"]))
    print(line("tracing on (in-memory exporter, 4 spans a turn):", r["on"]))
    print(line("tracing and metrics on (in-memory metric reader too):", r["metered"]))
    print(f"  ratio: a traced turn takes {r['on_vs_off']:.2f}x the time of an untraced one")
    print(f"  ratio: with the metrics too, {r['metered_vs_off']:.2f}x (no goal)")
    print(
        f"  the points a turn passes cost {r['points_ns']:.0f} ns off, "
        f"{100 * r['points_share']:.2f}% of an untraced turn"
    )
    return r


if __name__ == "__main__":
    main()
