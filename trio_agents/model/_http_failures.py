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

from typing import Final, Literal, TypeAlias, final

import attrs

from ._errors import ModelErrorKind
from ._retry import Failure
from ._wire import loads

#: What a provider found an error response to mean.
Meaning: TypeAlias = Literal[
    "bad_key", "denied", "no_model", "not_found", "too_long", "rate_limited", "server", "refused"
]

_AUTH, _NOT_FOUND = ModelErrorKind.AUTH, ModelErrorKind.NOT_FOUND
#: The words of each meaning (``str.format`` fields: those of :class:`FailureWords`, and
#: ``root`` and ``then``), whether another attempt may help, and the kind of failure.
_SAYS: Final[dict[Meaning, tuple[str, bool, ModelErrorKind]]] = {
    "bad_key": ("{url} refused the API key ({code}){said}; check {prefix}_API_KEY", False, _AUTH),
    "denied": ("{url} denied access ({code}){said}", False, _AUTH),
    "no_model": ("model {model!r} was not found at {url} ({code}){said}", False, _NOT_FOUND),
    "not_found": (
        "{url} was not found ({code}){said}; check the base URL ({prefix}_BASE_URL, {root}) "
        "and the model name {model!r}",
        False,
        _NOT_FOUND,
    ),
    "too_long": (
        "the conversation is too long for model {model!r} ({code}){said}; start a new "
        "session or shorten the input",
        False,
        ModelErrorKind.CONTEXT_TOO_LONG,
    ),
    "rate_limited": (
        "{url} kept rate-limiting the request ({code}){said}",
        True,
        ModelErrorKind.RATE_LIMITED,
    ),
    "server": ("{url} failed with {code}{said}", True, ModelErrorKind.SERVER),
    "refused": ("{url} refused the request ({code}){said}{then}", False, ModelErrorKind.REFUSED),
}


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

    def failure(
        self, meaning: Meaning, *, root: str = "", then: str = "", limit: int | None = None
    ) -> Failure:
        """The failure that ``meaning`` is.

        Args:
            meaning: what the provider found the response to mean.
            root: for ``not_found``: how the provider's base URL ends.
            then: for ``refused``: what to do (``"; ..."``), if known.
            limit: for ``too_long``: the context window the response states, if any.
        """
        words, retryable, kind = _SAYS[meaning]
        fields = attrs.asdict(self)
        return Failure(words.format(**fields, root=root, then=then), retryable, kind, limit)
