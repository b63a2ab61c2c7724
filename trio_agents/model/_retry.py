"""Attempts of one streamed HTTP model request, shared by the HTTP providers (OpenAI-compatible,
Anthropic): when to try again, how long to wait, how to say that we gave up, and the one
driver (:class:`Attempts`) that runs them within their time and memory bounds.

Rules:
- A provider gives the driver what differs: how to read an HTTP error response (a
  :class:`Failure`: one short message and whether another attempt may help) and an assembler
  of its stream events. Invariant: the driver retries only while nothing has been yielded, so
  a retry never repeats output the consumer has seen.
- The wait before the next attempt is the server's (``retry_after``: ``retry-after-ms``,
  then ``Retry-After`` as seconds or an HTTP date, at most 60 s), else ``backoff``: an
  exponential step (0.5 s, 1 s, 2 s, ... capped at 8 s), up to a quarter shorter (jitter).
- ``gave_up`` adds the number of attempts to the last failure's message.
- Every :class:`ModelError` the driver raises has a kind (``ModelErrorKind``): the one the
  provider's ``describe`` gave the failure (``Failure.kind``, with the window a "too long"
  answer reported, ``Failure.limit``); ``UNREACHABLE`` for a connection that failed or a
  deadline that passed before any output; ``BROKEN`` for anything that failed after output
  and for an answer the assembler could not use. So a caller (a fallback chain, a turn)
  tells a rate limit waited out in vain from an outage or a conversation too long.
- Bounds (:class:`StreamSettings`): ``timeout`` is the idle bound, seconds to connect and
  between two reads of the network (a keep-alive comment is a read: the connection is alive);
  ``deadline`` bounds the whole ``stream()`` call, attempts and waits included, so a server
  that only ever sends keep-alives ends the turn too. A wait that would pass the deadline is
  not started. An error body is read up to 64 KiB, a line of the event stream up to
  ``max_line`` characters, one answer up to ``max_answer`` characters (the assembler counts
  it: ``_wire.AnswerBudget``); past any bound the message says so.
- The deadline is applied around each await of the driver, never across a ``yield``: a cancel
  scope must not be left open while the consumer runs.
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import random
import re
import time
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import aclosing
from typing import Any, Protocol, final

import attrs
import httpx
import trio

from ._errors import ModelError, ModelErrorKind
from ._http import ERROR_BODY_LIMIT, ClientSource, finish_body, read_limited
from ._sse import DEFAULT_MAX_LINE, SSEDecoder, SSELimitError
from ._stream import ModelEvent
from ._wire import DEFAULT_MAX_ANSWER

#: The default bound of one whole ``stream()`` call, in seconds (10 minutes).
DEFAULT_DEADLINE = 600.0

_BACKOFF_BASE = 0.5
_BACKOFF_CAP = 8.0
_MAX_RETRY_AFTER = 60.0


@attrs.frozen
class Failure:
    """What an HTTP error response means for the caller."""

    message: str
    retryable: bool
    kind: ModelErrorKind | None = None
    #: The context window the provider reported, when it refused a request as too long.
    limit: int | None = None


class StreamFailure(ModelError):
    """The API reported an error inside a stream; ``retryable`` if another attempt may help."""

    def __init__(
        self, message: str, *, retryable: bool, kind: ModelErrorKind | None = None
    ) -> None:
        super().__init__(message, kind=kind)
        self.retryable = retryable


def _seconds_or_none(value: float | None) -> bool:
    return value is None or (value > 0 and not math.isnan(value))


@attrs.frozen
class StreamSettings:
    """The bounds and the retry budget of a provider's streams; see the module rules.

    Raises:
        ValueError: ``timeout`` or ``deadline`` not positive, ``max_line`` or ``max_answer``
            below 1, or ``max_retries`` negative.
    """

    timeout: float | None = 60.0
    deadline: float | None = DEFAULT_DEADLINE
    max_line: int = DEFAULT_MAX_LINE
    max_retries: int = 3
    max_answer: int = DEFAULT_MAX_ANSWER

    def __attrs_post_init__(self) -> None:
        for name in ("timeout", "deadline"):
            value = getattr(self, name)
            if not _seconds_or_none(value):
                raise ValueError(f"{name} must be a number of seconds > 0 or None; got {value!r}")
        for name in ("max_line", "max_answer"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be a whole number >= 1; got {value!r}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0; got {self.max_retries!r}")


def backoff(attempt: int, rng: random.Random) -> float:
    """Exponential backoff with jitter: up to a quarter less than the doubling step."""
    step = min(_BACKOFF_CAP, _BACKOFF_BASE * 2.0**attempt)
    return step * (1.0 - 0.25 * rng.random())


def gave_up(message: str, retries: int) -> str:
    """``message``, saying how many attempts were made when there was more than one."""
    if not retries:
        return message
    return f"{message} (gave up after {retries + 1} attempts)"


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for before the next attempt, in seconds, or ``None``.

    Honours ``retry-after-ms``, then ``Retry-After`` as seconds or as an HTTP date (``now``:
    the current POSIX time). Values that are negative or above 60 s are ignored, as the
    official clients do, so the caller falls back to its own backoff.
    """
    seconds: float | None = None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _number(millis, 1000.0)
    value = headers.get("retry-after")
    if seconds is None and value is not None:
        seconds = _number(value, 1.0)
        if seconds is None and now is not None:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None and when.tzinfo is not None:
                seconds = max(0.0, when.timestamp() - now)
    if seconds is None or not 0 <= seconds <= _MAX_RETRY_AFTER:
        return None
    return seconds


def _number(text: str, per_second: float) -> float | None:
    try:
        value = float(text.strip()) / per_second
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# "This model's maximum context length is 8192 tokens" (OpenAI and most compatible servers);
# "prompt is too long: 208000 tokens > 200000 maximum" and "178959 + 64000 > 200000" (Anthropic).
_LIMIT = re.compile(r"maximum context length is (\d[\d,]*)|>\s*(\d[\d,]*)")


def reported_limit(message: str) -> int | None:
    """The context window a "too long" error message states, in tokens, or ``None``."""
    found = _LIMIT.search(message)
    if found is None:
        return None
    limit = int((found.group(1) or found.group(2)).replace(",", ""))
    return limit if limit > 0 else None


def retryable_transport(exc: httpx.RequestError) -> bool:
    """Whether a request that failed with ``exc`` (before any output) may be sent again."""
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.UnsupportedProtocol)


def transport_message(
    exc: httpx.RequestError,
    *,
    url: str,
    timeout: float | None,
    yielded: bool,
    endpoint_variable: str,
) -> str:
    """The one line of a provider's :class:`ModelError` for a failed HTTP exchange.

    Args:
        yielded: whether the stream had produced output (then it is never retried).
        endpoint_variable: the environment variable that sets the endpoint, named in the
            "cannot reach" hint.
    """
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol):
        return f"cannot send to {url}: base_url must start with http:// or https://"
    if isinstance(exc, httpx.DecodingError):
        return f"cannot decode the answer of {url}: {detail}"
    if isinstance(exc, httpx.TimeoutException):
        within = f" within {timeout:g} s" if timeout is not None else ""
        if yielded:
            return f"{url} stopped sending mid-answer (nothing{within}); try again"
        return f"{url} did not answer{within} ({type(exc).__name__})"
    if yielded:
        return f"the connection to {url} was lost mid-stream ({detail}); try again"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return f"the connection to {url} failed: {detail}"
    return (
        f"cannot reach {url}: {detail}; is the server running? "
        f"(set {endpoint_variable} or base_url= to change the endpoint)"
    )


class Assembler(Protocol):
    """A provider's sans-IO reader of the ``data`` of its stream events."""

    @property
    def done(self) -> bool:
        """Whether the stream said it is complete (nothing after that matters)."""

    def feed(self, data: str) -> list[ModelEvent]:
        """Take one event's data; return the events ready to yield."""

    def end(self) -> list[ModelEvent]:
        """The body ended: the last events (ending with ``Finished``)."""


#: Reads an error response: ``(status, body, headers) -> Failure``.
Describe = Callable[[int, bytes, Mapping[str, str]], Failure]


class _TryAgain(Exception):
    """An attempt failed in a way another attempt may mend (nothing was yielded)."""

    def __init__(self, message: str, wait: float | None, kind: ModelErrorKind | None) -> None:
        super().__init__(message)
        self.message = message
        self.wait = wait
        self.kind = kind


@attrs.define
class _Call:
    """The state of one ``stream()`` call across its attempts."""

    at: float  # the deadline, in trio time
    attempt: int = 0  # retries made so far
    yielded: bool = False


@final
class Attempts:
    """The attempts of every stream of one provider; see the module rules.

    Args:
        url: the endpoint every request is posted to.
        base_url: the API root (it says whether the CA bundle is needed).
        http_client: a shared client, or ``None`` for one per stream (see ``ClientSource``).
        endpoint_variable: the environment variable that sets the endpoint (for hints).
        describe: reads an HTTP error response.
        assembler: makes the reader of one attempt's events.
    """

    __slots__ = ("_assembler", "_clients", "_describe", "_random", "_settings", "_url", "_variable")

    def __init__(
        self,
        url: str,
        *,
        settings: StreamSettings,
        base_url: str,
        http_client: httpx.AsyncClient | None,
        describe: Describe,
        assembler: Callable[[], Assembler],
        endpoint_variable: str,
    ) -> None:
        self._url = url
        self._settings = settings
        self._clients = ClientSource(base_url, http_client)
        self._describe = describe
        self._assembler = assembler
        self._variable = endpoint_variable
        self._random = random.Random()

    async def stream(
        self, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> AsyncGenerator[ModelEvent, None]:
        """POST ``body`` and stream the events of the answer, trying again as the rules say.

        Raises:
            ModelError: every failure, in one line saying what to do.
        """
        deadline = self._settings.deadline
        call = _Call(math.inf if deadline is None else trio.current_time() + deadline)
        # The Model protocol has its consumer close the stream with aclosing(), so the
        # contexts below unwind in the consumer's task even when it stops early.
        async with self._clients.open() as client:
            while True:
                try:
                    async with aclosing(self._attempt(client, body, headers, call)) as events:
                        async for event in events:
                            call.yielded = True
                            yield event
                    return
                except _TryAgain as failed:
                    await self._wait(failed, call)

    async def _attempt(
        self,
        client: httpx.AsyncClient,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        call: _Call,
    ) -> AsyncGenerator[ModelEvent, None]:
        """One attempt; a failure another attempt may mend is :class:`_TryAgain`."""
        timeout = httpx.Timeout(self._settings.timeout)
        try:
            async with contextlib.AsyncExitStack() as stack:
                with self._within(call):
                    response = await stack.enter_async_context(
                        client.stream(
                            "POST", self._url, json=body, headers=headers, timeout=timeout
                        )
                    )
                if response.status_code >= 400:
                    with self._within(call):
                        content, cut = await read_limited(response, ERROR_BODY_LIMIT)
                    failure = self._describe(response.status_code, content, response.headers)
                    message = failure.message
                    if cut:
                        message += f" (the error body was cut at {ERROR_BODY_LIMIT} bytes)"
                    raise self._failure(
                        attrs.evolve(failure, message=message), call, response.headers
                    )
                async with aclosing(self._events(response, call)) as events:
                    async for event in events:
                        yield event
        except httpx.RequestError as exc:
            message = transport_message(
                exc,
                url=self._url,
                timeout=self._settings.timeout,
                yielded=call.yielded,
                endpoint_variable=self._variable,
            )
            if call.yielded:
                raise ModelError(message, kind=ModelErrorKind.BROKEN) from exc
            if not retryable_transport(exc):
                raise ModelError(message, kind=ModelErrorKind.UNREACHABLE) from exc
            failure = Failure(message, True, ModelErrorKind.UNREACHABLE)
            raise self._failure(failure, call, None) from exc

    async def _events(
        self, response: httpx.Response, call: _Call
    ) -> AsyncGenerator[ModelEvent, None]:
        """The model events of a 2xx answer, read within the bounds."""
        decoder = SSEDecoder(self._settings.max_line)
        assembler = self._assembler()
        chunks = response.aiter_bytes()
        try:
            while not assembler.done:
                with self._within(call):
                    data = await anext(chunks, None)
                if data is None:
                    break
                for sse in decoder.feed(data):
                    for event in assembler.feed(sse.data):
                        yield event
        except SSELimitError as exc:
            raise ModelError(self._too_long(exc), kind=ModelErrorKind.BROKEN) from None
        except StreamFailure as exc:
            retryable = exc.retryable and not call.yielded
            # After output the failure is the answer breaking off, whatever the API said.
            kind = exc.kind if not call.yielded else ModelErrorKind.BROKEN
            failure = Failure(str(exc), retryable, kind)
            raise self._failure(failure, call, response.headers) from None
        except ModelError as exc:
            # The assembler's own failures (malformed events, an answer over its bound).
            if exc.kind is None:
                exc.kind = ModelErrorKind.BROKEN
            raise
        finally:
            await finish_body(chunks)
        for event in assembler.end():
            yield event

    def _failure(
        self, failure: Failure, call: _Call, headers: Mapping[str, str] | None
    ) -> Exception:
        """:class:`_TryAgain` if the failure allows another attempt, else the error to raise."""
        if not failure.retryable or call.attempt >= self._settings.max_retries:
            message = gave_up(failure.message, call.attempt)
            return ModelError(message, kind=failure.kind, limit=failure.limit)
        wait = None if headers is None else retry_after(headers, time.time())
        return _TryAgain(failure.message, wait, failure.kind)

    async def _wait(self, failed: _TryAgain, call: _Call) -> None:
        """Sleep before the next attempt, unless that would pass the deadline."""
        wait = failed.wait if failed.wait is not None else backoff(call.attempt, self._random)
        if trio.current_time() + wait >= call.at:
            message = f"{failed.message}; the deadline of {self._settings.deadline:g} s leaves "
            message = gave_up(message + "no time for another attempt", call.attempt)
            raise ModelError(message, kind=failed.kind)
        call.attempt += 1
        await trio.sleep(wait)

    @contextlib.contextmanager
    def _within(self, call: _Call) -> Iterator[None]:
        """Run the block under the deadline; its expiry is a :class:`ModelError`."""
        try:
            with trio.fail_at(call.at):
                yield
        except trio.TooSlowError:
            # Past the deadline with output is a broken answer; without, no answer at all.
            kind = ModelErrorKind.BROKEN if call.yielded else ModelErrorKind.UNREACHABLE
            message = gave_up(
                f"{self._url} did not finish its answer within the deadline of "
                f"{self._settings.deadline:g} s; try again, or allow more time "
                "(deadline= or ?deadline=SECONDS in the model spec)",
                call.attempt,
            )
            raise ModelError(message, kind=kind) from None

    def _too_long(self, exc: SSELimitError) -> str:
        return (
            f"{self._url} sent {exc.what} longer than {exc.limit} characters in its event "
            "stream; if its events are really this large, raise max_line= "
            "(?max_line=N in the model spec)"
        )
