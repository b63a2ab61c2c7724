"""The token meter: how full an agent's context window is before its next model request.

Rules:
- With no report from the provider yet, the size of the next request is an *estimate*:
  one token per :data:`CHARS_PER_TOKEN` characters of the conversation (text, tool names and
  arguments) and of the tool specs offered, plus :data:`TOKENS_PER_MESSAGE` per message (the
  role and framing every provider adds). It is deliberately simple and provider-neutral.
- Once a request finishes with reported usage, the meter is *measured*: the reported input
  and output tokens of that request, plus the estimate of what was added to the conversation
  since. A report of zero tokens (a provider that reports none) is not a measurement.
- Each measurement also *calibrates* the estimate: its ratio to the estimate of the same
  conversation scales every later estimate (what was added since, and the whole conversation
  after a compaction), so that the figures stay in the provider's own tokens.
- A compaction resets the meter to a (calibrated) estimate: the last report counted messages
  that are no longer sent. A resume starts uncalibrated (the meter is not restored from the
  session).
- Reading the meter costs nothing per request: the history keeps its size as it grows.
"""

from __future__ import annotations

import json
from typing import final

import attrs

from ..model import ToolSpec
from ..session import ModelUsage

#: Characters per token of the estimate (English prose is about 4 with the common tokenizers).
CHARS_PER_TOKEN = 4
#: Tokens counted for each message besides its text.
TOKENS_PER_MESSAGE = 4


def estimate(chars: int, messages: int) -> int:
    """The estimated tokens of ``messages`` messages holding ``chars`` characters."""
    return -(-chars // CHARS_PER_TOKEN) + TOKENS_PER_MESSAGE * messages


@attrs.frozen
class ContextUsage:
    """How full the context window is: the size of the agent's next model request.

    Attributes:
        tokens: the tokens the next request would hold (system text, conversation, tools).
        window: the model's context window in tokens, or ``None`` when it is unknown.
        measured: whether ``tokens`` starts from the provider's count of the last request
            (``False``: an estimate from the characters; see :mod:`trio_agents.agent`'s docs).
    """

    tokens: int
    window: int | None
    measured: bool

    @property
    def share(self) -> float | None:
        """``tokens / window``, or ``None`` when the window is unknown."""
        return self.tokens / self.window if self.window else None


@final
@attrs.define(eq=False, repr=False)
class ContextMeter:
    """Counts the tokens of an agent's next request (see the module rules)."""

    # The last measurement: (reported tokens, conversation chars, messages) at that time.
    _base: tuple[int, int, int] | None = None
    # Reported tokens per estimated token, at the last measurement (None: none yet).
    _ratio: float | None = None
    _specs: tuple[ToolSpec, ...] = ()
    _specs_tokens: int = 0

    def measured(
        self, usage: ModelUsage, chars: int, messages: int, specs: tuple[ToolSpec, ...]
    ) -> None:
        """A request finished with ``usage``; the conversation now has this size."""
        tokens = usage.input_tokens + usage.output_tokens
        if tokens <= 0:
            self._base = None
            return
        self._base = (tokens, chars, messages)
        self._ratio = None
        self._ratio = tokens / max(self.estimated(chars, messages, specs), 1)

    def reset(self) -> None:
        """Forget the last measurement (the conversation was compacted); keep its calibration."""
        self._base = None

    def estimated(self, chars: int, messages: int, specs: tuple[ToolSpec, ...]) -> int:
        """The (calibrated) estimate of a request with this conversation and these tool specs."""
        if specs is not self._specs:
            # Invariant: the registry hands out the same tuple until its tools change.
            self._specs = specs
            self._specs_tokens = sum(_spec_tokens(spec) for spec in specs)
        return self._scaled(estimate(chars, messages) + self._specs_tokens)

    def _scaled(self, tokens: int) -> int:
        return tokens if self._ratio is None else round(tokens * self._ratio)

    def usage(
        self, chars: int, messages: int, specs: tuple[ToolSpec, ...], window: int | None
    ) -> ContextUsage:
        """The size of a request with this conversation and these tool specs."""
        base = self._base
        if base is None or chars < base[1] or messages < base[2]:
            return ContextUsage(self.estimated(chars, messages, specs), window, False)
        tokens, base_chars, base_messages = base
        added = self._scaled(estimate(chars - base_chars, messages - base_messages))
        return ContextUsage(tokens + added, window, True)


def _spec_tokens(spec: ToolSpec) -> int:
    text = spec.name + spec.description + json.dumps(dict(spec.parameters), default=str)
    return estimate(len(text), 1)
