"""OpenTelemetry traces that follow the ownership tree (``docs/observability.rst``).

``__all__`` is what users call. The instrumentation points (``invoke_agent``, ``chat``,
``execute_tool``, ``approved``, ``compaction``, ``shell_job``, ``environment``, ``headers``,
``remote_parent``) are what the runtime's layers call, so the package offers them outside
``__all__``, with ``open_environ_tracing`` (the command's ``OTEL_*`` set-up); each point is one
flag check while tracing is off, and OpenTelemetry (the ``otel`` extra) is imported only when
:func:`open_tracing` turns tracing on.
"""

from ._environ import TracingConfigError as TracingConfigError
from ._environ import open_environ_tracing as open_environ_tracing
from ._environ import tracer_provider_from_environ as tracer_provider_from_environ
from ._points import approved as approved
from ._points import chat as chat
from ._points import compaction as compaction
from ._points import environment as environment
from ._points import execute_tool as execute_tool
from ._points import headers as headers
from ._points import invoke_agent as invoke_agent
from ._points import remote_parent as remote_parent
from ._points import shell_job as shell_job
from ._records import TurnTraced as TurnTraced
from ._runtime import open_tracing as open_tracing

__all__ = [
    "TracingConfigError",
    "TurnTraced",
    "open_tracing",
    "tracer_provider_from_environ",
]
