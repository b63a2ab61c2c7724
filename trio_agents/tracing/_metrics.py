"""The metrics of a traced runtime: GenAI histograms and live up-down counters.

Rules:
- ``gen_ai.client.token.usage`` (``{token}``, with ``gen_ai.token.type`` ``input`` or
  ``output``) and ``gen_ai.client.operation.duration`` (seconds) follow the GenAI semantic
  conventions; the duration is recorded for ``chat``, ``invoke_agent`` and ``execute_tool``
  operations (``gen_ai.operation.name``), with ``error.type`` when the operation failed or was
  cancelled.
- ``trio_agents.agents``, ``trio_agents.turns.running`` and ``trio_agents.jobs.running`` are
  up-down counters of what is live right now: every +1 has its -1 on every path out.
- Attributes never hold ids (agents, turns, calls): a metric's series stay few.
- Durations are read on trio's clock, so a test on the autojump clock sees exact figures.
- Recorded only with a meter provider given (``open_runtime(meter_provider=...)``): a runtime
  traced without one calls no instrument and reads no clock for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, final

import attrs
from opentelemetry import metrics
from opentelemetry.util.types import AttributeValue

#: Bucket boundaries the conventions advise for token counts and durations.
_TOKEN_BUCKETS: Final = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304]
_SECONDS_BUCKETS: Final = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92
]  # fmt: skip


@final
@attrs.define(eq=False, repr=False, init=False)
class Metrics:
    """The instruments of one runtime (see the module rules).

    Args:
        provider: the meter provider.
    """

    tokens: metrics.Histogram
    duration: metrics.Histogram
    agents: metrics.UpDownCounter
    turns: metrics.UpDownCounter
    jobs: metrics.UpDownCounter

    def __init__(self, provider: metrics.MeterProvider) -> None:
        meter = metrics.get_meter("trio_agents", meter_provider=provider)
        self.__attrs_init__(
            tokens=meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
            ),
            duration=meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS,
            ),
            agents=meter.create_up_down_counter(
                "trio_agents.agents", unit="{agent}", description="Live agents."
            ),
            turns=meter.create_up_down_counter(
                "trio_agents.turns.running", unit="{turn}", description="Turns running now."
            ),
            jobs=meter.create_up_down_counter(
                "trio_agents.jobs.running", unit="{job}", description="Shell processes running now."
            ),
        )

    def took(
        self, seconds: float, measured: Mapping[str, AttributeValue], error: str | None
    ) -> None:
        """Record an operation's duration under ``measured``, with ``error.type`` if it failed."""
        if error is not None:
            measured = {**measured, "error.type": error}
        self.duration.record(seconds, measured)
