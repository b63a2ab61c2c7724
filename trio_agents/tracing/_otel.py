"""What each span holds: the OpenTelemetry side of tracing, imported only when it is on.

Rules:
- Names and attributes follow the OpenTelemetry GenAI semantic conventions where they apply
  (``invoke_agent AGENT``, ``chat MODEL``, ``execute_tool NAME``, ``gen_ai.*`` attributes);
  what they do not cover is under ``trio_agents.*`` (turn, compaction, shell job, cancel).
- Message contents (prompts, replies, tool arguments and results, shell commands) are
  attributes only with ``capture_content``, as the conventions advise.
- A span that ends because its region was cancelled carries the typed cause: the attributes
  ``trio_agents.cancel.cause`` (the cause's class) and ``trio_agents.cancel.<field>`` (its
  fields), an event ``trio_agents.cancel`` with the same attributes, ``error.type =
  "cancelled"`` and an error status that names the cause. A turn takes its cause from its
  ``TurnEnded`` record (which says ``DisposedCancel`` when the agent is being disposed); a
  region cancelled from outside from :func:`trio_agents.cancel.current_cause`.
- What the session records say of a turn (the prompts it claimed, how it ended) is read from
  the records it appended, once, when its span ends: a listener of every record would cost
  each record an event (``bench_tracing``). The approval of a tool call is put on the span
  current where it is recorded, the call's own.
"""

from __future__ import annotations

import json
from collections.abc import (
    AsyncGenerator,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from contextvars import Token
from typing import Any, Final, TypeVar, final

import attrs
import trio
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import (
    Link,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.util.types import AttributeValue

from ..cancel import CancelCause, ParentCancel, current_cause
from ..session import Record, Session, TurnEnded, UserMessage
from ._metrics import Metrics
from ._protocols import RequestT, ShellJob, StreamingModel
from ._records import TurnTraced

T = TypeVar("T")

#: The instrumentation scope of every span.
SCOPE: Final = "trio_agents"

#: Providers by the class of the model, for ``gen_ai.provider.name``; a model may say its own
#: with a ``provider`` attribute.
_PROVIDERS: Final = {
    "OpenAIChatModel": "openai",
    "AnthropicModel": "anthropic",
    "ScriptedModel": "trio_agents.scripted",
}

#: Roles of the chat messages, for ``gen_ai.input.messages``.
_ROLES: Final = {
    "SystemText": "system",
    "UserText": "user",
    "AssistantText": "assistant",
    "ToolOutput": "tool",
}


#: How many models and tools a tracer keeps the shared parts of their spans for (a model may
#: name any tool: past this, each span makes its own).
_KINDS: Final = 256

#: The metric attributes of a turn's duration.
# Invariant: never changed (the SDK keeps the attributes of each new series it records).
_TURN_MEASURED: Final[Mapping[str, AttributeValue]] = {"gen_ai.operation.name": "invoke_agent"}


@final
@attrs.frozen
class _ChatKind:
    """What every request to one model shares: its span's name and first attributes, and
    the metric attributes of its series, made once per model rather than per request.

    Invariant: the mappings are never changed; a span that adds to its attributes copies them
    (the SDK keeps the attributes of each new metric series it records).
    """

    span_name: str
    response_model: str
    attributes: Mapping[str, AttributeValue]
    #: The duration's attributes before the response (a failed request) and after it.
    requested: Mapping[str, AttributeValue]
    answered: Mapping[str, AttributeValue]
    input_tokens: Mapping[str, AttributeValue]
    output_tokens: Mapping[str, AttributeValue]

    @classmethod
    def of(cls, model: StreamingModel[Any, Any]) -> _ChatKind:
        name = model.name
        provider = getattr(model, "provider", None) or _PROVIDERS.get(
            type(model).__name__, type(model).__name__
        )
        requested: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": name,
        }
        answered = {**requested, "gen_ai.response.model": name}
        return cls(
            span_name=f"chat {name}",
            response_model=name,
            attributes=requested,
            requested=requested,
            answered=answered,
            input_tokens={**answered, "gen_ai.token.type": "input"},
            output_tokens={**answered, "gen_ai.token.type": "output"},
        )


@final
@attrs.frozen
class _ToolKind:
    """What every call of one tool shares: its span's name and first attributes, and the
    metric attributes of its duration (never changed, as :class:`_ChatKind`'s)."""

    span_name: str
    attributes: Mapping[str, AttributeValue]
    measured: Mapping[str, AttributeValue]

    @classmethod
    def of(cls, name: str) -> _ToolKind:
        return cls(
            span_name=f"execute_tool {name}",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.type": "function",
            },
            measured={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
        )


def cause_attributes(cause: CancelCause | None) -> dict[str, AttributeValue]:
    """The span attributes of a cancel ``cause``: its class, then each of its fields."""
    if cause is None:
        return {}
    attributes: dict[str, AttributeValue] = {"trio_agents.cancel.cause": type(cause).__name__}
    for field in attrs.fields(type(cause)):
        value = getattr(cause, field.name)
        primitive = isinstance(value, str | bool | int | float)
        attributes[f"trio_agents.cancel.{field.name}"] = value if primitive else repr(value)
    return attributes


def _mark_cancelled(span: Span, cause: CancelCause | None) -> str:
    attributes = cause_attributes(cause)
    span.set_attributes({**attributes, "error.type": "cancelled"})
    span.add_event("trio_agents.cancel", attributes)
    span.set_status(
        Status(StatusCode.ERROR, f"cancelled by {cause.describe()}" if cause else "cancelled")
    )
    return "cancelled"


def _only_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return False


def _failed(span: Span, exc: BaseException) -> str | None:
    """Mark ``span`` with how its region ended when ``exc`` left it; the ``error.type``."""
    if isinstance(exc, GeneratorExit):
        return None  # the consumer closed the stream: not a failure
    if _only_cancelled(exc):
        return _mark_cancelled(span, current_cause())
    error = type(exc).__qualname__
    span.record_exception(exc)
    span.set_attribute("error.type", error)
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    return error


@final
@attrs.define(eq=False, repr=False)
class _Current:
    """Make a span current in a ``with`` block and end it after; an exception marks it.

    A class of its own rather than ``trace.use_span`` under ``contextlib.contextmanager``:
    two generator-backed context managers less per span (with the turn's and the tool
    call's own, and ``_within`` for the model's stream: 2,313K -> 2,277K instructions a
    traced tool turn under callgrind, the turns of ``bench_instructions``' ``turn_traced``).
    """

    _span: Span
    _token: Token[otel_context.Context] = attrs.field(init=False)

    def __enter__(self) -> Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self._span

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        try:
            if exc is not None:
                _failed(self._span, exc)
        finally:
            otel_context.detach(self._token)
            self._span.end()


@final
@attrs.define(eq=False, repr=False)
class _ToolCall:
    """The span of one tool call while it runs (:meth:`Tracer.execute_tool`): current in the
    block, told the answer, ended with its duration recorded."""

    _span: Span
    _capture: bool
    _metrics: Metrics | None
    _measured: Mapping[str, AttributeValue]
    _now: Callable[[], float]
    # Set by __enter__.
    _start: float = attrs.field(init=False)
    _token: Token[otel_context.Context] = attrs.field(init=False)
    error: str | None = attrs.field(init=False)

    def __enter__(self) -> _ToolCall:
        self.error = None
        if self._metrics is not None:
            self._start = self._now()
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def answered(self, is_error: bool, content: str) -> None:
        """Put the tool's answer on the span (one validation pass for its attributes)."""
        attributes: dict[str, AttributeValue] = {"trio_agents.tool.is_error": is_error}
        if self._capture:
            attributes["gen_ai.tool.call.result"] = content
        if is_error:
            attributes["error.type"] = "tool_error"
            self._span.set_status(Status(StatusCode.ERROR, "the tool answered an error"))
            self.error = "tool_error"
        self._span.set_attributes(attributes)

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        span = self._span
        error = self.error
        try:
            if exc is not None:
                error = _failed(span, exc) or error
        finally:
            otel_context.detach(self._token)
            span.end()
            if self._metrics is not None:
                self._metrics.took(self._now() - self._start, self._measured, error)


@final
@attrs.define(eq=False, repr=False)
class _TurnSpan:
    """The span of one turn while it runs (:meth:`Tracer.invoke_agent`): current in the
    block; when it ends, what the turn recorded is put on it (``Tracer._turn_ended``)."""

    _tracer: Tracer
    _span: Span
    _session: Session
    _turn_id: str
    # Set by __enter__.
    _first: int = attrs.field(init=False)
    _start: float = attrs.field(init=False)
    _token: Token[otel_context.Context] = attrs.field(init=False)

    def __enter__(self) -> None:
        tracer, session, span = self._tracer, self._session, self._span
        self._first = session.last_seq + 1
        tracer._turn_started(session.id, span)
        metrics = tracer.metrics
        if metrics is not None:
            metrics.turns.add(1)
            self._start = tracer.now()
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        tracer, span, session = self._tracer, self._span, self._session
        error: str | None = None
        try:
            try:
                records = session.records_since(self._first)
                error = tracer._turn_ended(span, records, session.id, self._turn_id)
                if error is None and exc is not None:
                    error = _failed(span, exc)
            finally:
                otel_context.detach(self._token)
                span.end()
        finally:
            tracer._turn_left(session.id)
            metrics = tracer.metrics
            if metrics is not None:
                metrics.turns.add(-1)
                metrics.took(tracer.now() - self._start, _TURN_MEASURED, error)


@final
@attrs.define(eq=False, repr=False)
class _Chat(AsyncGenerator[Any, None]):
    """A model's stream inside its ``chat`` span (:meth:`Tracer.chat`): the span is current
    in the task that asked for the stream from that call until the stream ends, fails or is
    closed, and then it ends. The model's stream runs in that task's own context, as it does
    untraced (what it sets in a context variable, the consumer sees, traced or not).

    Trick: the span is attached once per stream in the consuming task, and each step awaits
    the model's own step with no trampoline: the model's code, and the consumer's between
    two events (the turn's, which starts no span there), see the span current. Running each
    step in a copy of the caller's context instead (``context.run`` at every step and at
    every trap the step yields) kept it current in the model's code alone, for 29K more
    instructions a traced tool turn (``bench_instructions``' ``turn_traced`` under callgrind
    with the collector off: 2,083K -> 2,053K); tests/tracing/test_context.py's traceparent
    of an HTTP request and test_spans.py's trees pin what must be current where.

    Invariant: closed (``aclose()``, as ``async with aclosing(...)`` does, the turn's) in
    the task that asked for it, before any span that task started after it ends: the
    span's context is detached there, where it was attached (a ``ContextVar`` token). A
    class rather than an async generator around the model's: no second generator to resume
    at each event, register with trio's finalizer and close by throwing ``GeneratorExit``
    through it.
    """

    _tracer: Tracer
    _span: Span
    _kind: _ChatKind
    # The model's own stream, made while the span was current.
    _inner: AsyncGenerator[Any, None]
    _token: Token[otel_context.Context]
    _start: float
    # What the model answered, for gen_ai.output.messages: only with capture_content.
    _text: list[str] | None
    _calls: list[dict[str, Any]] | None
    # The duration's attributes: the kind's requested ones, its answered ones once Finished.
    _measured: Mapping[str, AttributeValue]
    _open: bool = True

    async def __anext__(self) -> Any:
        try:
            event = await self._inner.__anext__()
        except BaseException as exc:
            self.stopped(exc)
            raise
        self.observe(event)
        return event

    async def asend(self, value: None) -> Any:
        try:
            event = await self._inner.asend(value)
        except BaseException as exc:
            self.stopped(exc)
            raise
        self.observe(event)
        return event

    async def athrow(self, *args: Any) -> Any:
        try:
            event = await self._inner.athrow(*args)
        except BaseException as exc:
            self.stopped(exc)
            raise
        self.observe(event)
        return event

    async def aclose(self) -> None:
        if self._open:
            try:
                await self._inner.aclose()
            finally:
                self._end(None)

    def observe(self, event: object) -> None:
        """The model's stream gave ``event``: the last one,
        ``Finished``, puts the response's model, finish reason and tokens on the span."""
        usage = getattr(event, "usage", None)
        if usage is not None:  # the last event, Finished
            kind = self._kind
            input_tokens = int(getattr(usage, "input_tokens", 0))
            output_tokens = int(getattr(usage, "output_tokens", 0))
            self._span.set_attributes(
                {
                    "gen_ai.response.model": kind.response_model,
                    "gen_ai.response.finish_reasons": (str(getattr(event, "reason", "")),),
                    "gen_ai.usage.input_tokens": input_tokens,
                    "gen_ai.usage.output_tokens": output_tokens,
                }
            )
            metrics = self._tracer.metrics
            if metrics is not None:
                self._measured = kind.answered
                metrics.tokens.record(input_tokens, kind.input_tokens)
                metrics.tokens.record(output_tokens, kind.output_tokens)
        elif self._text is not None and self._calls is not None:  # capture_content
            delta = getattr(event, "text", None)
            if delta is not None:
                self._text.append(delta)
            elif hasattr(event, "call_id"):
                self._calls.append(
                    {
                        "type": "tool_call",
                        "id": getattr(event, "call_id", None),
                        "name": getattr(event, "name", None),
                        "arguments": dict(getattr(event, "arguments", {})),
                    }
                )

    def stopped(self, exc: BaseException) -> None:
        """A step of the model's stream raised ``exc``: the stream ended
        (``StopAsyncIteration``) or failed, and so does the span."""
        self._end(None if isinstance(exc, StopAsyncIteration) else _failed(self._span, exc))

    def _end(self, error: str | None) -> None:
        if not self._open:
            return
        self._open = False
        otel_context.detach(self._token)
        span, text, calls = self._span, self._text, self._calls
        if text is not None and calls is not None and (text or calls):
            parts: list[dict[str, Any]] = [{"type": "text", "content": "".join(text)}]
            output = [{"role": "assistant", "parts": (parts if text else []) + calls}]
            span.set_attribute("gen_ai.output.messages", _json(output))
        span.end()
        tracer = self._tracer
        if tracer.metrics is not None:
            tracer.metrics.took(tracer.now() - self._start, self._measured, error)


def _record(session: Session, turn_id: str, context: SpanContext) -> None:
    """Record the span of the turn ``turn_id``, the first of its agent in this runtime."""
    if context.is_valid:
        trace_id, span_id = (
            trace.format_trace_id(context.trace_id),
            trace.format_span_id(context.span_id),
        )
        session.append(TurnTraced(turn_id=turn_id, trace_id=trace_id, span_id=span_id))


def _resumed_from(records: Sequence[Record]) -> list[Link] | None:
    """The link from a resumed session's first turn to its latest traced turn, if any."""
    for record in reversed(records):
        if isinstance(record, TurnTraced):
            context = SpanContext(
                trace_id=int(record.trace_id, 16),
                span_id=int(record.span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            attributes = {"trio_agents.link": "resumed_from", "trio_agents.turn.id": record.turn_id}
            return [Link(context, attributes)]
    return None


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


def _message(message: object) -> dict[str, Any]:
    """One chat message in the conventions' shape (``role`` and ``parts``)."""
    kind = type(message).__name__
    parts: list[dict[str, Any]] = []
    content = getattr(message, "content", None)
    if kind == "ToolOutput":
        parts.append(
            {
                "type": "tool_call_response",
                "id": getattr(message, "call_id", None),
                "response": content,
            }
        )
    elif content:
        parts.append({"type": "text", "content": content})
    for call in getattr(message, "tool_calls", ()):
        parts.append(
            {
                "type": "tool_call",
                "id": call.call_id,
                "name": call.name,
                "arguments": dict(call.arguments),
            }
        )
    return {"role": _ROLES.get(kind, kind), "parts": parts}


@final
@attrs.define(eq=False, repr=False, init=False)
class Tracer:
    """The spans of one runtime (see the module rules).

    Args:
        provider: the tracer provider; OpenTelemetry's global one when ``None``.
        capture_content: put message contents on the spans.
        meter_provider: the meter provider; no metrics when ``None``.
    """

    _tracer: trace.Tracer
    #: The instruments, or ``None``: no meter provider was given, and nothing is measured.
    # Trick: no instrument call and no clock read then, where OpenTelemetry's global (proxy)
    # meter provider took ten calls and eight reads a tool turn: 2,053K -> 2,028K
    # instructions a traced tool turn under callgrind with the collector off
    # (``turn_traced``), 148K -> 129K the runtime's own part (``turn_traced_noop``);
    # test_metrics.py pins both sides
    # (test_a_runtime_traced_without_a_meter_provider_records_no_metric).
    metrics: Metrics | None
    capture_content: bool
    #: Trio's clock, read for the durations (the run's clock, as ``trio.current_time``
    #: reads it, without its two calls of lookup: 2,280K -> 2,267K instructions a traced
    #: tool turn under callgrind, as for ``_Current``).
    now: Callable[[], float]
    # The remote parents of the agents' next turns (an ACP prompt's _meta), by agent id.
    _parents: dict[str, otel_context.Context] = attrs.field(factory=dict)
    # The span of each agent's running turn, and the span that asked for each agent's
    # cancel (linked from the turn the cancel ends), by agent id.
    _running: dict[str, SpanContext] = attrs.field(factory=dict)
    _causes: dict[str, SpanContext] = attrs.field(factory=dict)
    # The agents created or resumed in this runtime whose first turn has not begun: it
    # links to the session's latest traced turn (see _records).
    _fresh: set[str] = attrs.field(factory=set)
    # The shared parts of the spans of each model (by class, name and provider) and tool.
    _chats: dict[tuple[type, str, object], _ChatKind] = attrs.field(factory=dict)
    _tools: dict[str, _ToolKind] = attrs.field(factory=dict)

    def __init__(
        self,
        provider: trace.TracerProvider | None,
        capture_content: bool,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.__attrs_init__(
            trace.get_tracer(SCOPE, tracer_provider=provider),
            None if meter_provider is None else Metrics(meter_provider),
            capture_content,
            trio.lowlevel.current_clock().current_time,
        )

    def agent_created(self, agent_id: str) -> None:
        """The agent ``agent_id`` was created or resumed: its next turn is its first here."""
        self._fresh.add(agent_id)

    def agent_disposed(self, agent_id: str) -> None:
        """The agent ``agent_id`` left the runtime."""
        self._fresh.discard(agent_id)

    def cancel_requested(self, agent_id: str, cause: object) -> None:
        """Remember what caused a cancel of the agent ``agent_id``: the parent's running turn
        for a :class:`~trio_agents.cancel.ParentCancel`, else the span current where the
        cancel was asked for (a tool call, an approval); the cancelled turn links to it."""
        parent = self._running.get(cause.parent_id) if isinstance(cause, ParentCancel) else None
        context = parent or trace.get_current_span().get_span_context()
        if context.is_valid:
            self._causes[agent_id] = context

    # -- context across processes ------------------------------------------------------------

    def environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """See :func:`trio_agents.tracing.environment`."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return {**env, **{key.upper(): value for key, value in carrier.items()}}

    def headers(self, headers: Mapping[str, str]) -> Mapping[str, str]:
        """See :func:`trio_agents.tracing.headers`."""
        carrier = dict(headers)
        propagate.inject(carrier)
        return carrier

    def remote_parent(self, agent_id: str, meta: Mapping[str, Any]) -> None:
        """See :func:`trio_agents.tracing.remote_parent`."""
        carrier = {k: v for k, v in meta.items() if isinstance(v, str)}
        context = propagate.extract(carrier)
        if trace.get_current_span(context).get_span_context().is_valid:
            self._parents[agent_id] = context

    # -- turns -------------------------------------------------------------------------------

    def invoke_agent(self, session: Session, turn_id: str, parent_id: str | None) -> _TurnSpan:
        """See :func:`trio_agents.tracing.invoke_agent`."""
        agent_id = session.id
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": agent_id,
            "gen_ai.agent.name": agent_id,
            "gen_ai.conversation.id": agent_id,
            "trio_agents.turn.id": turn_id,
        }
        if parent_id is not None:
            attributes["trio_agents.agent.parent_id"] = parent_id
        fresh = agent_id in self._fresh
        span = self._tracer.start_span(
            f"invoke_agent {agent_id}",
            context=self._parents.pop(agent_id, None),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=_resumed_from(session.records) if fresh else None,
        )
        if fresh:
            self._fresh.discard(agent_id)
            _record(session, turn_id, span.get_span_context())
        return _TurnSpan(self, span, session, turn_id)

    def _turn_started(self, agent_id: str, span: Span) -> None:
        self._causes.pop(agent_id, None)  # a cancel before this turn is not its cause
        self._running[agent_id] = span.get_span_context()

    def _turn_left(self, agent_id: str) -> None:
        self._running.pop(agent_id, None)
        self._causes.pop(agent_id, None)

    def _turn_ended(
        self, span: Span, records: Sequence[Record], session_id: str, turn_id: str
    ) -> str | None:
        """Put what the turn's records say on its span: the prompts it claimed, how it ended;
        the ``error.type`` of that end (``None``: completed, or no end recorded)."""
        prompts: list[str] = []
        ended: TurnEnded | None = None
        for record in records:
            if isinstance(record, UserMessage) and record.turn_id == turn_id:
                prompts.append(record.message_id)
                if self.capture_content:
                    span.add_event("gen_ai.user.message", {"content": record.content})
            elif isinstance(record, TurnEnded) and record.turn_id == turn_id:
                ended = record
        attributes: dict[str, AttributeValue] = {}
        if prompts:
            attributes["trio_agents.turn.prompt_ids"] = prompts
        if ended is None:
            if attributes:
                span.set_attributes(attributes)
            return None
        attributes["trio_agents.turn.stop_reason"] = str(ended.stop_reason)
        # One validation pass for the attributes the end adds (set_attribute takes a lock
        # and checks the span each time).
        span.set_attributes(attributes)
        if ended.cause is not None:
            caused_by = self._causes.pop(session_id, None)
            if caused_by is not None:
                span.add_link(caused_by, {"trio_agents.link": "cancelled_by"})
            return _mark_cancelled(span, ended.cause)
        if ended.error is not None:
            span.set_attribute("error.type", "turn_error")
            span.set_status(Status(StatusCode.ERROR, ended.error))
            return "turn_error"
        return None

    def approved(self, decision: str, by: str) -> None:
        """See :func:`trio_agents.tracing.approved`."""
        trace.get_current_span().set_attributes(
            {"trio_agents.tool.approval": decision, "trio_agents.tool.approval_by": by}
        )

    # -- model requests ----------------------------------------------------------------------

    def chat(
        self, model: StreamingModel[RequestT, Any], request: RequestT
    ) -> AsyncGenerator[Any, None]:
        """See :func:`trio_agents.tracing.chat`."""
        key = (type(model), model.name, getattr(model, "provider", None))
        kind = self._chats.get(key)
        if kind is None:
            kind = _ChatKind.of(model)
            if len(self._chats) < _KINDS:
                self._chats[key] = kind
        attributes = kind.attributes
        text: list[str] | None = None
        calls: list[dict[str, Any]] | None = None
        if self.capture_content:
            messages = getattr(request, "messages", ())
            content = _json([_message(m) for m in messages])
            attributes = {**attributes, "gen_ai.input.messages": content}
            text, calls = [], []
        span = self._tracer.start_span(kind.span_name, kind=SpanKind.CLIENT, attributes=attributes)
        metrics = self.metrics
        start = self.now() if metrics is not None else 0.0
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            inner = model.stream(request)
        except BaseException as exc:
            otel_context.detach(token)
            error = _failed(span, exc)
            span.end()
            if metrics is not None:
                metrics.took(self.now() - start, kind.requested, error)
            raise
        return _Chat(self, span, kind, inner, token, start, text, calls, kind.requested)

    # -- tool calls, compactions, shell jobs -------------------------------------------------

    def execute_tool(
        self, name: str, call_id: str | None, arguments: Mapping[str, Any]
    ) -> _ToolCall:
        """See :func:`trio_agents.tracing.execute_tool`."""
        kind = self._tools.get(name)
        if kind is None:
            kind = _ToolKind.of(name)
            if len(self._tools) < _KINDS:
                self._tools[name] = kind
        attributes = dict(kind.attributes)
        if call_id is not None:
            attributes["gen_ai.tool.call.id"] = call_id
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(dict(arguments))
        span = self._tracer.start_span(
            kind.span_name, kind=SpanKind.INTERNAL, attributes=attributes
        )
        return _ToolCall(span, self.capture_content, self.metrics, kind.measured, self.now)

    def compaction(self, agent_id: str, turn_id: str | None) -> _Current:
        """See :func:`trio_agents.tracing.compaction`."""
        attributes: dict[str, AttributeValue] = {"gen_ai.agent.id": agent_id}
        if turn_id is not None:
            attributes["trio_agents.turn.id"] = turn_id
        span = self._tracer.start_span(
            f"compaction {agent_id}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        return _Current(span)

    @contextmanager
    def shell_job(self, job: ShellJob) -> Iterator[object]:
        """See :func:`trio_agents.tracing.shell_job`."""
        job_id = job.job_id
        attributes: dict[str, AttributeValue] = {"process.pid": job.process.pid}
        if job_id is not None:
            attributes["trio_agents.job.id"] = job_id
        owner = job.spec.owner
        if owner is not None:
            attributes["trio_agents.job.owner"] = owner
        if self.capture_content:
            attributes["process.command_line"] = job.spec.command
        span = self._tracer.start_span(
            f"shell {job_id or 'command'}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        metrics = self.metrics
        if metrics is not None:
            metrics.jobs.add(1)
        try:
            with _Current(span):
                yield span
                self._exited(span, job)
        finally:
            if metrics is not None:
                metrics.jobs.add(-1)

    def _exited(self, span: Span, job: ShellJob) -> None:
        code = job.process.returncode
        if code is not None:
            span.set_attribute("process.exit.code", code)
        status = job.status
        span.set_attribute("trio_agents.job.status", str(getattr(status, "value", status)))
