"""Turning tracing on for a runtime: :func:`open_tracing`.

Rules:
- Without a tracer (or meter) provider nothing is imported and no listener is added; every
  point stays off in what the runtime starts, even inside another, traced runtime.
- With one, the tracer is active in the calling task from the start of the block to its end,
  and so in every task started from it meanwhile (the runtime's fibers, agents, turns, jobs);
  a plugin on the root fiber (``tracing``) counts the live agents from the agent layer's
  events, and tells the tracer which agents were just created or resumed (their first
  turn links to where their session left off, ``_records``). Applied before the core
  plugins, it is torn down after them, so the agents disposed during teardown are still
  counted down.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, final

from ..kernel import Context
from ._points import ACTIVE

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ._otel import Tracer

#: The variable the OpenTelemetry GenAI instrumentations read to record message contents.
CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@final
class _TracingPlugin:
    """Listens to the session records for the spans (see the module rules)."""

    name = "tracing"

    def __init__(self, tracer: Tracer, live: tuple[type, type, type] | None) -> None:
        self._tracer = tracer
        self._live = live

    async def apply(self, ctx: Context, config: None) -> None:
        if self._live is not None:
            created, disposed, cancel_requested = self._live
            ctx.on(created, self._created)
            ctx.on(disposed, self._disposed)
            ctx.on(cancel_requested, self._cancel_requested)

    def _created(self, event: Any) -> None:
        if self._tracer.metrics is not None:
            self._tracer.metrics.agents.add(1)
        self._tracer.agent_created(event.agent_id)

    def _disposed(self, event: Any) -> None:
        if self._tracer.metrics is not None:
            self._tracer.metrics.agents.add(-1)
        self._tracer.agent_disposed(event.agent_id)

    def _cancel_requested(self, event: Any) -> None:
        self._tracer.cancel_requested(event.agent_id, event.cause)


@asynccontextmanager
async def open_tracing(
    root: Context,
    tracer_provider: TracerProvider | None,
    *,
    meter_provider: MeterProvider | None = None,
    capture_content: bool | None = None,
    live: tuple[type, type, type] | None = None,
) -> AsyncIterator[None]:
    """Trace the runtime of ``root`` with ``tracer_provider`` while the block runs.

    Args:
        root: the runtime's root context.
        tracer_provider: an OpenTelemetry ``TracerProvider``; with ``meter_provider`` also
            ``None``, tracing stays off. When only ``meter_provider`` is given, spans go to
            OpenTelemetry's global tracer provider.
        meter_provider: an OpenTelemetry ``MeterProvider`` for the metrics; without one,
            nothing is measured (not even on OpenTelemetry's global meter provider).
        capture_content: record message contents on the spans; ``None`` reads
            ``$OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true`` turns it on).
        live: the agent layer's events that announce an agent created, disposed, and asked to
            cancel (``AgentCreated``, ``AgentDisposed``, ``AgentCancelRequested``): the first
            two count the ``trio_agents.agents`` up-down counter, the third links a cancelled
            turn to the span that caused the cancel.

    Raises:
        ModuleNotFoundError: the ``otel`` extra is not installed.
    """
    if tracer_provider is None and meter_provider is None:
        # Off for this runtime also when an enclosing one is traced: what this one starts in
        # the block (agents, fibers) inherits the variable from the task that opened it.
        token = ACTIVE.set(None)
        try:
            yield
        finally:
            ACTIVE.reset(token)
        return
    from ._otel import Tracer  # the one import of OpenTelemetry: only when tracing is on

    if capture_content is None:
        capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").lower() == "true"
    tracer = Tracer(tracer_provider, capture_content, meter_provider)
    token = ACTIVE.set(tracer)
    try:
        await root.plugin(_TracingPlugin(tracer, live))
        yield
    finally:
        ACTIVE.reset(token)
