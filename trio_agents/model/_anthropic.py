"""``AnthropicModel``: the Anthropic Messages API, streamed, on httpx.

Rules:
- One ``stream()`` is one ``POST {base_url}/v1/messages`` answered as server-sent events
  (the wire format lives in ``_anthropic_wire``); httpx runs on trio natively.
- Attempts: a connection failure, a 408/409/429/529 or a 5xx, or an ``overloaded_error``
  event before any output, is tried again, at most ``max_retries`` times, after
  ``Retry-After`` (at most 60 s) or an exponential backoff with jitter, slept with
  ``trio.sleep``. Invariant: only while nothing has been yielded, so a retry never repeats
  text the consumer has seen.
- Everything the stream opens (the client it made, the response) is closed when the stream
  ends, raises, is cancelled, or is closed by the consumer's ``aclosing``: no request outlives
  the turn that made it.
- Every failure is a :class:`ModelError` with one short line saying what to do.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import AsyncGenerator
from typing import Any, final

import httpx
import trio

from ._anthropic_wire import EventAssembler, StreamFailure, describe_failure, request_body
from ._errors import ModelError
from ._http import ClientSource, retryable_transport, transport_message
from ._messages import ModelRequest
from ._retry import backoff, finish_body, gave_up, retry_after
from ._spec_query import spec_number, spec_params, spec_url
from ._sse import SSEDecoder
from ._stream import ModelEvent

__all__ = ["API_VERSION", "DEFAULT_BASE_URL", "AnthropicModel", "anthropic_from_spec"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The ``anthropic-version`` header: the Messages API version this wire format follows.
API_VERSION = "2023-06-01"
_USER_AGENT = "trio-agents"


@final
class AnthropicModel:
    """A Claude model served by the Anthropic Messages API (``/v1/messages``).

    Args:
        model: the model name (``claude-sonnet-4-5``, ``claude-haiku-4-5``, ...).
        base_url: the API root, without ``/v1``; default ``$ANTHROPIC_BASE_URL``, else
            ``https://api.anthropic.com``.
        api_key: sent as ``x-api-key``; default ``$ANTHROPIC_API_KEY``. Required by the
            Anthropic endpoint; a proxy at another ``base_url`` may need none.
        max_tokens: the most tokens one answer may have (the API requires a limit).
        timeout: seconds allowed to connect, and between two pieces of the streamed answer;
            ``None`` waits forever.
        max_retries: how many times a failed request is tried again before any output.
        http_client: an ``httpx.AsyncClient`` to send through (its connection pool is then
            shared, and it stays open: its owner closes it). By default each stream uses a
            client of its own, closed with the stream.

    Raises:
        ValueError: no model name, ``max_tokens`` below 1, ``timeout`` not positive, or
            ``max_retries`` negative.
    """

    __slots__ = (
        "_api_key",
        "_base_url",
        "_clients",
        "_max_retries",
        "_max_tokens",
        "_random",
        "_timeout",
        "name",
    )

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 8192,
        timeout: float | None = 60.0,
        max_retries: int = 3,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not model:
            raise ValueError("AnthropicModel needs a model name, such as 'claude-sonnet-4-5'")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number >= 1; got {max_tokens!r}")
        if timeout is not None and not (timeout > 0 and not math.isnan(timeout)):
            raise ValueError(f"timeout must be a number of seconds > 0 or None; got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {max_retries!r}")
        self.name = model
        url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self._base_url = url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        self._max_tokens = max_tokens
        self._timeout = timeout
        self._max_retries = max_retries
        self._clients = ClientSource(self._base_url, http_client)
        self._random = random.Random()

    @property
    def base_url(self) -> str:
        """The API root requests go to (without a trailing slash)."""
        return self._base_url

    @property
    def url(self) -> str:
        """The endpoint every request is posted to."""
        return f"{self._base_url}/v1/messages"

    @property
    def max_tokens(self) -> int:
        """The most tokens one answer may have."""
        return self._max_tokens

    def __repr__(self) -> str:
        return f"<AnthropicModel {self.name!r} at {self._base_url}>"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Stream the answer to ``request``. See the module rules.

        Raises:
            ModelError: no key for the Anthropic endpoint, the endpoint is unreachable,
                refuses the request or is overloaded, or the stream breaks off.
        """
        await trio.lowlevel.checkpoint()
        if not self._api_key and self._base_url == DEFAULT_BASE_URL:
            raise ModelError("ANTHROPIC_API_KEY is not set; export it or pass api_key=")
        body = request_body(self.name, request, max_tokens=self._max_tokens)
        headers = {
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
            "user-agent": _USER_AGENT,
        }
        if self._api_key:
            headers["x-api-key"] = self._api_key
        timeout = httpx.Timeout(self._timeout)
        yielded = False
        attempt = 0
        final: list[ModelEvent] = []
        # The Model protocol has its consumer close the stream with aclosing(), so the
        # contexts below unwind in the consumer's task even when it stops early.
        async with self._clients.open() as client:
            while True:
                wait: float | None = None
                try:
                    async with client.stream(
                        "POST", self.url, json=body, headers=headers, timeout=timeout
                    ) as response:
                        if response.status_code >= 400:
                            content = await response.aread()
                            failure = describe_failure(
                                response.status_code,
                                content,
                                response.headers,
                                url=self.url,
                                model=self.name,
                            )
                            if not failure.retryable or attempt >= self._max_retries:
                                raise ModelError(gave_up(failure.message, attempt))
                            wait = retry_after(response.headers, time.time())
                        else:
                            decoder = SSEDecoder()
                            assembler = EventAssembler(self.url)
                            chunks = response.aiter_bytes()
                            try:
                                async for data in chunks:
                                    for sse in decoder.feed(data):
                                        for event in assembler.feed(sse.data):
                                            yielded = True
                                            yield event
                                    if assembler.done:
                                        break
                            except StreamFailure as exc:
                                if yielded or not exc.retryable or attempt >= self._max_retries:
                                    raise ModelError(gave_up(str(exc), attempt)) from None
                                wait = retry_after(response.headers, time.time())
                            else:
                                final = assembler.end()
                                break
                            finally:
                                await finish_body(chunks)
                except httpx.RequestError as exc:
                    if yielded or not retryable_transport(exc) or attempt >= self._max_retries:
                        message = transport_message(
                            exc,
                            url=self.url,
                            timeout=self._timeout,
                            yielded=yielded,
                            attempt=attempt,
                            endpoint_variable="ANTHROPIC_BASE_URL",
                        )
                        raise ModelError(message) from exc
                if wait is None:
                    wait = backoff(attempt, self._random)
                attempt += 1
                await trio.sleep(wait)
        for event in final:
            yield event


_SPEC_KEYS = ("base_url", "max_tokens", "timeout", "max_retries")


def anthropic_from_spec(rest: str) -> AnthropicModel:
    """Build the model of
    ``anthropic:MODEL[?base_url=URL&max_tokens=N&timeout=SECONDS&max_retries=N]``.

    ``rest`` is what follows ``anthropic:``.

    Raises:
        ModelSpecError: an unknown or repeated parameter, or a bad value.
    """
    model, params = spec_params("anthropic", rest, _SPEC_KEYS)
    spec = f"anthropic:{rest}"
    kwargs: dict[str, Any] = {}
    if "base_url" in params:
        kwargs["base_url"] = spec_url(spec, "base_url", params["base_url"])
    if "max_tokens" in params:
        raw = params["max_tokens"]
        kwargs["max_tokens"] = spec_number(spec, "max_tokens", raw, int, minimum=1)
    if "timeout" in params:
        kwargs["timeout"] = spec_number(spec, "timeout", params["timeout"], float)
    if "max_retries" in params:
        kwargs["max_retries"] = spec_number(spec, "max_retries", params["max_retries"], int)
    # Invariant: every value was checked above, so the constructor accepts them all.
    return AnthropicModel(model, **kwargs)
