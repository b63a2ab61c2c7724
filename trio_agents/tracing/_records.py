"""What tracing writes into a session: each traced turn's span, so a resumed session's next
turn can link to the trace it continues.

Rules:
- While tracing is on, the first turn of an agent after it was created or resumed in a
  runtime (its first turn *here*) appends :class:`TurnTraced` (its span's trace and span ids)
  as its span starts, before ``TurnStarted``; with tracing off nothing is written. Once per
  run of the agent, not per turn: an append is about 1% of a traced tool turn (25 us against
  2.4 ms, ``python -m benchmarks --only tracing``) and a line in the session file, and a
  run's turns already share the conversation id (``gen_ai.conversation.id``).
- That first turn links its span to the latest :class:`TurnTraced` of the session, the first
  traced turn of the run before (``trio_agents.link = "resumed_from"``): a link, not a
  parent, so the new turn starts a trace of its own, as every turn does, and a trace viewer
  follows the chain of runs back, in this process or another.
- The record is registered whenever the package is imported, with tracing off too: a session
  written with tracing on loads anywhere.
"""

from __future__ import annotations

import attrs

from ..session import Record, register_record


@register_record
@attrs.frozen(kw_only=True)
class TurnTraced(Record):
    """The span of the turn ``turn_id`` (OpenTelemetry ids, lowercase hex)."""

    turn_id: str
    trace_id: str
    span_id: str
