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
  included. The older messages are sent as a transcript in the system text, so any provider
  accepts the request whatever tool calls it holds.
- A summary request is never sent over the window: with a known window (the summarizer's,
  and for the agent's own model also the one a provider reported), one request holds at most
  three quarters of it by the estimate (the rest is for the answer and the estimate's error).
  A transcript too long for that has its tool outputs cut first (head and tail kept, each to
  a quarter of a request), then is summarized in chunks, in order, each request carrying the
  summary so far (itself cut to the room kept for it). A window too small to hold the
  instructions and some transcript is a :class:`CompactionError` before anything is sent.
- A provider's "context too long" answer to a turn's request (``ModelErrorKind.
  CONTEXT_TOO_LONG``) compacts with the window it reported, if any, and the turn sends the
  step once more (:func:`compact_after`); a second refusal ends the turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Final, Protocol, final, runtime_checkable

import attrs

from .. import tracing
from .._errors import TrioAgentsError
from ..cancel import CancelCause
from ..kernel import Context, ServiceKey
from ..model import (
    AssistantText,
    ChatMessage,
    Finished,
    Model,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    SystemText,
    TextDelta,
    ToolOutput,
    UserText,
    model_from_spec,
)
from ..session import Compacted
from . import _hook_calls as hook_calls
from ._history import TurnMark, message_chars
from ._hook_points import POST_COMPACT, PRE_COMPACT
from ._meter import CHARS_PER_TOKEN, TOKENS_PER_MESSAGE, ContextUsage, estimate

if TYPE_CHECKING:
    from ..model import ToolSpec
    from ..session import Session
    from ._history import History
    from ._hooks import HookRegistry
    from ._meter import ContextMeter


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
        limit: int | None = getattr(model, "context_window", None)
        if self.model is None and window is not None:
            # The agent's own model: the window it is held to now (a provider may have
            # reported a smaller one than the model declares).
            limit = window if limit is None else min(limit, window)
        summary = await self._summarize(model, older, limit)
        return Compaction(summary=summary, kept_from_seq=turns[first].seq)

    async def _summarize(
        self, model: Model, older: Sequence[ChatMessage], window: int | None
    ) -> str:
        """The summary of ``older``, in requests that each fit ``window`` (see the module
        rules); chunk after chunk, each request carries the summary so far."""
        ask = f"Summarize the conversation above in at most {self.summary_words} words."
        lines = _transcript_lines(older)
        if window is None:
            return await self._ask(model, _conversation("\n".join(t for t, _ in lines)), ask)
        # The request's own text besides the transcript and the summary so far.
        fixed = len(_SUMMARIZER) + len(_SO_FAR) + len(_WENT_ON) + len(ask)
        usable = window * _REQUEST_SHARE_NUM // _REQUEST_SHARE_DEN - 2 * TOKENS_PER_MESSAGE
        room = usable * CHARS_PER_TOKEN - fixed
        reserve = min(self.summary_words * _CHARS_PER_WORD, room // 2)
        chunk_room = room - reserve
        if chunk_room < _MIN_CHUNK:
            least = -(-(2 * _MIN_CHUNK + fixed) // CHARS_PER_TOKEN) + 2 * TOKENS_PER_MESSAGE
            needed = -(-least * _REQUEST_SHARE_DEN // _REQUEST_SHARE_NUM)
            raise CompactionError(
                f"compaction failed: the summarizer model {model.name!r} has a context window "
                f"of {window} tokens, too small for a summary request (it needs at least "
                f"{needed}); give the compactor a model with a larger window "
                "(SummarizingCompactor(model=...)); the history is unchanged"
            )
        if sum(len(t) + 1 for t, _ in lines) <= room:
            return await self._ask(model, _conversation("\n".join(t for t, _ in lines)), ask)
        summary = ""
        for chunk in _chunks(_shortened(lines, chunk_room), chunk_room):
            if not summary:
                system = _conversation(chunk)
            else:
                system = f"{_SUMMARIZER}{_SO_FAR}{_cut(summary, reserve)}{_WENT_ON}{chunk}"
            summary = await self._ask(model, system, ask)
        return summary

    async def _ask(self, model: Model, system: str, ask: str) -> str:
        """The summarizer's answer to one request of ``system`` and ``ask``."""
        request = ModelRequest(messages=(SystemText(system), UserText(ask)))
        text: list[str] = []
        try:
            async with aclosing(model.stream(request)) as stream:
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


#: The headings of a later chunk's request: the summary so far, then the next chunk.
_SO_FAR = "\n\nThe summary of the conversation so far:\n\n"
_WENT_ON = "\n\nHow it went on:\n\n"
#: The share of the summarizer's window one request may fill (3/4): the rest is for its
#: answer and for the error of the estimate of 4 characters a token.
_REQUEST_SHARE_NUM, _REQUEST_SHARE_DEN = 3, 4
#: Characters kept for the summary so far in a later chunk's request, per word asked for.
_CHARS_PER_WORD = 8
#: The fewest characters of transcript one summary request must hold to be worth sending.
_MIN_CHUNK = 200


def _conversation(transcript: str) -> str:
    return f"{_SUMMARIZER}\n\nThe conversation:\n\n{transcript}"


def _tokens(messages: Sequence[ChatMessage]) -> int:
    return estimate(sum(message_chars(m) for m in messages), len(messages))


def _transcript_lines(messages: Sequence[ChatMessage]) -> list[tuple[str, bool]]:
    """One line per message (and per tool call), each with whether it is a tool's output."""
    lines: list[tuple[str, bool]] = []
    for message in messages:
        if isinstance(message, SystemText):
            lines.append((f"[earlier summary] {message.content}", False))
        elif isinstance(message, UserText):
            lines.append((f"[user] {message.content}", False))
        elif isinstance(message, AssistantText):
            if message.content:
                lines.append((f"[agent] {message.content}", False))
            for call in message.tool_calls:
                arguments = json.dumps(dict(call.arguments), default=str)
                lines.append((f"[agent calls {call.name}] {arguments}", False))
        elif isinstance(message, ToolOutput):
            failed = " (failed)" if message.is_error else ""
            lines.append((f"[{message.name} result{failed}] {message.content}", True))
    return lines


def _cut(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its start and end with a note of
    what was cut between them (at most ``limit`` characters in all)."""
    if len(text) <= limit:
        return text
    keep = limit - len(f" [... {len(text)} characters cut ...] ")
    if keep < 2:
        return text[:limit]
    note = f" [... {len(text) - keep} characters cut ...] "
    return text[: keep - keep // 2] + note + text[len(text) - keep // 2 :]


def _shortened(lines: list[tuple[str, bool]], room: int) -> list[str]:
    """The lines of a transcript too long for one request: tool outputs cut first (to a
    quarter of a request each), then any line still longer than a request."""
    tool_room = max(room // 4, 1)
    return [_cut(_cut(text, tool_room) if tool else text, room) for text, tool in lines]


def _chunks(lines: list[str], room: int) -> list[str]:
    """``lines`` packed in order into pieces of at most ``room`` characters each."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        if current and size + 1 + len(line) > room:
            chunks.append("\n".join(current))
            current, size = [], 0
        size += len(line) + (1 if current else 0)
        current.append(line)
    if current:
        chunks.append("\n".join(current))
    return chunks


#: The key of the ``compaction`` policy (provided by :class:`CompactionPlugin`).
COMPACTION: Final[ServiceKey[Compactor]] = ServiceKey("compaction")


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


class CompactionParts(Protocol):
    """What compacting uses of an agent: its parts (``AgentParts`` is one), named."""

    id: str
    session: Session
    model: Model
    history: History
    meter: ContextMeter
    hooks: HookRegistry

    def compactor(self) -> Compactor:
        """The compaction policy in force now."""

    def context(self) -> ContextUsage:
        """The size of the next model request, against the model's window."""

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """What the model is told about the agent's tools."""

    def compacted(self) -> None:
        """A ``Compacted`` record was appended: fold it, and meter afresh."""


async def fit_window(parts: CompactionParts, turn_id: str) -> None:
    """Compact the agent's history first if its next request is due for it (in the turn)."""
    compactor = parts.compactor()
    if compactor.due(parts.context()):
        with tracing.compaction(parts.id, turn_id):
            await compact_history(parts, compactor, turn_id)


async def compact_after(parts: CompactionParts, turn_id: str, error: ModelError) -> bool:
    """Compact the history because the model answered ``error``; whether it was compacted
    (then the turn sends the request once more).

    Only a ``CONTEXT_TOO_LONG`` error is acted on. The window the compaction sizes its work
    to is the smaller of the model's and the one the provider reported (``error.limit``).

    Raises:
        CompactionError: the policy failed (the history is unchanged).
    """
    if error.kind is not ModelErrorKind.CONTEXT_TOO_LONG:
        return False
    window: int | None = getattr(parts.model, "context_window", None)
    if error.limit is not None:
        window = error.limit if window is None else min(window, error.limit)
    record = await compact_history(parts, parts.compactor(), turn_id, window=window, over=True)
    return record is not None


async def compact_history(
    parts: CompactionParts,
    compactor: Compactor,
    turn_id: str | None,
    *,
    recording: Callable[[], object] | None = None,
    window: int | None = None,
    over: bool = False,
) -> Compacted | None:
    """Ask ``compactor`` and record its answer; the history is unchanged unless it returns.

    ``recording()`` is called right before the ``Compacted`` record is appended (whose
    observers may run code, a cancel say): from then on there is nothing left to abort.
    ``window`` replaces the model's window in what the policy is shown; ``over`` says the
    provider refused the request as too long, so the policy is shown a request over the
    window whatever the meter says.

    Raises:
        CompactionError: the policy failed or answered a cut that is not a turn start.
    """
    history = parts.history.update(parts.session)
    metered = before = parts.context()
    if window is not None:
        before = attrs.evolve(before, window=window)
    if over and before.window is not None and before.tokens <= before.window:
        before = attrs.evolve(before, tokens=before.window + 1)
    request = CompactionRequest(
        agent_id=parts.id,
        model=parts.model,
        messages=history.messages(),
        system=history.system,
        turns=history.marks(),
        context=before,
        turn_id=turn_id,
    )
    if parts.hooks.at(PRE_COMPACT):
        veto = await hook_calls.before_compact(parts, turn_id, before)
        if veto is not None:
            raise CompactionError(
                f"compaction blocked by a hook: {veto.reason}; the history is unchanged", veto
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
        attrs.evolve(draft, turn_id=turn_id, tokens_before=metered.tokens, tokens_after=after)
    )
    parts.compacted()
    if parts.hooks.at(POST_COMPACT):
        await hook_calls.after_compact(parts, turn_id, record)
    return record
