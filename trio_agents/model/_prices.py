"""What a model's tokens cost: a table of prices in US dollars per million tokens.

Rules:
- A :class:`Price` is per million tokens: ``input`` (uncached), ``output``, and, where the
  provider prices them apart, ``cache_read`` and ``cache_write`` (without them the cached
  tokens cost ``input``).
- A :class:`PriceTable` finds a model's price by its exact name, else by the name without a
  trailing date (``gpt-4o-2024-08-06`` is priced as ``gpt-4o``); a model it does not know has
  no cost (``None``), never a guessed one.
- The input tokens a provider reports include the cached ones (``ModelUsage``), so the cost
  of a request is ``(input - cache_read - cache_write) * input + cache_read * cache_read +
  cache_write * cache_write + output * output``, over a million.
- :data:`DEFAULT_PRICES` are the providers' published list prices for a few well-known
  models when this table was written; they change, so an application that budgets by cost
  should give its own (``open_runtime(prices=...)``, ``[prices]`` in the config file). The
  embedded models (``echo``, ``scripted``) have no price: their requests have no cost.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import attrs


def _dollars(_: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is None and attribute.name.startswith("cache"):
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(
            f"a price's {attribute.name} is US dollars per million tokens, a number >= 0; "
            f"got {value!r}"
        )


@attrs.frozen
class Price:
    """A model's price in US dollars per million tokens.

    Attributes:
        input: per million input tokens that were not cached.
        output: per million output tokens.
        cache_read: per million input tokens read from the prompt cache (``None``: ``input``).
        cache_write: per million input tokens written to the prompt cache (``None``:
            ``input``).
    """

    input: float = attrs.field(validator=_dollars)
    output: float = attrs.field(validator=_dollars)
    cache_read: float | None = attrs.field(default=None, validator=_dollars)
    cache_write: float | None = attrs.field(default=None, validator=_dollars)

    def cost(
        self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
    ) -> float:
        """The cost in US dollars of one request's tokens (``input_tokens`` include the
        cached ones)."""
        read: float = self.input if self.cache_read is None else self.cache_read
        write: float = self.input if self.cache_write is None else self.cache_write
        plain = max(input_tokens - cache_read - cache_write, 0)
        total = plain * self.input + cache_read * read + cache_write * write
        return (total + output_tokens * self.output) / 1_000_000


def _table(prices: Mapping[str, Price]) -> dict[str, Price]:
    return dict(prices)


_DATED = re.compile(r"-\d{4}-?\d{2}-?\d{2}$")


@attrs.frozen
class PriceTable:
    """Prices by model name (see the module rules).

    Attributes:
        prices: the price of each model name.
    """

    prices: Mapping[str, Price] = attrs.field(factory=dict, converter=_table)

    def price(self, model: str | None) -> Price | None:
        """The price of the model named ``model``, or ``None`` when it is not in the table."""
        if model is None:
            return None
        found = self.prices.get(model)
        if found is None:
            found = self.prices.get(_DATED.sub("", model))
        return found

    def cost(
        self,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cache_read: int = 0,
        cache_write: int = 0,
    ) -> float | None:
        """The cost in US dollars of a request to ``model``, or ``None`` when it is unknown."""
        price = self.price(model)
        if price is None:
            return None
        return price.cost(input_tokens, output_tokens, cache_read, cache_write)

    def with_prices(self, prices: Mapping[str, Price]) -> PriceTable:
        """This table with ``prices`` added (a name given replaces the table's price)."""
        return PriceTable({**self.prices, **prices})


def _openai(input: float, cached: float, output: float) -> Price:
    return Price(input, output, cache_read=cached)


def _anthropic(input: float, output: float) -> Price:
    # Anthropic's cache: reads at a tenth of the input price, 5-minute writes at 1.25 times.
    return Price(input, output, cache_read=input / 10, cache_write=input * 1.25)


#: List prices (US dollars per million tokens) of well-known models, as published by
#: OpenAI and Anthropic when this table was written; give your own to be sure.
DEFAULT_PRICES = PriceTable(
    {
        "gpt-4o": _openai(2.50, 1.25, 10.00),
        "gpt-4o-mini": _openai(0.15, 0.075, 0.60),
        "gpt-4.1": _openai(2.00, 0.50, 8.00),
        "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
        "gpt-4.1-nano": _openai(0.10, 0.025, 0.40),
        "gpt-5": _openai(1.25, 0.125, 10.00),
        "gpt-5-mini": _openai(0.25, 0.025, 2.00),
        "gpt-5-nano": _openai(0.05, 0.005, 0.40),
        "o3": _openai(2.00, 0.50, 8.00),
        "o4-mini": _openai(1.10, 0.275, 4.40),
        "claude-opus-4-1": _anthropic(15.00, 75.00),
        "claude-opus-4-5": _anthropic(5.00, 25.00),
        "claude-sonnet-4-5": _anthropic(3.00, 15.00),
        "claude-sonnet-4": _anthropic(3.00, 15.00),
        "claude-haiku-4-5": _anthropic(1.00, 5.00),
        "claude-3-5-haiku": _anthropic(0.80, 4.00),
    }
)
