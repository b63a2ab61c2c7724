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
- One answer is at most ``max_answer`` characters of text, reasoning and tool-call arguments
  together (:class:`AnswerBudget`): an assembler charges every piece before it keeps or
  yields it, so past the bound the answer is cut with a :class:`ModelError` and nothing
  beyond the bound was ever held, shown or stored. Invariant: the text yielded before the
  cut is at most ``max_answer`` characters.
- Every JSON a server sends is read with :func:`loads`: a lone surrogate escape
  (``"\\ud800"`` without its pair) is not Unicode text (it can be neither shown nor stored),
  so it is read as U+FFFD, the replacement character, as the event-stream decoder reads bytes
  that are not UTF-8. Strings and object keys at any depth are mended.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar, final

from ._errors import ModelError
from ._stream import Finished, FinishReason, ModelEvent, ToolCallRequested, Usage

__all__ = [
    "DEFAULT_MAX_ANSWER",
    "AnswerBudget",
    "checked",
    "clip",
    "field",
    "finished",
    "loads",
    "lost_mid_stream",
]

#: The default bound of one answer (text, reasoning and tool-call arguments), in characters.
DEFAULT_MAX_ANSWER = 4 << 20

T = TypeVar("T")

_SHOWN = 300  # characters of a server's text kept in a message
_KINDS: dict[type, str] = {
    str: "a string",
    int: "a whole number",
    list: "an array",
    dict: "an object",
}


# What a lone surrogate escape may look like in JSON text (a pair matches too: it is rare, and
# the walk below only costs time): the cheap test before any walk.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# After json.loads a pair is one character, so any surrogate left is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def loads(text: str) -> Any:
    """``json.loads(text)``, with every lone surrogate read as U+FFFD (see the module rules).

    Raises:
        ValueError: ``text`` is not JSON.
    """
    value = json.loads(text)
    if _SURROGATE_ESCAPE.search(text) is None:
        return value
    return _mend(value)


def _mend(value: Any) -> Any:
    """``value`` with lone surrogates replaced; iterative, as JSON may nest deeply."""
    root: list[Any] = [value]
    todo: list[tuple[list[Any] | dict[Any, Any], Any]] = [(root, 0)]
    while todo:
        container, key = todo.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = _SURROGATE.sub("\ufffd", item)
        elif isinstance(item, list):
            todo.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            mended = {_SURROGATE.sub("\ufffd", k): v for k, v in item.items()}
            container[key] = mended
            todo.extend((mended, k) for k in mended)
    return root[0]


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


@final
class AnswerBudget:
    """What is left of one answer's ``max_answer`` characters; see the module rules.

    Args:
        where: the endpoint, named in the error.
        limit: the most characters of text, reasoning and tool-call arguments together.
    """

    __slots__ = ("_left", "_limit", "_where")

    def __init__(self, where: str, limit: int) -> None:
        self._where = where
        self._limit = limit
        self._left = limit

    def charge(self, piece: str) -> None:
        """Count ``piece`` against the bound, before it is kept or yielded.

        Raises:
            ModelError: the answer would pass the bound; the message names it and how to
                raise it.
        """
        self._left -= len(piece)
        if self._left < 0:
            raise ModelError(
                f"{self._where} sent an answer longer than {self._limit} characters (text, "
                "reasoning and tool-call arguments together), so the turn ended there; if "
                "answers are really this large, raise max_answer= (?max_answer=N in the "
                "model spec)"
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
