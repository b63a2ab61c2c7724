"""What the providers' sans-IO wire formats share: reading a field of a stream event, and the
end of an answer.

Rules:
- A field that carries the answer (text, a tool call's id, name or arguments, the finish
  reason, and the objects and arrays that hold them) is read with :func:`field`: absent or
  ``null`` is ``None``; present with another JSON type is a :class:`ModelError` naming the
  field, since dropping it would silently lose or change the answer.
- Metadata (token counts, other choices) stays lenient: a malformed value there is ignored.
- An answer ends with its assembled tool calls, then one ``Finished`` (:func:`finished`); a
  body that ends before the model finished (no end event, no stop reason) is a lost
  connection (:func:`lost_mid_stream`). :class:`StreamAssembler` keeps that end, the tool
  calls being assembled and the answer's budget for both providers' assemblers.
- A stream event is a JSON object (:func:`event_object`); anything else is a
  :class:`ModelError`.
- A tool call is assembled from pieces of its arguments' JSON (or the object it started
  with, when no piece came): no name, or arguments that are not a JSON object, is a
  :class:`ModelError` (a tool cannot run on arguments nobody can read); no arguments at all
  mean ``{}``; a call without an id gets ``<prefix>-<n>``, ``n`` counting from 1.
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

import abc
import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar, final

import attrs

from ._errors import ModelError
from ._stream import Finished, FinishReason, ModelEvent, ToolCallRequested, Usage

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


def event_object(where: str, data: str) -> dict[str, Any]:
    """The JSON object a stream event's ``data`` holds.

    Raises:
        ModelError: the data is not JSON, or not an object.
    """
    try:
        event = loads(data)
    except ValueError:
        raise ModelError(f"{where} sent a stream event that is not JSON: {clip(data)!r}") from None
    if not isinstance(event, dict):
        raise ModelError(f"{where} sent a stream event that is not an object")
    return event


@attrs.define
class PartialCall:
    """A tool call being assembled: its id and name, the arguments object it started with
    (if any), and the pieces of its arguments' JSON so far."""

    call_id: str | None = None
    name: str = ""
    start: Any = None
    pieces: list[str] = attrs.Factory(list)


class StreamAssembler(abc.ABC):
    """What both providers' assemblers keep: the endpoint, the answer's budget, the tool
    calls by index, the stop reason, whether the stream said it is done; and the end of the
    answer (see the module rules). A subclass reads its own events (``feed``) and counts
    its usage (``usage``).

    Args:
        where: the endpoint, named in error messages.
        max_answer: the most characters of one answer (see the module rules).
    """

    __slots__ = ("_budget", "_calls", "_done", "_stop", "_where")

    #: The finish reason of each stop reason the API sends.
    STOPS: ClassVar[Mapping[str, FinishReason]]
    #: The id prefix of a tool call the server sent without an id.
    CALL_PREFIX: ClassVar[str]
    #: A tool call's arguments as messages name them, with the verb: the API's own word
    #: (``"arguments that are"``, ``"input that is"``).
    ARGUMENTS: ClassVar[str]

    def __init__(self, where: str, max_answer: int = DEFAULT_MAX_ANSWER) -> None:
        self._where = where
        self._budget = AnswerBudget(where, max_answer)
        self._calls: dict[int, PartialCall] = {}
        self._stop: str | None = None
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the stream's end event arrived (nothing after it matters)."""
        return self._done

    @abc.abstractmethod
    def feed(self, data: str) -> list[ModelEvent]:
        """Take one event's data; return the events ready to yield."""

    @abc.abstractmethod
    def usage(self) -> Usage:
        """The token counts so far."""

    def end(self) -> list[ModelEvent]:
        """The body ended: the assembled tool calls, then ``Finished``.

        Raises:
            ModelError: the stream stopped before the model finished, or a tool call is
                unusable (no name, arguments that are not a JSON object).
        """
        if not self._done and self._stop is None:
            raise lost_mid_stream(self._where)
        calls = [self._requested(n, self._calls[i]) for n, i in enumerate(sorted(self._calls), 1)]
        return finished(calls, self.STOPS.get(self._stop or "", FinishReason.STOP), self.usage())

    def _requested(self, number: int, call: PartialCall) -> ToolCallRequested:
        if not call.name:
            raise ModelError(f"{self._where} sent a tool call without a tool name")
        raw = "".join(call.pieces)
        if raw.strip():
            try:
                arguments = loads(raw)
            except ValueError:
                arguments = None
        else:
            arguments = call.start if call.start is not None else {}
        if not isinstance(arguments, dict):
            shown = raw or json.dumps(call.start)
            raise ModelError(
                f"the model called tool {call.name!r} with {self.ARGUMENTS} not a JSON "
                f"object: {clip(shown)!r}"
            )
        return ToolCallRequested(
            call.call_id or f"{self.CALL_PREFIX}-{number}", call.name, arguments
        )
