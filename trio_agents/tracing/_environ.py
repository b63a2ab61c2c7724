"""Tracing configured the standard way, from the ``OTEL_*`` environment (for the command).

Rules:
- Tracing is on when ``OTEL_TRACES_EXPORTER`` names exporters (``otlp``, ``console``, a comma
  list), or when it is unset and an OTLP endpoint is (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``: the specification's default exporter is ``otlp``).
  It is off when ``OTEL_TRACES_EXPORTER=none``, when ``OTEL_SDK_DISABLED=true``, and when
  nothing is set: a command run without them never imports OpenTelemetry.
- ``otlp`` is the OTLP/HTTP (protobuf) exporter, which reads its own ``OTEL_EXPORTER_OTLP_*``
  variables (endpoint, headers, timeout ...); ``console`` prints each span as the SDK's
  console exporter does, to stderr (stdout carries the answer, or the ACP protocol).
- The resource has ``service.name`` from ``OTEL_SERVICE_NAME`` (``trio-agents`` when unset)
  and ``OTEL_RESOURCE_ATTRIBUTES``, as the SDK reads them.
- A value the command cannot honour is a :class:`TracingConfigError` of one line that names
  the variable and the fix, never a traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import trio

from .._errors import TrioAgentsError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

#: The exporters ``OTEL_TRACES_EXPORTER`` may name.
EXPORTERS: Final = ("otlp", "console", "none")


class TracingConfigError(TrioAgentsError, ValueError):
    """The ``OTEL_*`` environment asks for tracing the command cannot set up."""


def _exporters(environ: Mapping[str, str]) -> list[str]:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    value = environ.get("OTEL_TRACES_EXPORTER")
    if value is None:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return ["otlp"] if any(environ.get(name) for name in endpoints) else []
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={value!r} names an exporter trio-agents does not have "
            f"({', '.join(unknown)}); use otlp, console or none"
        )
    return [name for name in names if name != "none"]


def tracer_provider_from_environ(
    environ: Mapping[str, str] | None = None,
) -> TracerProvider | None:
    """The tracer provider the ``OTEL_*`` variables of ``environ`` (``os.environ`` when
    ``None``) ask for, or ``None`` when they ask for no tracing (see the module rules).

    Raises:
        TracingConfigError: an unknown exporter, or the ``otel`` extra is not installed.
    """
    environ = os.environ if environ is None else environ
    exporters = _exporters(environ)
    if not exporters:
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER={','.join(exporters)} needs OpenTelemetry; install "
            f"trio-agents[otel], or unset the OTEL_* variables"
        ) from None
    service = environ.get("OTEL_SERVICE_NAME") or "trio-agents"
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    for name in exporters:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


@asynccontextmanager
async def open_environ_tracing() -> AsyncIterator[TracerProvider | None]:
    """The provider of :func:`tracer_provider_from_environ` for the block; at its end every
    span is exported (in a thread: the exporters block) and the provider shut down.

    Raises:
        TracingConfigError: see :func:`tracer_provider_from_environ`.
    """
    provider = tracer_provider_from_environ()
    try:
        yield provider
    finally:
        if provider is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(provider.shutdown)
