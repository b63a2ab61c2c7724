"""``OpenAIChatModel``: any OpenAI-compatible chat-completions endpoint, streamed, on httpx.

Rules:
- One ``stream()`` is one ``POST {base_url}/chat/completions`` answered as server-sent
  events; httpx runs on trio natively (httpcore's trio backend), no asyncio involved.
- Attempts: a connection failure, a 408/409/429 or a 5xx is tried again, at most
  ``max_retries`` times, after ``Retry-After`` (seconds, at most 60) or an exponential
  backoff with jitter, slept with ``trio.sleep``. Invariant: only while nothing has been
  yielded, so a retry never repeats text the consumer has seen.
- Bounds: ``timeout`` for a silence (a keep-alive counts as a read), ``deadline`` for the
  whole answer with its retries, 64 KiB of an error body, ``max_line`` characters of a line
  or event, ``max_answer`` characters of one answer (text, reasoning and tool-call arguments
  together). The attempts and the bounds are the shared driver's (``_retry.Attempts``).
- Everything the stream opens (the client it made, the response) is closed when the stream
  ends, raises, is cancelled, or is closed by the consumer's ``aclosing``: no request outlives
  the turn that made it.
- Every failure is a :class:`ModelError` with one short message saying what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

import httpx

from ._endpoint import Endpoint, EndpointModel
from ._messages import ModelRequest
from ._openai_wire import ChunkAssembler, describe_failure, request_body
from ._protocol import check_context_window
from ._retry import DEFAULT_DEADLINE, Failure, StreamSettings
from ._spec_query import HTTP_SPEC_KEYS, http_spec_kwargs, spec_params
from ._sse import DEFAULT_MAX_LINE
from ._wire import DEFAULT_MAX_ANSWER


@final
class OpenAIChatModel(EndpointModel):
    """A model served by an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name the endpoint knows (``gpt-4o-mini``, ``llama3.2``, ...).
        base_url: the API root, ending in ``/v1`` for most servers; default
            ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
        api_key: sent as a bearer token; default ``$OPENAI_API_KEY``. Only the OpenAI
            endpoint requires one: local servers (llama.cpp, vLLM, Ollama) usually need none.
        timeout: seconds allowed to connect, and between two reads of the streamed answer
            (a keep-alive counts); ``None`` waits forever.
        deadline: seconds allowed for the whole answer, attempts and waits included;
            ``None``: no limit.
        max_line: the longest line (and event) of the event stream, in characters.
        max_retries: how many times a failed request is tried again before any output.
        max_answer: the most characters of one answer (text, reasoning and tool-call
            arguments together); past it the answer is cut and the stream raises.
        context_window: the model's context window in tokens, or ``None`` when unknown (an
            agent compacts its history only when it knows the window).
        http_client: an ``httpx.AsyncClient`` to send through (its connection pool is then
            shared, and it stays open: its owner closes it). By default each stream uses a
            client of its own, closed with the stream.

    Raises:
        ValueError: ``timeout`` or ``deadline`` is not positive, ``max_line`` or ``max_answer``
            is below 1, ``max_retries`` is negative, or ``context_window`` is below 1.
    """

    __slots__ = ()

    PREFIX = "OPENAI"
    DEFAULT_BASE_URL = "https://api.openai.com/v1"
    PATH = "/chat/completions"
    ASSEMBLER = ChunkAssembler

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = 60.0,
        deadline: float | None = DEFAULT_DEADLINE,
        max_line: int = DEFAULT_MAX_LINE,
        max_retries: int = 3,
        max_answer: int = DEFAULT_MAX_ANSWER,
        http_client: httpx.AsyncClient | None = None,
        context_window: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("OpenAIChatModel needs a model name, such as 'gpt-4o-mini'")
        settings = StreamSettings(timeout, deadline, max_line, max_retries, max_answer)
        self.name = model
        self.context_window = check_context_window(context_window)
        self._endpoint = Endpoint(
            self, settings, base_url=base_url, api_key=api_key, http_client=http_client
        )

    def _request(
        self, request: ModelRequest, api_key: str | None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        return request_body(self.name, request), headers

    def _describe(self, status: int, content: bytes, headers: Mapping[str, str]) -> Failure:
        return describe_failure(status, content, url=self.url, model=self.name)


def openai_from_spec(rest: str) -> OpenAIChatModel:
    """Build the model of ``openai:MODEL[?base_url=URL&timeout=SECONDS&deadline=SECONDS&
    max_line=N&max_retries=N&max_answer=N&context_window=TOKENS]``.

    ``rest`` is what follows ``openai:``.

    Raises:
        ModelSpecError: an unknown or repeated parameter, or a bad value.
    """
    model, params = spec_params("openai", rest, HTTP_SPEC_KEYS)
    # Invariant: every value was checked, so the constructor accepts them all.
    return OpenAIChatModel(model, **http_spec_kwargs(f"openai:{rest}", params))
