"""Attempts of one streamed HTTP model request: when to try again, how long to wait, how to
say that we gave up. Shared by the HTTP providers (OpenAI-compatible, Anthropic).

Rules:
- A provider classifies an HTTP error response as a :class:`Failure`: one short message and
  whether another attempt may help. Invariant: a provider retries only while nothing has
  been yielded, so a retry never repeats output the consumer has seen.
- The wait before the next attempt is the server's (``retry_after``: ``retry-after-ms``,
  then ``Retry-After`` as seconds or an HTTP date, at most 60 s), else ``backoff``: an
  exponential step (0.5 s, 1 s, 2 s, ... capped at 8 s), up to a quarter shorter (jitter).
- ``gave_up`` adds the number of attempts to the last failure's message.
- ``finish_body`` ends a body iterator that was left early, so no generator stays suspended.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import AsyncIterator, Mapping

import attrs
import trio

__all__ = ["Failure", "backoff", "finish_body", "gave_up", "retry_after"]

_BACKOFF_BASE = 0.5
_BACKOFF_CAP = 8.0
_MAX_RETRY_AFTER = 60.0


@attrs.frozen
class Failure:
    """What an HTTP error response means for the caller."""

    message: str
    retryable: bool


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


async def finish_body(chunks: AsyncIterator[bytes]) -> None:
    """Finish a body iterator that was left early, so no generator of httpx stays suspended.

    httpx's byte iterators wrap generators of httpcore that ``aclose()`` does not reach; a
    cancellation at their next checkpoint unwinds the whole chain (the response itself is
    closed by its context right after).
    """
    with trio.CancelScope() as scope:
        scope.cancel()
        async for _ in chunks:
            pass
