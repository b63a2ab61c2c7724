"""Compaction: keeping a long conversation inside the model's context window.

Design:
- The policy is the service ``compaction`` (a :class:`Compactor`), provided by the
  :class:`CompactionPlugin` that ``open_runtime`` applies (``open_runtime(compactor=...)``
  replaces it). The agent looks it up at each use, so a replacement applies to live agents;
  without the service the default :class:`SummarizingCompactor` is used.
- Before every model request the turn asks the policy whether a compaction is ``due`` for
  the metered size of that request (default: over 80 % of a known window). If so, the
  compaction runs in the turn, inside its cancel scope, before the request is built.
- A compaction is: the policy reads the conversation as it stands (a
  :class:`CompactionRequest`) and answers a :class:`Compaction` (a summary, and the ``seq`` of
  the first turn kept), or ``None`` (nothing to compact). Then, with no checkpoint in between,
  the agent appends a ``Compacted`` record, and its history folds it (see ``_history``).
- So a cancel or a failure anywhere inside the policy leaves the history as it was: the
  record is the one and only change, and it is written only after the policy answered. A
  failing policy is a :class:`CompactionError`: the turn ends in ``error`` with its message,
  and the agent takes the next prompt as usual.
- The default policy keeps the last ``keep_turns`` turns (fewer when they alone would fill
  half of the threshold; the turn being run is always kept) and asks a model (the agent's
  own, or the one it was given) for a summary of the older messages, previous summary
  included. The
  older messages are sent as a transcript in the system text, so any provider accepts the
  request whatever tool calls it holds; the transcript is clipped, oldest part first, to fit
  the summarizer's own window.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Protocol, final, runtime_checkable

import attrs

from .. import tracing
from .._errors import TrioAgentsError
from ..cancel import CancelCause
from ..kernel import Context
from ..model import (
    AssistantText,
    ChatMessage,
    Finished,
    Model,
    ModelError,
    ModelRequest,
    SystemText,
    TextDelta,
    ToolOutput,
    UserText,
    model_from_spec,
)
from ..session import Compacted
from ._history import TurnMark, message_chars
from ._keys import COMPACTION
from ._meter import CHARS_PER_TOKEN, ContextUsage, estimate

if TYPE_CHECKING:
    from ._parts import AgentParts

__all__ = [
    "Compaction",
    "CompactionError",
    "CompactionPlugin",
    "CompactionRequest",
    "Compactor",
    "SummarizingCompactor",
    "compact_history",
    "fit_window",
]


class CompactionError(TrioAgentsError, RuntimeError):
    """A compaction did not happen; the history is unchanged.

    Attributes:
        cause: the typed cause when it was cancelled, else ``None``.
    """

    def __init__(self, message: str, cause: CancelCause | None = None) -> None:
        super().__init__(message)
        self.cause = cause


@attrs.frozen
class CompactionRequest:
    """What a :class:`Compactor` is shown: the conversation as the model would see it now.

    Attributes:
        agent_id: the agent whose history it is.
        model: the agent's model (a summarizer may use it).
        messages: the conversation of the next request.
        system: how many leading messages are the agent's own system text (0 or 1); they are
            kept whatever is compacted.
        turns: where each turn in ``messages`` begins; a :class:`Compaction` keeps the
            messages from one of these on.
        context: the metered size of the next request.
        turn_id: the turn that needs the compaction, or ``None`` when it was asked for on
            demand. That turn (the last of ``turns``) holds the prompt being answered.
    """

    agent_id: str
    model: Model
    messages: Sequence[ChatMessage]
    system: int
    turns: tuple[TurnMark, ...]
    context: ContextUsage
    turn_id: str | None = None


@attrs.frozen
class Compaction:
    """A policy's answer: what replaces the messages before the turn at ``kept_from_seq``.

    Attributes:
        summary: the text the model sees instead of them (``""``: they are dropped).
        kept_from_seq: the ``seq`` of the first turn kept (a :class:`TurnMark` ``seq``).
    """

    summary: str
    kept_from_seq: int


@runtime_checkable
class Compactor(Protocol):
    """The compaction policy: the service ``compaction``."""

    def due(self, context: ContextUsage) -> bool:
        """Whether the next request, of this size, needs a compaction first (cheap, sync)."""
        ...

    async def compact(self, request: CompactionRequest) -> Compaction | None:
        """What to replace, or ``None`` if there is nothing to compact.

        Raises:
            CompactionError: it failed (the turn ends in ``error`` with this message).
        """
        ...


_SUMMARIZER = (
    "You summarize a conversation between a user and an AI agent so that the agent can go on "
    "with the summary in place of the conversation. Keep what the agent needs: the user's "
    "goals and requests, decisions made, facts and results learned (file names, commands, "
    "values, errors), and what is still to do. Write plain prose, no preamble."
)


def _check_share(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not 0 < value <= 1:
        raise ValueError(f"{attribute.name} is a share of the window in (0, 1]; got {value!r}")


def _check_count(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} is a whole number >= 1; got {value!r}")


def _model(value: Model | str | None) -> Model | None:
    return model_from_spec(value) if isinstance(value, str) else value


@final
@attrs.frozen
class SummarizingCompactor:
    """The default policy: summarize all but the last turns.

    Args:
        threshold: compact when the next request would exceed this share of the window.
        keep_turns: how many of the latest turns are kept as they are, the one being run
            included (fewer when they alone would fill half the threshold).
        model: the summarizer (a model or a spec); ``None``: the agent's own model.
        summary_words: the length asked of the summary, in words.

    Raises:
        ValueError: ``threshold`` is not in (0, 1], or a count is below 1.
        ModelSpecError: ``model`` is a bad spec.
    """

    threshold: float = attrs.field(default=0.8, validator=_check_share)
    keep_turns: int = attrs.field(default=3, validator=_check_count)
    model: Model | None = attrs.field(default=None, converter=_model)
    summary_words: int = attrs.field(default=200, validator=_check_count)

    def due(self, context: ContextUsage) -> bool:
        """Whether ``context`` is over ``threshold`` of a known window."""
        return context.window is not None and context.tokens > self.threshold * context.window

    async def compact(self, request: CompactionRequest) -> Compaction | None:
        """Summarize the messages before the kept turns with the summarizer model."""
        turns = request.turns
        if not turns:
            return None
        first = max(len(turns) - self.keep_turns, 0)
        window = request.context.window
        if window is not None:
            # Keep fewer turns when the kept ones alone would need a compaction again.
            budget = self.threshold * window / 2
            while first < len(turns) - 1 and _tokens(request.messages[turns[first].index :]) > (
                budget
            ):
                first += 1
        older = request.messages[request.system : turns[first].index]
        if not older:
            return None
        model = self.model if self.model is not None else request.model
        summary = await self._summarize(model, older)
        return Compaction(summary=summary, kept_from_seq=turns[first].seq)

    async def _summarize(self, model: Model, older: Sequence[ChatMessage]) -> str:
        transcript = _clip(_transcript(older), getattr(model, "context_window", None))
        ask = ModelRequest(
            messages=(
                SystemText(f"{_SUMMARIZER}\n\nThe conversation:\n\n{transcript}"),
                UserText(
                    f"Summarize the conversation above in at most {self.summary_words} words."
                ),
            )
        )
        text: list[str] = []
        try:
            async with aclosing(model.stream(ask)) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        text.append(event.text)
                    elif isinstance(event, Finished):
                        break
        except ModelError as exc:
            raise CompactionError(
                f"compaction failed: the summarizer model {model.name!r} failed: {exc}; "
                f"the history is unchanged"
            ) from exc
        summary = "".join(text).strip()
        if not summary:
            raise CompactionError(
                f"compaction failed: the summarizer model {model.name!r} returned no text; "
                f"the history is unchanged"
            )
        return summary


def _tokens(messages: Sequence[ChatMessage]) -> int:
    return estimate(sum(message_chars(m) for m in messages), len(messages))


def _transcript(messages: Sequence[ChatMessage]) -> str:
    lines: list[str] = []
    for message in messages:
        if isinstance(message, SystemText):
            lines.append(f"[earlier summary] {message.content}")
        elif isinstance(message, UserText):
            lines.append(f"[user] {message.content}")
        elif isinstance(message, AssistantText):
            if message.content:
                lines.append(f"[agent] {message.content}")
            for call in message.tool_calls:
                arguments = json.dumps(dict(call.arguments), default=str)
                lines.append(f"[agent calls {call.name}] {arguments}")
        elif isinstance(message, ToolOutput):
            failed = " (failed)" if message.is_error else ""
            lines.append(f"[{message.name} result{failed}] {message.content}")
    return "\n".join(lines)


def _clip(transcript: str, window: int | None) -> str:
    """``transcript``, its oldest part cut off to fit half of ``window``."""
    if window is None:
        return transcript
    room = window // 2 * CHARS_PER_TOKEN
    if len(transcript) <= room:
        return transcript
    return "[the oldest part is cut off]\n" + transcript[len(transcript) - room :]


@final
class CompactionPlugin:
    """Provides the service ``compaction``: ``compactor``, else a :class:`SummarizingCompactor`.

    ``open_runtime`` applies it; an application gives its own policy as
    ``open_runtime(compactor=MyCompactor())``.
    """

    name = "compaction"

    def __init__(self, compactor: Compactor | None = None) -> None:
        if compactor is not None and not isinstance(compactor, Compactor):
            raise TypeError(
                f"a compactor has due(context) and async compact(request); "
                f"got {type(compactor).__name__}"
            )
        self.compactor: Compactor = compactor if compactor is not None else SummarizingCompactor()

    async def apply(self, ctx: Context, config: None) -> None:
        ctx.provide(COMPACTION, self.compactor)


async def fit_window(parts: AgentParts, turn_id: str) -> None:
    """Compact the agent's history first if its next request is due for it (in the turn)."""
    compactor = parts.compactor()
    if compactor.due(parts.context()):
        with tracing.compaction(parts.id, turn_id):
            await compact_history(parts, compactor, turn_id)


async def compact_history(
    parts: AgentParts,
    compactor: Compactor,
    turn_id: str | None,
    *,
    recording: Callable[[], object] | None = None,
) -> Compacted | None:
    """Ask ``compactor`` and record its answer; the history is unchanged unless it returns.

    ``recording()`` is called right before the ``Compacted`` record is appended (whose
    observers may run code, a cancel say): from then on there is nothing left to abort.

    Raises:
        CompactionError: the policy failed or answered a cut that is not a turn start.
    """
    history = parts.history.update(parts.session)
    before = parts.context()
    request = CompactionRequest(
        agent_id=parts.id,
        model=parts.model,
        messages=history.messages(),
        system=history.system,
        turns=history.marks(),
        context=before,
        turn_id=turn_id,
    )
    try:
        answer = await compactor.compact(request)
    except CompactionError:
        raise
    except Exception as exc:
        raise CompactionError(
            f"compaction failed: {type(compactor).__name__} raised {type(exc).__name__}: {exc}; "
            f"the history is unchanged"
        ) from exc
    if answer is None:
        return None
    if answer.kept_from_seq not in {mark.seq for mark in request.turns}:
        raise CompactionError(
            f"compaction failed: {type(compactor).__name__} kept from seq "
            f"{answer.kept_from_seq}, which is not where a turn begins (one of "
            f"{[mark.seq for mark in request.turns]}); the history is unchanged"
        )
    draft = Compacted(summary=answer.summary, kept_from_seq=answer.kept_from_seq)
    chars, count = history.size_after(draft)
    after = parts.meter.estimated(chars, count, parts.tool_specs())
    # Invariant: no checkpoint from the policy's answer to the append: a cancel either comes
    # before (nothing changed) or finds the compaction recorded.
    if recording is not None:
        recording()
    record = parts.session.append(
        attrs.evolve(draft, turn_id=turn_id, tokens_before=before.tokens, tokens_after=after)
    )
    parts.compacted()
    return record
