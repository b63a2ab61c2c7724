"""Where an HTTP provider's streams get their ``httpx.AsyncClient``.

Rules:
- A client the caller gave is shared and stays open: its owner closes it.
- Otherwise each stream opens a client of its own, closed with the stream.
- The wording of a failed exchange (:func:`transport_message`) is shared by the providers;
  only the environment variable named in its hint differs.
- For an https:// endpoint the CA bundle is loaded once per provider, in a worker thread
  (loading it blocks for a while), and reused by every later client.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import final

import httpx
import trio

from ._retry import gave_up

__all__ = ["ClientSource", "retryable_transport", "transport_message"]


@final
class ClientSource:
    """The clients of one provider; see the module rules."""

    __slots__ = ("_base_url", "_shared", "_ssl_context")

    def __init__(self, base_url: str, shared: httpx.AsyncClient | None) -> None:
        self._base_url = base_url
        self._shared = shared
        self._ssl_context: ssl.SSLContext | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[httpx.AsyncClient]:
        """A client for one stream."""
        if self._shared is not None:
            yield self._shared
            return
        verify: ssl.SSLContext | bool = True
        if self._base_url.startswith("https:"):
            if self._ssl_context is None:
                self._ssl_context = await trio.to_thread.run_sync(httpx.create_ssl_context)
            verify = self._ssl_context
        async with httpx.AsyncClient(verify=verify) as client:
            yield client


def retryable_transport(exc: httpx.RequestError) -> bool:
    """Whether a request that failed with ``exc`` (before any output) may be sent again."""
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.UnsupportedProtocol)


def transport_message(
    exc: httpx.RequestError,
    *,
    url: str,
    timeout: float | None,
    yielded: bool,
    attempt: int,
    endpoint_variable: str,
) -> str:
    """The one line of a provider's :class:`ModelError` for a failed HTTP exchange.

    Args:
        yielded: whether the stream had produced output (then it is never retried).
        attempt: the number of retries made so far.
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
        return gave_up(f"{url} did not answer{within} ({type(exc).__name__})", attempt)
    if yielded:
        return f"the connection to {url} was lost mid-stream ({detail}); try again"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return gave_up(f"the connection to {url} failed: {detail}", attempt)
    return gave_up(
        f"cannot reach {url}: {detail}; is the server running? "
        f"(set {endpoint_variable} or base_url= to change the endpoint)",
        attempt,
    )
