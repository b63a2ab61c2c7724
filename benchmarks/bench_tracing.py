"""What tracing costs a turn: off (the default), and on with the SDK's in-memory exporter.

The turn is :mod:`bench_tools`' tool turn (model -> ``echo`` tool -> model: one turn span, two
``chat`` spans and one ``execute_tool`` span when on), on a fresh runtime per round, rounds of
the two sides interleaved. Goals (issue #41): on, within 2x the time of a turn with tracing
off. The off side is today's turn plus one context-variable read per instrumentation point;
the points' own cost is measured beside it (every point a tool turn passes, called off) and
printed as a share of an off turn, the in-run bound on "off within 1.05x of a turn without
the instrumentation" (which a run of ``bench_tools`` on the commit before it compares too).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import cast

import trio
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


async def _turns(n: int, provider: TracerProvider | None) -> float:
    async with ta.open_runtime(store=ta.MemoryStore(), tracer_provider=provider) as root:
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
        exporter.clear()
        seconds = await _turns(n, provider)
        assert len(exporter.get_finished_spans()) == 4 * n, "not every span was exported"
        return seconds

    rates = await best_rates([("off", off), ("on", on)], rounds, turns)
    points = min(_points_off(POINT_CALLS) for _ in range(3)) / POINT_CALLS
    return {
        "off": rates["off"],
        "on": rates["on"],
        "on_vs_off": rates["off"] / rates["on"],
        "points_ns": points * 1e9,
        "points_share": points * rates["off"],
    }


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(f"tracing, tool turns on a fresh MemoryStore runtime (best of {ROUNDS} x {TURNS}):")
    print(line("tracing off (no tracer provider):", r["off"]))
    print(line("tracing on (in-memory exporter, 4 spans a turn):", r["on"]))
    print(f"  ratio: a traced turn takes {r['on_vs_off']:.2f}x the time of an untraced one")
    print(
        f"  the points a turn passes cost {r['points_ns']:.0f} ns off, "
        f"{100 * r['points_share']:.2f}% of an untraced turn"
    )
    return r


if __name__ == "__main__":
    main()
