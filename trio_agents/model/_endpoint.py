"""Where an HTTP provider sends its requests: one home for what every provider resolves the
same way.

Rules:
- The API root is the argument, else ``$<PREFIX>_BASE_URL``, else the provider's default;
  kept without a trailing slash. The key is the argument (even an empty one), else
  ``$<PREFIX>_API_KEY``.
- The provider's own default endpoint needs a key; any other (a local server, a proxy) may
  have none, so a missing key is refused only there, before anything is sent.
- One stream is one stream of the attempts driver (``_retry.Attempts``); its consumer closes it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, final

import httpx

from .. import tracing
from ._errors import ModelError, ModelErrorKind
from ._retry import Assembler, Attempts, Describe, StreamSettings
from ._stream import ModelEvent

__all__ = ["USER_AGENT", "Endpoint", "EndpointModel"]

#: The ``user-agent`` header of every request.
USER_AGENT = "trio-agents"


@final
class Endpoint:
    """The resolved endpoint of one provider object, and the driver of its attempts.

    Args:
        prefix: the provider's environment prefix (``OPENAI``: ``$OPENAI_BASE_URL``,
            ``$OPENAI_API_KEY``).
        default_base_url: the provider's own API root.
        path: what follows the root in the URL every request is posted to.
        base_url: the root asked for, or ``None``.
        api_key: the key given, or ``None``.
        settings: the stream's bounds and retries.
        http_client: a shared client, or ``None`` for one per stream.
        describe: reads an HTTP error response of this endpoint.
        assembler: makes the reader of one attempt's events, given the URL and the bound of
            one answer (``settings.max_answer``).
    """

    __slots__ = ("_attempts", "_default", "_prefix", "api_key", "base_url", "url")

    def __init__(
        self,
        *,
        prefix: str,
        default_base_url: str,
        path: str,
        base_url: str | None,
        api_key: str | None,
        settings: StreamSettings,
        http_client: httpx.AsyncClient | None,
        describe: Describe,
        assembler: Callable[[str, int], Assembler],
    ) -> None:
        self._prefix = prefix
        self._default = default_base_url.rstrip("/")
        root = base_url or os.environ.get(f"{prefix}_BASE_URL") or default_base_url
        self.base_url = root.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(f"{prefix}_API_KEY")
        self.url = f"{self.base_url}{path}"
        url = self.url
        max_answer = settings.max_answer
        self._attempts = Attempts(
            url,
            settings=settings,
            base_url=self.base_url,
            http_client=http_client,
            describe=describe,
            assembler=lambda: assembler(url, max_answer),
            endpoint_variable=f"{prefix}_BASE_URL",
        )

    def check_key(self) -> None:
        """Refuse a missing key for the provider's own endpoint (see the module rules).

        Raises:
            ModelError: the key is missing and the endpoint is the provider's own.
        """
        if not self.api_key and self.base_url == self._default:
            raise ModelError(
                f"{self._prefix}_API_KEY is not set; export it or pass api_key=",
                kind=ModelErrorKind.AUTH,
            )

    def stream(
        self, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> AsyncGenerator[ModelEvent, None]:
        """The stream that POSTs ``body`` with ``headers`` (and the user agent) and yields the
        answer's events; close it with ``aclosing``.

        Raises:
            ModelError: every failure, in one line saying what to do.
        """
        return self._attempts.stream(body, tracing.headers({**headers, "user-agent": USER_AGENT}))


class EndpointModel:
    """The part of an HTTP provider that its endpoint answers (a base of the providers)."""

    __slots__ = ("_endpoint",)

    _endpoint: Endpoint

    def preflight(self) -> None:
        """Refuse, before anything is stored or sent, a missing key for the provider's own
        endpoint (see :func:`trio_agents.model.preflight`).

        Raises:
            ModelError: ``$<PREFIX>_API_KEY`` is not set (nor ``api_key=`` given).
        """
        self._endpoint.check_key()

    @property
    def base_url(self) -> str:
        """The API root requests go to (without a trailing slash)."""
        return self._endpoint.base_url

    @property
    def url(self) -> str:
        """The endpoint every request is posted to."""
        return self._endpoint.url
