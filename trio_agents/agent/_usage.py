"""What an agent's model requests have cost, in tokens, summed over its whole session.

Rules:
- Every model request that finishes records one ``ModelUsage`` with the counts the model
  reported (the cached input tokens among them) and the name of the model that answered (the
  member of a fallback chain that did); a request cut by a cancel or an error reported none
  and records none (:func:`usage_record`).
- The totals are folded from those records, so a resumed agent's totals include every turn
  it ever ran.
- A record's ``cost`` is priced by the runtime's :class:`PriceTable` (``None`` for a model
  it has no price of); ``AgentUsage.cost`` sums the known ones (``None``: none known).
"""

from __future__ import annotations

import attrs

from ..model import DEFAULT_PRICES, Finished, Model, PriceTable
from ..session import ModelUsage


@attrs.frozen
class AgentUsage:
    """Token usage summed over an agent's session.

    Attributes:
        input_tokens: tokens the model read, over every request (the cached ones included).
        output_tokens: tokens the model wrote, over every request.
        requests: how many model requests finished (and so reported usage).
        cache_creation_tokens: of the input tokens, those written to the prompt cache.
        cache_read_tokens: of the input tokens, those read from the prompt cache.
        cost: US dollars, summed over the requests whose model has a price; ``None`` when
            none had one.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0
    cost: float | None = None

    def plus(self, record: ModelUsage) -> AgentUsage:
        """These totals with one more request's usage added."""
        return AgentUsage(
            self.input_tokens + record.input_tokens,
            self.output_tokens + record.output_tokens,
            self.requests + 1,
            self.cache_creation_tokens + record.cache_creation_tokens,
            self.cache_read_tokens + record.cache_read_tokens,
            self.cost if record.cost is None else (self.cost or 0.0) + record.cost,
        )


def usage_record(
    turn_id: str, finished: Finished, model: Model, prices: PriceTable = DEFAULT_PRICES
) -> ModelUsage:
    """The ``ModelUsage`` of a request of ``turn_id`` to ``model`` that ended with
    ``finished``, costed with ``prices``."""
    usage = finished.usage
    name = finished.model if finished.model is not None else model.name
    return ModelUsage(
        turn_id=turn_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_tokens=usage.cache_creation_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        model=name,
        cost=prices.cost(
            name,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_creation_tokens,
        ),
    )
