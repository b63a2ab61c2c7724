"""Where an HTTP provider sends its requests: one home for what every provider resolves the
same way.

Rules:
- The API root is the argument, else ``$<PREFIX>_BASE_URL``, else the provider's default;
  kept without a trailing slash. The key is the argument (even an empty one), else
  ``$<PREFIX>_API_KEY``.
- The provider's own default endpoint needs a key; any other (a local server, a proxy) may
  have none, so a missing key is refused only there, before anything is sent.
- One stream is one stream of the attempts driver (``_retry.Attempts``); its consumer closes it.
  Every request accepts ``text/event-stream`` and names the user agent; the provider adds the
  headers of its API (the key's among them).
- A provider's ``stream()`` is :class:`EndpointModel`'s: a checkpoint, the key check, then the
  attempts of the body and headers the provider makes of the request.
"""

from __future__ import annotations

import abc
import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any, ClassVar, final

import httpx
import trio

from .. import tracing
from ._errors import ModelError, ModelErrorKind
from ._messages import ModelRequest
from ._retry import Attempts, Failure, StreamSettings
from ._stream import ModelEvent
from ._wire import StreamAssembler

#: The ``user-agent`` header of every request.
USER_AGENT = "trio-agents"


@final
class Endpoint:
    """The resolved endpoint of one provider object, and the driver of its attempts.

    Args:
        model: the provider object: its API (the class variables of :class:`EndpointModel`)
            and the reader of its error responses.
        settings: the stream's bounds and retries.
        base_url: the root asked for, or ``None``.
        api_key: the key given, or ``None``.
        http_client: a shared client, or ``None`` for one per stream.
    """

    __slots__ = ("_attempts", "_default", "_prefix", "api_key", "base_url", "url")

    def __init__(
        self,
        model: EndpointModel,
        settings: StreamSettings,
        *,
        base_url: str | None,
        api_key: str | None,
        http_client: httpx.AsyncClient | None,
    ) -> None:
        prefix = self._prefix = model.PREFIX
        self._default = model.DEFAULT_BASE_URL.rstrip("/")
        root = base_url or os.environ.get(f"{prefix}_BASE_URL") or model.DEFAULT_BASE_URL
        self.base_url = root.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(f"{prefix}_API_KEY")
        self.url = f"{self.base_url}{model.PATH}"
        url = self.url
        max_answer = settings.max_answer
        assembler = model.ASSEMBLER
        self._attempts = Attempts(
            url,
            settings=settings,
            base_url=self.base_url,
            http_client=http_client,
            describe=model._describe,
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
        """The stream that POSTs ``body`` with ``headers`` (and the event-stream type it
        accepts, and the user agent) and yields the answer's events; close it with
        ``aclosing``.

        Raises:
            ModelError: every failure, in one line saying what to do.
        """
        headers = {"accept": "text/event-stream", **headers, "user-agent": USER_AGENT}
        return self._attempts.stream(body, tracing.headers(headers))


class EndpointModel(abc.ABC):
    """An HTTP provider: a model that its endpoint answers (the base of the providers).

    A subclass names its API in the class variables, sets ``name``, ``context_window`` and
    its :class:`Endpoint`, and says what one request sends (:meth:`_request`) and what an
    error response of its API means (:meth:`_describe`); :meth:`stream` is every provider's.
    """

    __slots__ = ("_endpoint", "context_window", "name")

    name: str
    context_window: int | None
    _endpoint: Endpoint

    #: The environment prefix (``OPENAI``: ``$OPENAI_BASE_URL``, ``$OPENAI_API_KEY``).
    PREFIX: ClassVar[str]
    #: The provider's own API root.
    DEFAULT_BASE_URL: ClassVar[str]
    #: What follows the root in the URL every request is posted to.
    PATH: ClassVar[str]
    #: The reader of one attempt's events, made with the URL and the bound of one answer.
    ASSEMBLER: ClassVar[type[StreamAssembler]]

    @abc.abstractmethod
    def _request(
        self, request: ModelRequest, api_key: str | None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The body of the POST that asks for ``request``'s answer, and the headers that the
        API requires beside the accepted type and the user agent (the key's, when there is
        a key)."""

    @abc.abstractmethod
    def _describe(self, status: int, content: bytes, headers: Mapping[str, str]) -> Failure:
        """What the error response ``status`` with body ``content`` means."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} at {self.base_url}>"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Stream the answer to ``request``. See the provider module's rules.

        Raises:
            ModelError: no key for the provider's own endpoint, the endpoint is unreachable,
                refuses the request or is overloaded, or the stream breaks off.
        """
        await trio.lowlevel.checkpoint()
        endpoint = self._endpoint
        endpoint.check_key()
        body, headers = self._request(request, endpoint.api_key)
        async with aclosing(endpoint.stream(body, headers)) as events:
            async for event in events:
                yield event

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
