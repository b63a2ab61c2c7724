"""A resumed session continues its trace as a link, not a parent: the first turn after a
resume starts a trace of its own, linked to the first traced turn of the run before, across
runtimes (the JSONL store in between) and with no tracing in one of them."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

import trio_agents as ta
from tests.helpers.tracing_support import in_memory, named
from trio_agents.tracing import TurnTraced


def context_of(span: ReadableSpan) -> tuple[int, int]:
    """The trace and span ids of ``span``."""
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def links_of(span: ReadableSpan) -> list[tuple[int, int, dict[str, object]]]:
    """Each link of ``span``: the ids it points at and its attributes."""
    return [
        (link.context.trace_id, link.context.span_id, dict(link.attributes or {}))
        for link in span.links
    ]


async def test_the_first_turn_after_a_resume_links_to_the_run_before(
    tmp_path: Path,
) -> None:
    """Resumed in a new runtime, the next turn is a new trace with one link, to the span of
    the first turn of the run before; the turn after it, and a new agent's first turn, link
    nowhere; each run records its first turn only."""
    provider, exporter = in_memory()
    async with ta.open_runtime(store=ta.JsonlStore(tmp_path), tracer_provider=provider) as root:
        agent = (await root.agents.create(session_id="s")).agent
        for text in ("one", "two"):
            agent.prompt(text)
            await agent.when_idle()
    first, second = named(list(exporter.get_finished_spans()), "invoke_agent s")
    assert links_of(first) == links_of(second) == []
    exporter.clear()

    async with ta.open_runtime(store=ta.JsonlStore(tmp_path), tracer_provider=provider) as root:
        resumed = (await root.agents.resume("s")).agent
        for text in ("three", "four"):
            resumed.prompt(text)
            await resumed.when_idle()
        fresh = (await root.agents.create(session_id="new")).agent
        fresh.prompt("five")
        await fresh.when_idle()
        recorded = [r for r in resumed.session.records if isinstance(r, TurnTraced)]
    assert [r.turn_id for r in recorded] == ["t-1", "t-3"]
    spans = list(exporter.get_finished_spans())
    after, later = named(spans, "invoke_agent s")
    trace_id, span_id = context_of(first)
    assert after.parent is None
    assert context_of(after)[0] != trace_id
    assert links_of(after) == [
        (trace_id, span_id, {"trio_agents.link": "resumed_from", "trio_agents.turn.id": "t-1"})
    ]
    assert links_of(later) == []
    [new] = named(spans, "invoke_agent new")
    assert links_of(new) == []


async def test_each_traced_turn_is_recorded_durably_and_loads_with_tracing_off(
    tmp_path: Path,
) -> None:
    """The stored session holds the first turn's span ids before its start; a runtime
    without tracing resumes it, and records none for its own turns."""
    provider, exporter = in_memory()
    async with ta.open_runtime(store=ta.JsonlStore(tmp_path), tracer_provider=provider) as root:
        agent = (await root.agents.create(session_id="s")).agent
        agent.prompt("one")
        await agent.when_idle()
    [span] = named(list(exporter.get_finished_spans()), "invoke_agent s")
    trace_id, span_id = context_of(span)
    stored = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()[1:]]
    types = [r["type"] for r in stored]
    assert types.index("turn_traced") + 1 == types.index("turn_started")
    [traced] = [r for r in stored if r["type"] == "turn_traced"]
    assert (traced["turn_id"], traced["trace_id"], traced["span_id"]) == (
        "t-1",
        f"{trace_id:032x}",
        f"{span_id:016x}",
    )

    async with ta.open_runtime(store=ta.JsonlStore(tmp_path)) as root:
        resumed = (await root.agents.resume("s")).agent
        resumed.prompt("two")
        await resumed.when_idle()
        recorded = [r for r in resumed.session.records if isinstance(r, TurnTraced)]
    assert [r.turn_id for r in recorded] == ["t-1"]
