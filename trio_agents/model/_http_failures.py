"""How an HTTP provider's error response is worded: the same words for every provider.

Rules:
- A provider decides what a response means (its status, its error type, what its message
  says); :class:`FailureWords` words that meaning, so one failure reads alike whichever
  provider met it: what went wrong at which URL, the status as the provider names it
  (``code``), what the server said (``said``), and what to do.
- What to do names the provider's own variables (``$<PREFIX>_API_KEY``,
  ``$<PREFIX>_BASE_URL``).
- An error body is JSON when it can be read as JSON (:func:`error_body`); its text, on one
  line, is what the server said otherwise.
"""

from __future__ import annotations

from typing import final

import attrs

from ._errors import ModelErrorKind
from ._retry import Failure, reported_limit
from ._wire import loads

__all__ = ["FailureWords", "error_body"]


def error_body(content: bytes) -> tuple[object, str]:
    """The JSON of an error response's body (``None`` if it is not JSON), and its text on
    one line."""
    text = content.decode("utf-8", errors="replace")
    try:
        body: object = loads(text)
    except ValueError:
        body = None
    return body, " ".join(text.split())


@final
@attrs.frozen
class FailureWords:
    """The words of the failures of one error response (see the module rules).

    Args:
        url: the URL the request went to.
        model: the model asked for.
        code: the status as the provider names it (``401 authentication_error``,
            ``HTTP 500``).
        said: what the server said, as ``": <message>"``, or ``""``.
        prefix: the provider's environment prefix (``OPENAI``).
    """

    url: str
    model: str
    code: str
    said: str
    prefix: str

    def bad_key(self) -> Failure:
        """The key was refused."""
        return Failure(
            f"{self.url} refused the API key ({self.code}){self.said}; check {self.prefix}_API_KEY",
            False,
            ModelErrorKind.AUTH,
        )

    def denied(self) -> Failure:
        """The key may not use this endpoint."""
        return Failure(
            f"{self.url} denied access ({self.code}){self.said}", False, ModelErrorKind.AUTH
        )

    def no_model(self) -> Failure:
        """The endpoint does not know the model."""
        return Failure(
            f"model {self.model!r} was not found at {self.url} ({self.code}){self.said}",
            False,
            ModelErrorKind.NOT_FOUND,
        )

    def not_found(self, root: str) -> Failure:
        """Nothing is at the URL; ``root`` says how the provider's base URL ends."""
        return Failure(
            f"{self.url} was not found ({self.code}){self.said}; check the base URL "
            f"({self.prefix}_BASE_URL, {root}) and the model name {self.model!r}",
            False,
            ModelErrorKind.NOT_FOUND,
        )

    def too_long(self, message: str) -> Failure:
        """The conversation does not fit the model's window; ``message`` may state it."""
        return Failure(
            f"the conversation is too long for model {self.model!r} ({self.code}){self.said}; "
            "start a new session or shorten the input",
            False,
            ModelErrorKind.CONTEXT_TOO_LONG,
            reported_limit(message),
        )

    def rate_limited(self) -> Failure:
        """Too many requests: another attempt may pass."""
        return Failure(
            f"{self.url} kept rate-limiting the request ({self.code}){self.said}",
            True,
            ModelErrorKind.RATE_LIMITED,
        )

    def server(self) -> Failure:
        """The server failed: another attempt may pass."""
        return Failure(
            f"{self.url} failed with {self.code}{self.said}", True, ModelErrorKind.SERVER
        )

    def refused(self, then: str = "") -> Failure:
        """The request was refused; ``then`` is what to do (``"; ..."``), if known."""
        return Failure(
            f"{self.url} refused the request ({self.code}){self.said}{then}",
            False,
            ModelErrorKind.REFUSED,
        )
