"""Errors of the model layer.

Rules:
- A :class:`ModelError` may say what kind of failure it was (:class:`ModelErrorKind`), so that
  the code above a model can act on it without reading its message: a fallback chain moves
  to its next model on the kinds in ``FALLBACK_KINDS``, and a turn compacts its history and
  tries the step once more on ``CONTEXT_TOO_LONG``. ``None`` is an unclassified failure
  (a model of your own that raises a bare ``ModelError``): nothing acts on it.
- ``limit`` is the context window the provider reported in a ``CONTEXT_TOO_LONG`` answer
  (``maximum context length is 8192 tokens``), when it said one.
"""

from __future__ import annotations

import enum
from typing import Final

from .._errors import TrioAgentsError


class ModelSpecError(TrioAgentsError, ValueError):
    """A model spec string (``echo``, ``echo?delay=2.5``, ``openai:MODEL``) is not valid."""


class ModelErrorKind(enum.StrEnum):
    """What kind of failure a :class:`ModelError` is (see the module rules)."""

    #: The key is missing or refused, access is denied, or the account is out of quota.
    AUTH = "auth"
    #: The endpoint does not know the model, or the path is wrong (404).
    NOT_FOUND = "not_found"
    #: Still rate-limited (429) after the retries, or no time left to wait for one.
    RATE_LIMITED = "rate_limited"
    #: Still overloaded (Anthropic's 529, ``overloaded_error``) after the retries.
    OVERLOADED = "overloaded"
    #: A server error (5xx, 408, 409) after the retries.
    SERVER = "server"
    #: The endpoint could not be reached, or did not answer in time, before any output.
    UNREACHABLE = "unreachable"
    #: The request does not fit this model's context window.
    CONTEXT_TOO_LONG = "context_too_long"
    #: The endpoint refused this request as it is (another 4xx): another model would too.
    REFUSED = "refused"
    #: The answer broke off or was unusable (lost mid-stream, malformed, over a bound).
    BROKEN = "broken"


#: The kinds a fallback chain hands to its next model: retries of this model cannot fix them.
FALLBACK_KINDS: Final = frozenset(
    {
        ModelErrorKind.AUTH,
        ModelErrorKind.NOT_FOUND,
        ModelErrorKind.RATE_LIMITED,
        ModelErrorKind.OVERLOADED,
        ModelErrorKind.SERVER,
        ModelErrorKind.UNREACHABLE,
        ModelErrorKind.CONTEXT_TOO_LONG,
    }
)


class ModelError(TrioAgentsError):
    """The model failed; the message goes into the turn's error record.

    Attributes:
        kind: what kind of failure it was, or ``None`` when unclassified.
        limit: the context window (tokens) the provider reported, for ``CONTEXT_TOO_LONG``.
    """

    def __init__(
        self, message: str, *, kind: ModelErrorKind | None = None, limit: int | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.limit = limit
