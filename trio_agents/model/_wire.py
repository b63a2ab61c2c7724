"""What the providers' sans-IO wire formats share: reading a field of a stream event, and the
end of an answer.

Rules:
- A field that carries the answer (text, a tool call's id, name or arguments, the finish
  reason, and the objects and arrays that hold them) is read with :func:`field`: absent or
  ``null`` is ``None``; present with another JSON type is a :class:`ModelError` naming the
  field, since dropping it would silently lose or change the answer.
- Metadata (token counts, other choices) stays lenient: a malformed value there is ignored.
- An answer ends with its assembled tool calls, then one ``Finished`` (:func:`finished`); a
  body that ends before the model finished is a lost connection (:func:`lost_mid_stream`).
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from ._errors import ModelError
from ._stream import Finished, FinishReason, ModelEvent, ToolCallRequested, Usage

__all__ = ["checked", "clip", "field", "finished", "lost_mid_stream"]

T = TypeVar("T")

_SHOWN = 300  # characters of a server's text kept in a message
_KINDS: dict[type, str] = {
    str: "a string",
    int: "a whole number",
    list: "an array",
    dict: "an object",
}


def clip(text: str) -> str:
    """``text``, cut to a length that fits in a one-line message."""
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def field(where: str, container: dict[str, Any], key: str, kind: type[T], path: str) -> T | None:
    """``container[key]`` if it is a ``kind``, ``None`` if absent or null.

    Raises:
        ModelError: the value has another JSON type; the message names ``path``.
    """
    return checked(where, container.get(key), kind, path)


def checked(where: str, value: Any, kind: type[T], path: str) -> T | None:
    """``value`` if it is a ``kind``, ``None`` if null; see :func:`field`."""
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise ModelError(
        f"{where} sent a malformed stream event: {path} is {clip(json.dumps(value))}, "
        f"not {_KINDS[kind]}"
    )


def lost_mid_stream(where: str) -> ModelError:
    """The error of a body that ended before the model finished."""
    return ModelError(
        f"the connection to {where} was lost mid-stream "
        "(the answer ended before the model finished); try again"
    )


def finished(
    calls: list[ToolCallRequested], reason: FinishReason, usage: Usage
) -> list[ModelEvent]:
    """The last events of an answer: its tool calls, then ``Finished``.

    Some servers say "stop" after tool calls: the reason is then ``TOOL_CALLS``.
    """
    if calls and reason is FinishReason.STOP:
        reason = FinishReason.TOOL_CALLS
    return [*calls, Finished(reason, usage)]
