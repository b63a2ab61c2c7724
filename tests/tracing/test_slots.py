"""The tracing package's classes take their slots from attrs, as the agent package's do
(issue #41, docs/design.rst "Memory per idle agent"): no module of ``trio_agents/tracing/``
writes a ``__slots__`` list that repeats its ``__init__``."""

from __future__ import annotations

import attrs

from tests.helpers.paths import ROOT
from tests.helpers.slots import hand_written_slots
from trio_agents.tracing import _metrics, _otel, _points

TRACING_PACKAGE = ROOT / "trio_agents" / "tracing"


def test_no_tracing_class_writes_its_own_slots() -> None:
    """Every class body of the tracing package is free of a hand-written ``__slots__``."""
    assert hand_written_slots(TRACING_PACKAGE, at_least=6) == []


def test_the_span_classes_are_slotted_attrs_classes() -> None:
    """The objects a traced turn makes per span, and the tracer, have no ``__dict__``."""
    classes = (
        _otel._Current,
        _otel._ToolCall,
        _otel._TurnSpan,
        _otel._Chat,
        _otel.Tracer,
        _metrics.Metrics,
        _points._Off,
    )
    for cls in classes:
        assert attrs.has(cls), cls.__name__
        assert "__dict__" not in dir(cls), cls.__name__
