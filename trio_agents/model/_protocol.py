"""The one interface every model provider implements."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, runtime_checkable

from ._messages import ModelRequest
from ._stream import ModelEvent

__all__ = ["Model"]


@runtime_checkable
class Model(Protocol):
    """A language model, seen as a stream of events per request.

    ``stream`` is an async generator: the consumer iterates it inside
    ``contextlib.aclosing(model.stream(request))`` so that an abandoned stream is closed in the
    consumer's task. Every ``__anext__`` is a checkpoint, cancellation works at each of them,
    and the stream ends with one :class:`Finished` (or raises :class:`ModelError`).
    """

    name: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Stream the model's answer to ``request``."""
        ...
