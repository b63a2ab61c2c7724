"""A read stream that says when it ended: how the connection notices a server going away.

The SDK's session ends its reading quietly at end of stream (pending requests fail, nothing
else is told), so the plugin wraps the transport's read stream and is called back once when
it ends or closes.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Generic, TypeVar, final

import anyio
from mcp.shared._stream_protocols import ReadStream

T = TypeVar("T")


@final
class Watched(Generic[T]):
    """``inner``, calling ``on_end()`` once when it reaches its end or is closed, and
    ``on_item(item)`` with each item it passes on."""

    def __init__(
        self,
        inner: ReadStream[T],
        on_end: Callable[[], None],
        on_item: Callable[[T], None] | None = None,
    ) -> None:
        self._inner = inner
        self._on_end: Callable[[], None] | None = on_end
        self._on_item = on_item

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    async def receive(self) -> T:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise
        if self._on_item is not None:
            self._on_item(item)
        return item

    def __aiter__(self) -> Watched[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Watched[T]:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)

    def __getattr__(self, name: str) -> Any:
        # The dispatcher reads the sender's context (``last_context``) where a stream has one.
        return getattr(self._inner, name)
