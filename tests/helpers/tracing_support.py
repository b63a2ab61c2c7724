"""Helpers of the tracing tests: an in-memory exporter and the span tree it holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def in_memory() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A tracer provider that keeps every ended span in the exporter it returns."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The spans as an indented outline, children under their parent in start order."""
    by_id = {span.context.span_id: span for span in spans if span.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in by_id else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            lines.append("  " * depth + span.name)
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    """The spans called ``name``, in start order."""
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


def metrics_reader() -> tuple[MeterProvider, InMemoryMetricReader]:
    """A meter provider whose metrics the returned reader collects on demand."""
    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    """The data points of the metric ``name`` now (empty if it has none)."""
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


def counts(reader: InMemoryMetricReader) -> dict[str, int]:
    """The up-down counters of live agents, running turns and running jobs, now."""
    names = ("trio_agents.agents", "trio_agents.turns.running", "trio_agents.jobs.running")
    return {name: sum(int(p.value) for p in points(reader, name)) for name in names}
