"""What an agent's model requests have cost, in tokens, summed over its whole session.

Rules:
- Every model request that finishes records one ``ModelUsage`` with the counts the model
  reported; a request cut by a cancel or an error reported none and records none.
- The totals are folded from those records, so a resumed agent's totals include every turn
  it ever ran.
"""

from __future__ import annotations

import attrs

from ..session import ModelUsage

__all__ = ["AgentUsage"]


@attrs.frozen
class AgentUsage:
    """Token usage summed over an agent's session.

    Attributes:
        input_tokens: tokens the model read, over every request.
        output_tokens: tokens the model wrote, over every request.
        requests: how many model requests finished (and so reported usage).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def plus(self, record: ModelUsage) -> AgentUsage:
        """These totals with one more request's usage added."""
        return AgentUsage(
            self.input_tokens + record.input_tokens,
            self.output_tokens + record.output_tokens,
            self.requests + 1,
        )
