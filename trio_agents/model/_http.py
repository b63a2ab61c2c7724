"""The HTTP side of a provider's stream: where its ``httpx.AsyncClient`` comes from, and how a
response body is read within bounds.

Rules:
- A client the caller gave is shared and stays open: its owner closes it.
- Otherwise each stream opens a client of its own, closed with the stream.
- For an https:// endpoint the CA bundle is loaded once per provider, in a worker thread
  (loading it blocks for a while), and reused by every later client.
- An error body is read up to ``ERROR_BODY_LIMIT`` bytes and no further (:func:`read_limited`):
  a server that answers 500 with an endless body costs one bounded read, not all memory.
- A body iterator left early is finished (:func:`finish_body`), so no generator of httpx
  stays suspended.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import final

import httpx
import trio

#: The most bytes of an error response's body that are read (64 KiB).
ERROR_BODY_LIMIT = 64 * 1024


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


async def read_limited(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of the body of ``response``, and whether there was more.

    Invariant: at most ``limit`` bytes plus one chunk of the network are held; the rest of
    the body is never read (the caller closes the response, and with it the connection).
    """
    chunks = response.aiter_bytes()
    parts: list[bytes] = []
    size = 0
    try:
        async for data in chunks:
            parts.append(data)
            size += len(data)
            if size > limit:
                break
    finally:
        await finish_body(chunks)
    return b"".join(parts)[:limit], size > limit


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
