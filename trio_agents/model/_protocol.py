"""The one interface every model provider implements.

Rules:
- ``context_window`` is the most tokens one request (conversation, tools and answer) may
  hold, as the provider counts them; ``None`` means unknown, and an agent then never compacts
  on its own. Every built-in model takes it as a constructor keyword and a spec parameter
  (``?context_window=TOKENS``), checked by :func:`check_context_window`.
- A model may have a ``preflight()`` method, called by :func:`preflight` before anything is
  stored for it (an agent created or resumed, a command started): it raises
  :class:`ModelError` when the model cannot answer as configured (a missing API key). It
  sends nothing and does not block. The HTTP providers check their key there.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, runtime_checkable

from ._messages import ModelRequest
from ._stream import ModelEvent


@runtime_checkable
class Model(Protocol):
    """A language model, seen as a stream of events per request.

    ``stream`` is an async generator: the consumer iterates it inside
    ``contextlib.aclosing(model.stream(request))`` so that an abandoned stream is closed in the
    consumer's task. Every ``__anext__`` is a checkpoint, cancellation works at each of them,
    and the stream ends with one :class:`Finished` (or raises :class:`ModelError`).
    """

    name: str
    #: The most tokens one request may hold, or ``None`` when unknown.
    context_window: int | None

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Stream the model's answer to ``request``."""
        ...


def preflight(model: Model) -> None:
    """Check what ``model`` needs before anything is stored for it (see the module rules).

    Raises:
        ModelError: the model cannot answer as configured; the one-line message says what
            to do (``OPENAI_API_KEY is not set; export it or pass api_key=``).
    """
    check = getattr(model, "preflight", None)
    if check is not None:
        check()


def check_context_window(value: int | None) -> int | None:
    """``value`` if it is ``None`` or a whole number of tokens >= 1.

    Raises:
        ValueError: anything else (``0``, a negative number, a float, a bool).
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            f"context_window is a number of tokens >= 1, or None when unknown; got {value!r}"
        )
    return value
