"""Where an HTTP provider's streams get their ``httpx.AsyncClient``.

Rules:
- A client the caller gave is shared and stays open: its owner closes it.
- Otherwise each stream opens a client of its own, closed with the stream.
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

__all__ = ["ClientSource"]


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
