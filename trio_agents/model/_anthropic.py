"""``AnthropicModel``: the Anthropic Messages API, streamed, on httpx.

Rules:
- One ``stream()`` is one ``POST {base_url}/v1/messages`` answered as server-sent events
  (the wire format lives in ``_anthropic_wire``); httpx runs on trio natively.
- Attempts: a connection failure, a 408/409/429/529 or a 5xx, or an ``overloaded_error``
  event before any output, is tried again, at most ``max_retries`` times, after
  ``Retry-After`` (at most 60 s) or an exponential backoff with jitter, slept with
  ``trio.sleep``. Invariant: only while nothing has been yielded, so a retry never repeats
  text the consumer has seen.
- Bounds: ``timeout`` for a silence (a keep-alive counts as a read), ``deadline`` for the
  whole answer with its retries, 64 KiB of an error body, ``max_line`` characters of a line
  or event, ``max_answer`` characters of one answer (text, reasoning and tool-call arguments
  together). The attempts and the bounds are the shared driver's (``_retry.Attempts``).
- Everything the stream opens (the client it made, the response) is closed when the stream
  ends, raises, is cancelled, or is closed by the consumer's ``aclosing``: no request outlives
  the turn that made it.
- Prompt caching is on unless ``cache=False`` (``?cache=0``): the request marks its stable
  prefix for the API's cache, and the usage counts what was written to and read from it.
- Every failure is a :class:`ModelError` with one short line saying what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import httpx

from ._anthropic_wire import EventAssembler, describe_failure, request_body
from ._endpoint import Endpoint, EndpointModel
from ._errors import ModelSpecError
from ._messages import ModelRequest
from ._protocol import check_context_window
from ._retry import DEFAULT_DEADLINE, Failure, StreamSettings
from ._spec_query import HTTP_SPEC_KEYS, http_spec_kwargs, spec_number, spec_params
from ._sse import DEFAULT_MAX_LINE
from ._wire import DEFAULT_MAX_ANSWER

#: The ``anthropic-version`` header: the Messages API version this wire format follows.
API_VERSION = "2023-06-01"


@final
class AnthropicModel(EndpointModel):
    """A Claude model served by the Anthropic Messages API (``/v1/messages``).

    Args:
        model: the model name (``claude-sonnet-4-5``, ``claude-haiku-4-5``, ...).
        base_url: the API root, without ``/v1``; default ``$ANTHROPIC_BASE_URL``, else
            ``https://api.anthropic.com``.
        api_key: sent as ``x-api-key``; default ``$ANTHROPIC_API_KEY``. Required by the
            Anthropic endpoint; a proxy at another ``base_url`` may need none.
        max_tokens: the most tokens one answer may have (the API requires a limit).
        timeout: seconds allowed to connect, and between two reads of the streamed answer
            (a ``ping`` counts); ``None`` waits forever.
        deadline: seconds allowed for the whole answer, attempts and waits included;
            ``None``: no limit.
        max_line: the longest line (and event) of the event stream, in characters.
        max_retries: how many times a failed request is tried again before any output.
        max_answer: the most characters of one answer (text, reasoning and tool-call
            arguments together); past it the answer is cut and the stream raises.
        context_window: the model's context window in tokens, or ``None`` when unknown (an
            agent compacts its history only when it knows the window).
        cache: mark prompt-cache breakpoints (``cache_control``) on the system text, the
            tools and the conversation so far, so that each step reads the prefix the last
            one wrote instead of paying for it again (see ``_anthropic_wire``).
        http_client: an ``httpx.AsyncClient`` to send through (its connection pool is then
            shared, and it stays open: its owner closes it). By default each stream uses a
            client of its own, closed with the stream.

    Raises:
        ValueError: no model name, ``max_tokens``, ``max_line`` or ``max_answer`` below 1,
            ``timeout`` or ``deadline`` not positive, ``max_retries`` negative, or
            ``context_window`` below 1.
    """

    __slots__ = ("_cache", "_max_tokens")

    PREFIX = "ANTHROPIC"
    DEFAULT_BASE_URL = "https://api.anthropic.com"
    PATH = "/v1/messages"
    ASSEMBLER = EventAssembler

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_tokens: int = 8192,
        timeout: float | None = 60.0,
        deadline: float | None = DEFAULT_DEADLINE,
        max_line: int = DEFAULT_MAX_LINE,
        max_retries: int = 3,
        max_answer: int = DEFAULT_MAX_ANSWER,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
        cache: bool = True,
    ) -> None:
        if not model:
            raise ValueError("AnthropicModel needs a model name, such as 'claude-sonnet-4-5'")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be a whole number >= 1; got {max_tokens!r}")
        settings = StreamSettings(timeout, deadline, max_line, max_retries, max_answer)
        self.name = model
        self.context_window = check_context_window(context_window)
        self._max_tokens = max_tokens
        self._cache = cache
        self._endpoint = Endpoint(
            self, settings, base_url=base_url, api_key=api_key, http_client=http_client
        )

    @property
    def max_tokens(self) -> int:
        """The most tokens one answer may have."""
        return self._max_tokens

    def _request(
        self, request: ModelRequest, api_key: str | None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        body = request_body(self.name, request, max_tokens=self._max_tokens, cache=self._cache)
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return body, headers

    def _describe(self, status: int, content: bytes, headers: Mapping[str, str]) -> Failure:
        return describe_failure(status, content, headers, url=self.url, model=self.name)


_SPEC_KEYS = ("base_url", "max_tokens", *HTTP_SPEC_KEYS[1:], "cache")


def anthropic_from_spec(rest: str) -> AnthropicModel:
    """Build the model of ``anthropic:MODEL[?base_url=URL&max_tokens=N&timeout=SECONDS&
    deadline=SECONDS&max_line=N&max_retries=N&max_answer=N&context_window=TOKENS&cache=0|1]``.

    ``rest`` is what follows ``anthropic:``.

    Raises:
        ModelSpecError: an unknown or repeated parameter, or a bad value.
    """
    model, params = spec_params("anthropic", rest, _SPEC_KEYS)
    spec = f"anthropic:{rest}"
    max_tokens = params.pop("max_tokens", None)
    cache = params.pop("cache", None)
    kwargs = http_spec_kwargs(spec, params)
    if cache is not None:
        if cache not in ("0", "1"):
            raise ModelSpecError(
                f"invalid model spec {spec!r}: cache must be 0 or 1, got {cache!r}"
            )
        kwargs["cache"] = cache == "1"
    if max_tokens is not None:
        kwargs["max_tokens"] = spec_number(spec, "max_tokens", max_tokens, int, minimum=1)
    # Invariant: every value was checked, so the constructor accepts them all.
    return AnthropicModel(model, **kwargs)
