"""``ScriptedModel``: a deterministic model that plays a script, or echoes (the default).

Rules:
- Each ``stream()`` consumes the next reply when its iteration starts; a reply is a sequence of
  steps played in order. Every event is preceded by a checkpoint, so a consumer can be
  cancelled at each ``__anext__``; ``Wait`` and ``Say(delay=...)`` sleep in trio time.
- The stream ends with ``Finished(tool_calls)`` if the reply called a tool, else
  ``Finished(stop)``. ``Fail`` raises :class:`ModelError` instead.
- Usage counts whitespace-separated words: of every message in, of the text said out. The
  count of the messages in is kept per conversation (by the identity of its first message)
  for the few conversations seen last: a request that extends the one before it is counted
  from where that one ended, so a request's cost does not grow with its history; any
  message that is not the one (or equal to the one) counted before is counted afresh.
- Every request a ``stream()`` starts on is kept, in order, in ``requests`` (what a test checks
  the model was sent: the messages and the tool specs), also when the script has run out: the
  latest 1,000 of them, so that a long-lived agent on the embedded default
  (``echo``, which never runs out) does not grow by a request per turn.
- The scripted models see no images: the echo reads a placeholder line for each image of a
  user message or a tool output (:func:`~._messages.text_with_images`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, TypeAlias, final

import attrs
import trio

from ._errors import ModelError
from ._messages import (
    AssistantText,
    ChatMessage,
    ModelRequest,
    ToolOutput,
    UserText,
    text_with_images,
)
from ._protocol import check_context_window
from ._stream import (
    Finished,
    FinishReason,
    ModelEvent,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    Usage,
)

# How many of its latest requests a ScriptedModel keeps in `requests`.
_KEPT_REQUESTS = 1_000


def _copy(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return dict(mapping)


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value >= 0:  # also refuses NaN
        raise ValueError(f"{attribute.name} must be a number of seconds >= 0; got {value!r}")


@attrs.frozen
class Say:
    """Stream ``text`` word by word, waiting ``delay`` seconds of trio time before each word."""

    text: str
    delay: float = attrs.field(default=0.0, validator=_non_negative)


@attrs.frozen
class Think:
    """Stream ``text`` as the model's reasoning (:class:`ThoughtDelta`), word by word."""

    text: str


@attrs.frozen
class CallTool:
    """Request the tool ``name``; ``call_id=None`` gets the model's next ``call-N``."""

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict, converter=_copy, hash=False)
    call_id: str | None = None


@attrs.frozen
class Wait:
    """Sleep ``seconds`` of trio time (so a test can cancel mid-turn)."""

    seconds: float = attrs.field(validator=_non_negative)


@attrs.frozen
class Fail:
    """Raise :class:`ModelError` with ``message``."""

    message: str


Step: TypeAlias = Say | Think | CallTool | Wait | Fail
#: A reply: its steps, or a plain string as shorthand for ``(Say(text),)``.
Reply: TypeAlias = str | Sequence[Step]

_STEP_TYPES = (Say, Think, CallTool, Wait, Fail)
_WORDS = re.compile(r"\S+\s*|\s+")
_BASH = re.compile(r"\s*!(?P<how>bash|bg)\s+(?P<command>\S.*?)\s*", re.DOTALL)
# ``!tool NAME`` with optional JSON arguments after it (the rest of the message).
_TOOL = re.compile(r"\s*!tool\s+(?P<name>[^\s{]+)\s*(?P<arguments>.*?)\s*", re.DOTALL)


def split_words(text: str) -> list[str]:
    """Split ``text`` into chunks of one word with its trailing whitespace.

    Leading whitespace is a chunk of its own, so ``"".join(split_words(t)) == t``.
    """
    return _WORDS.findall(text)


def _count_words(text: str) -> int:
    return len(text.split())


def _message_words(message: ChatMessage) -> int:
    return _count_words(message.content)


#: How many conversations a model keeps the counts of (the ones it served last).
_COUNTED_CONVERSATIONS = 64


@final
class _InputWords:
    """The words of a request's messages, counted once per message of a growing conversation.

    Invariant: for each conversation, ``sums[i]`` is the number of words of ``messages[:i]``,
    so ``len(sums) == len(messages) + 1``.
    """

    __slots__ = ("_conversations",)

    def __init__(self) -> None:
        self._conversations: OrderedDict[int, tuple[list[ChatMessage], list[int]]] = OrderedDict()

    def count(self, messages: Sequence[ChatMessage]) -> int:
        current = list(messages)
        if not current:
            return 0
        key = id(current[0])
        known = self._conversations.pop(key, None)
        if known is None or known[0][0] is not current[0]:
            seen: list[ChatMessage] = []
            sums = [0]
        else:
            seen, sums = known
        common = len(seen)
        # List equality tests identity first, so a conversation that only grew costs one
        # pass in C; otherwise the common prefix is found message by message.
        if len(current) < common or current[:common] != seen:
            common = 0
            for new, old in zip(current, seen, strict=False):
                if new is not old and new != old:
                    break
                common += 1
            del sums[common + 1 :]
        total = sums[-1]
        for message in current[common:]:
            total += _message_words(message)
            sums.append(total)
        self._conversations[key] = (current, sums)
        if len(self._conversations) > _COUNTED_CONVERSATIONS:
            self._conversations.popitem(last=False)
        return total


def _normalize(reply: object, index: int) -> tuple[Step, ...]:
    if isinstance(reply, str):
        return (Say(reply),)
    if isinstance(reply, _STEP_TYPES) or not isinstance(reply, Sequence):
        raise TypeError(
            f"reply {index} of a ScriptedModel must be a string or a sequence of steps "
            f"(Say, CallTool, Wait, Fail); got {type(reply).__name__} {reply!r}"
        )
    for step in reply:
        if not isinstance(step, _STEP_TYPES):
            raise TypeError(
                f"reply {index} of a ScriptedModel has a step that is not Say, CallTool, "
                f"Wait or Fail: {type(step).__name__} {step!r}"
            )
    return tuple(reply)


Responder: TypeAlias = Callable[[ModelRequest], Sequence[Step]]


@final
class ScriptedModel:
    """A deterministic model: plays ``replies`` in order, one per ``stream()`` call.

    Args:
        replies: the script; each reply is a string or a sequence of steps.
        name: the model's name (``model.name``).
        context_window: the window it declares, in tokens (``None``: unknown).

    Raises:
        TypeError: a reply or a step has the wrong type.
        ValueError: ``context_window`` is not a whole number >= 1.
    """

    __slots__ = (
        "_call_ids",
        "_input_words",
        "_replies",
        "_requests",
        "_respond",
        "_served",
        "context_window",
        "name",
    )

    def __init__(
        self,
        replies: Sequence[Reply],
        *,
        name: str = "scripted",
        context_window: int | None = None,
    ) -> None:
        self.name = name
        self.context_window = check_context_window(context_window)
        self._replies = tuple(_normalize(r, i) for i, r in enumerate(replies))
        self._respond: Responder | None = None
        self._served = 0
        self._requests: deque[ModelRequest] = deque(maxlen=_KEPT_REQUESTS)
        self._call_ids = itertools.count(1)
        self._input_words = _InputWords()

    @classmethod
    def echo(cls, delay: float = 0.0, *, context_window: int | None = None) -> ScriptedModel:
        """The embedded default model, answering the request:

        - if the latest messages are tool outputs, it reports them
          (``bash `CMD` exited: OUTPUT``, the output verbatim);
        - if the latest user message is ``!bash COMMAND``, it calls the ``bash`` tool with
          ``{"command": COMMAND}``, and for ``!bg COMMAND`` with
          ``{"command": COMMAND, "run_in_background": True}``; it finishes with
          ``tool_calls``;
        - if it is ``!tool NAME {JSON}``, it calls the tool ``NAME`` with that JSON object
          (``!tool NAME`` alone: ``{}``); arguments that are not a JSON object are answered
          with one line saying so, and no call;
        - otherwise it streams the latest user message back, word by word.

        ``delay`` seconds of trio time pass before each word it says, and before a tool call,
        so a chat on ``echo?delay=0.2`` streams visibly.

        ``context_window`` is the window it declares (``None``: unknown), so that a test or a
        benchmark can drive an agent into compaction.

        Raises:
            ValueError: ``delay`` is negative or not a number, or ``context_window`` is not a
                whole number >= 1.
        """
        Wait(delay)  # validates delay now, not at the first request
        model = cls((), name="echo", context_window=context_window)
        model._respond = lambda request: _echo_steps(request.messages, delay)
        return model

    @property
    def replies_left(self) -> int | None:
        """How many scripted replies are still to be played (``None`` for ``echo``)."""
        if self._respond is not None:
            return None
        return len(self._replies) - self._served

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """The latest 1,000 requests a ``stream()`` started on, oldest first
        (a snapshot)."""
        return tuple(self._requests)

    def _next_steps(self, request: ModelRequest) -> Sequence[Step]:
        self._requests.append(request)
        if self._respond is not None:
            return self._respond(request)
        if self._served >= len(self._replies):
            raise ModelError(
                f"the script of ScriptedModel {self.name!r} has no reply left "
                f"(it had {len(self._replies)})"
            )
        steps = self._replies[self._served]
        self._served += 1
        return steps

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Play the next reply as events. See the module rules."""
        await trio.lowlevel.checkpoint()
        steps = self._next_steps(request)
        called = False
        words_out = 0
        for step in steps:
            if isinstance(step, Say):
                for chunk in split_words(step.text):
                    if step.delay:
                        await trio.sleep(step.delay)
                    else:
                        await trio.lowlevel.checkpoint()
                    words_out += _count_words(chunk)
                    yield TextDelta(chunk)
            elif isinstance(step, Think):
                for chunk in split_words(step.text):
                    await trio.lowlevel.checkpoint()
                    yield ThoughtDelta(chunk)
            elif isinstance(step, CallTool):
                await trio.lowlevel.checkpoint()
                called = True
                call_id = step.call_id or f"call-{next(self._call_ids)}"
                yield ToolCallRequested(call_id, step.name, step.arguments)
            elif isinstance(step, Wait):
                await trio.sleep(step.seconds)
            else:
                raise ModelError(step.message)
        await trio.lowlevel.checkpoint()
        usage = Usage(
            input_tokens=self._input_words.count(request.messages),
            output_tokens=words_out,
        )
        yield Finished(FinishReason.TOOL_CALLS if called else FinishReason.STOP, usage)

    def __repr__(self) -> str:
        return f"<ScriptedModel {self.name!r}>"


def _echo_steps(messages: Sequence[ChatMessage], delay: float) -> tuple[Step, ...]:
    outputs: list[ToolOutput] = []
    for message in reversed(messages):
        if not isinstance(message, ToolOutput):
            break
        outputs.append(message)
    if outputs:
        outputs.reverse()
        return (Say("\n".join(_report(o, messages) for o in outputs), delay),)
    latest = next((m for m in reversed(messages) if isinstance(m, UserText)), None)
    if latest is None:
        return ()
    match = _BASH.fullmatch(latest.content)
    if match is not None:
        arguments: dict[str, Any] = {"command": match["command"]}
        if match["how"] == "bg":
            arguments["run_in_background"] = True
        return (Wait(delay), CallTool("bash", arguments))
    match = _TOOL.fullmatch(latest.content)
    if match is not None:
        return _tool_steps(match["name"], match["arguments"], delay)
    # A model that sees no images: it is told each one was there (text_with_images).
    return (Say(text_with_images(latest), delay),)


def _tool_steps(name: str, text: str, delay: float) -> tuple[Step, ...]:
    """``!tool NAME {JSON}``: the call, or one line saying why the arguments are unusable."""
    try:
        arguments = json.loads(text) if text else {}
    except ValueError as exc:
        return (Say(f"!tool {name}: the arguments are not JSON ({exc})", delay),)
    if not isinstance(arguments, dict):
        return (Say(f"!tool {name}: the arguments must be a JSON object; got {text}", delay),)
    return (Wait(delay), CallTool(name, arguments))


def _report(output: ToolOutput, messages: Sequence[ChatMessage]) -> str:
    # The latest call with the output's id (a model may reuse ids across turns).
    arguments: Mapping[str, Any] = next(
        (
            call.arguments
            for message in reversed(messages)
            if isinstance(message, AssistantText)
            for call in reversed(message.tool_calls)
            if call.call_id == output.call_id
        ),
        {},
    )
    command = arguments.get("command")
    what = f"bash `{command}`" if output.name == "bash" and command else f"tool {output.name}"
    verb = "failed" if output.is_error else ("exited" if output.name == "bash" else "returned")
    return f"{what} {verb}: {text_with_images(output)}"
