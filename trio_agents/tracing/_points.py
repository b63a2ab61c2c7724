"""The instrumentation points the runtime calls: each costs one flag check when tracing is off.

Rules:
- Tracing is on in the tasks started under :func:`open_tracing` with a tracer provider: a
  context variable holds the active tracer, and every task the runtime starts inherits it.
  Elsewhere, and when the ``otel`` extra is absent, each point reads that variable, finds
  ``None`` and returns a shared no-op (or the model's own stream): ``opentelemetry`` is never
  imported (``test_tracing_import``).
- A point is one ``with`` line (or one call) in the code it instruments; what a span holds is
  decided in ``_otel``, so the instrumented modules know nothing of OpenTelemetry.
- A span's context is current inside its ``with`` block, so what runs there (a model's HTTP
  request, a tool, a child agent started by a tool) is its child.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, final

import attrs

from ._protocols import EventT, RequestT, ShellJob, StreamingModel, ToolAnswer

if TYPE_CHECKING:
    from ..session import Session
    from ._otel import Tracer

#: The tracer of the current task, or ``None``: tracing is off (see the module rules).
ACTIVE: ContextVar[Tracer | None] = ContextVar("trio_agents_tracer", default=None)


@final
@attrs.define(eq=False, repr=False)
class _Off:
    """The no-op every point returns while tracing is off: a reusable context manager that
    is also a :class:`ToolAnswer`."""

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def answered(self, is_error: bool, content: str) -> None:
        return None


_OFF = _Off()


def invoke_agent(
    session: Session, turn_id: str, *, parent_id: str | None = None
) -> AbstractContextManager[object]:
    """The span of one turn of the agent whose session is ``session`` (``invoke_agent
    AGENT``); what the turn recorded there is read when it ends."""
    tracer = ACTIVE.get()
    if tracer is None:
        return _OFF
    return tracer.invoke_agent(session, turn_id, parent_id)


def approved(decision: str, by: str) -> None:
    """Put the approval ``decision`` of the current tool call (and who gave it) on its span."""
    tracer = ACTIVE.get()
    if tracer is not None:
        tracer.approved(decision, by)


def chat(
    model: StreamingModel[RequestT, EventT], request: RequestT
) -> AsyncGenerator[EventT, None]:
    """``model.stream(request)``, inside a ``chat MODEL`` span while tracing is on; the span
    ends when the stream ends or fails, or when it is closed (``aclosing``, as the turn's)."""
    tracer = ACTIVE.get()
    if tracer is None:
        return model.stream(request)
    return tracer.chat(model, request)


def execute_tool(
    name: str, call_id: str | None, arguments: Mapping[str, Any]
) -> AbstractContextManager[ToolAnswer]:
    """The span of one tool call (``execute_tool NAME``); tell its handle the answer."""
    tracer = ACTIVE.get()
    if tracer is None:
        return _OFF
    return tracer.execute_tool(name, call_id, arguments)


def compaction(agent_id: str, turn_id: str | None) -> AbstractContextManager[object]:
    """The span of one compaction of the agent's history (``compaction AGENT``)."""
    tracer = ACTIVE.get()
    if tracer is None:
        return _OFF
    return tracer.compaction(agent_id, turn_id)


def shell_job(job: ShellJob) -> AbstractContextManager[object]:
    """The span of one shell process while it runs (``shell JOB``)."""
    tracer = ACTIVE.get()
    if tracer is None:
        return _OFF
    return tracer.shell_job(job)


# -- context across processes ---------------------------------------------------------------


def environment(env: Mapping[str, str]) -> Mapping[str, str]:
    """A process's environment ``env`` with the current span's context in ``TRACEPARENT`` and
    ``TRACESTATE`` (the environment-variable carrier of OpenTelemetry) while tracing is on."""
    tracer = ACTIVE.get()
    if tracer is None:
        return env
    return tracer.environment(env)


def headers(headers: Mapping[str, str]) -> Mapping[str, str]:
    """An HTTP request's ``headers`` with the current span's ``traceparent`` (W3C trace
    context) while tracing is on."""
    tracer = ACTIVE.get()
    if tracer is None:
        return headers
    return tracer.headers(headers)


def remote_parent(agent_id: str, meta: object) -> None:
    """Make the trace context in ``meta`` (a request's ``_meta`` object: ``traceparent``,
    ``tracestate``) the parent of the next turn of the agent ``agent_id``."""
    tracer = ACTIVE.get()
    if tracer is not None and isinstance(meta, Mapping):
        tracer.remote_parent(agent_id, meta)
