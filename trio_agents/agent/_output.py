"""Typed final output: a turn that must answer with JSON of a schema, checked and retried.

Rules:
- An output type is an attrs class (its schema comes from the tool schema code, and the
  answer is structured with the tools' strict cattrs policy) or an :class:`OutputSchema` (a
  JSON Schema; the answer is validated with ``jsonschema``). Either is checked when it is
  given (``ask``, ``create``, ``agent.output``), not when the model answers.
- A turn asked for output (its prompt's ``ask(output=)``, else the agent's ``output``)
  offers the model the final-answer tool (:data:`FINAL_ANSWER`, its parameters the schema;
  a registered tool of that name is left out of the turn) and sets ``ModelRequest.output``:
  a provider with a native JSON-schema mode answers in its text instead.
- A step's answer is its call of the final-answer tool, else, in a step that called no tool,
  its text parsed as JSON (a fenced code block is unwrapped). Each answer is recorded as
  ``OutputProduced`` (``problems`` empty: accepted). A call is answered with a tool result
  (an error listing the problems when refused); a refused text is told to the model in a
  user message, which the history builds from the record (:func:`text_feedback`).
- The first accepted answer ends the turn ``completed``; the other tool calls of that step
  still run, and a second final answer in it is refused without counting. Each refusal is
  retried; one refusal more than ``output_retries`` ends the turn ``error``
  (:class:`OutputFailed`), and ``ask`` raises :class:`OutputError` with the last answer.
- The answer of such a turn (``ask``'s text) is the accepted answer's JSON text.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, TypeVar, final

import attrs

from .._base import json_type
from ..model import ModelRequest, OutputSpec, ToolCallRequested, ToolSpec
from ..session import AssistantMessage, OutputProduced, Record, ToolCallEnded, TurnEnded
from ._errors import TurnFailedError
from ._inbox import MessageId, QueuedMessage
from ._tool_schema import ArgumentsError, params_schema, structure_arguments

if TYPE_CHECKING:
    from ..session import Session

T = TypeVar("T")

#: The name of the final-answer tool a turn asked for output offers the model.
FINAL_ANSWER: Final = "final_answer"
#: How many refused answers a turn retries by default.
DEFAULT_RETRIES: Final = 2

_ABOUT = (
    "Give your final answer: call this once, with the answer as the arguments, when you are "
    "done (after any other tools). Your turn ends when the answer is accepted."
)
_ACCEPTED = "accepted: this is your final answer"
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n(?P<body>.*?)\n\s*```\s*$", re.DOTALL)


def _copy(schema: Mapping[str, Any]) -> dict[str, Any]:
    return dict(schema)


@final
@attrs.frozen(eq=False)
class OutputSchema:
    """A typed final answer described by a JSON Schema (an object schema) instead of an
    attrs class: ``ask(prompt, output=OutputSchema(schema))`` returns the validated JSON.

    Validation needs the ``jsonschema`` package (the ``jsonschema`` extra of trio-agents).

    Raises:
        ValueError: ``schema`` is not a valid JSON Schema of an object.
        ImportError: ``jsonschema`` is not installed.
    """

    schema: Mapping[str, Any] = attrs.field(converter=_copy)
    _validator: Any = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.schema.get("type") != "object":
            raise ValueError(
                f'an output schema describes a JSON object (its "type" is "object"); '
                f"got type {self.schema.get('type')!r}"
            )
        try:
            import jsonschema
        except ImportError:
            raise ImportError(
                "validating output with a JSON Schema needs the jsonschema package; "
                "install it (pip install jsonschema, or the trio-agents extra 'jsonschema')"
            ) from None
        cls = jsonschema.validators.validator_for(self.schema)
        try:
            cls.check_schema(dict(self.schema))
        except jsonschema.SchemaError as exc:
            where = "/".join(map(str, exc.path)) or "the top level"
            raise ValueError(f"not a valid JSON Schema ({exc.message} @ {where})") from None
        object.__setattr__(self, "_validator", cls(self.schema))

    def problems(self, answer: object) -> list[str]:
        """What is wrong with ``answer``, one line each with its path (empty: valid)."""
        found = sorted(self._validator.iter_errors(answer), key=lambda e: list(e.path))
        return [f"{e.message} @ {''.join(_step(p) for p in e.path) or 'answer'}" for e in found]


def _step(part: object) -> str:
    return f"[{part}]" if isinstance(part, int) else f".{part}" if part else ""


#: What ``output=`` takes: an attrs class, or an :class:`OutputSchema`.
OutputKind: TypeAlias = "type[Any] | OutputSchema"


@final
@attrs.frozen(eq=False)
class OutputType(Generic[T]):
    """An output type, checked once: the final-answer tool and how an answer is structured."""

    kind: type[T] | OutputSchema
    spec: ToolSpec

    def structure(self, answer: object) -> T:
        """``answer`` as the output type.

        Raises:
            ArgumentsError: listing every problem, each with its path.
        """
        kind = self.kind
        if isinstance(kind, OutputSchema):
            problems = kind.problems(answer)
            if problems:
                raise ArgumentsError(problems)
            return answer  # type: ignore[return-value]
        if not isinstance(answer, Mapping):
            raise ArgumentsError([f"expected an object, got {json_type(answer)} @ answer"])
        result: T = structure_arguments(kind, answer)
        return result


@functools.cache
def _of_class(kind: type[Any]) -> OutputType[Any]:
    try:
        schema = params_schema(kind)
    except TypeError as exc:
        raise TypeError(f"output {kind.__qualname__}: {str(exc).removeprefix('tool ')}") from None
    doc = kind.__dict__.get("__doc__")
    about = f"{doc.strip()}\n\n{_ABOUT}" if isinstance(doc, str) and doc.strip() else _ABOUT
    return OutputType(kind, ToolSpec(FINAL_ANSWER, about, schema))


def output_of(kind: type[T] | OutputSchema) -> OutputType[T]:
    """The checked output type of ``kind`` (an attrs class's is made once).

    Raises:
        TypeError: ``kind`` is neither an attrs class nor an :class:`OutputSchema`, or a
            field's type has no JSON schema.
    """
    if isinstance(kind, OutputSchema):
        return OutputType(kind, ToolSpec(FINAL_ANSWER, _ABOUT, dict(kind.schema)))
    if not isinstance(kind, type) or not attrs.has(kind):
        raise TypeError(
            f"output is an attrs class or an OutputSchema; got {kind!r} (decorate the class "
            f"with @attrs.frozen, or wrap a JSON Schema in OutputSchema)"
        )
    return _of_class(kind)


def latest_output(records: Sequence[Record]) -> OutputProduced | None:
    """The latest accepted ``OutputProduced`` of a session's records, or ``None``."""
    for record in reversed(records):
        if isinstance(record, OutputProduced) and not record.problems:
            return record
    return None


def check_retries(value: int) -> int:
    """``value`` if it is a whole number >= 0.

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"output_retries is how many refused answers to retry, >= 0; got {value!r}"
        )
    return value


class OutputError(TurnFailedError):
    """The model's final answer did not match the output type, ``output_retries`` times
    more than allowed; the turn ended ``error``.

    Attributes:
        record: the turn's ``TurnEnded`` record.
        answer: the last answer (its JSON; the text itself when it was not JSON).
        problems: what was wrong with it, one line each with its path.
    """

    def __init__(self, message: str, record: TurnEnded, answer: Any, problems: Sequence[str]):
        super().__init__(message, record)
        self.answer = answer
        self.problems = tuple(problems)


@final
class OutputFailed(Exception):
    """A turn's answers were refused more times than it retries (it ends ``error``)."""


def text_feedback(problems: Sequence[str]) -> str:
    """What the model is told of an answer in its text that was refused."""
    listed = "\n".join(f"- {problem}" for problem in problems)
    return (
        f"Your final answer was not accepted:\n{listed}\n"
        f"Answer again: call the {FINAL_ANSWER} tool with the corrected answer (or, when that "
        f"tool is not offered, reply with only the JSON that matches the schema)."
    )


def _call_feedback(problems: Sequence[str]) -> str:
    listed = "\n".join(f"- {problem}" for problem in problems)
    return f"not accepted:\n{listed}\nCall {FINAL_ANSWER} again with the corrected answer."


@final
@attrs.define(eq=False, repr=False)
class Outputs:
    """An agent's output settings: its default type, its retries and the types ``ask``
    asked for its messages (until their turn starts).

    Attributes:
        default: the output type of every turn not asked for another, or ``None``.
        retries: how many refused answers a turn retries by default.
    """

    default: OutputType[Any] | None = None
    retries: int = DEFAULT_RETRIES
    asked: dict[MessageId, tuple[OutputType[Any], int]] = attrs.field(factory=dict)


def turn_output(
    outputs: Outputs | None, session: Session, turn_id: str, claimed: Sequence[QueuedMessage]
) -> TurnOutput | None:
    """The typed answer the turn that claimed ``claimed`` must give, or ``None``."""
    if outputs is None:
        return None
    for message in claimed:
        if message.lane == "next_turn":
            asked = outputs.asked.pop(message.id, None)
            if asked is not None:
                return TurnOutput(session, turn_id, *asked)
    if outputs.default is None:
        return None
    return TurnOutput(session, turn_id, outputs.default, outputs.retries)


@final
@attrs.define(eq=False, repr=False)
class TurnOutput:
    """The typed answer of one turn: it shapes each request and reviews each step."""

    _session: Session
    _turn_id: str
    _output: OutputType[Any]
    _retries: int
    _refused: int = attrs.field(default=0, init=False)
    _mark: int = attrs.field(default=0, init=False)
    accepted: bool = attrs.field(default=False, init=False)

    def request(self, request: ModelRequest) -> ModelRequest:
        """``request`` offering the final-answer tool and asking for the schema."""
        self._mark = self._session.statistics().records
        spec = self._output.spec
        tools = tuple(s for s in request.tools if s.name != spec.name)
        output = OutputSpec(spec.name, spec.parameters)
        return attrs.evolve(request, tools=(*tools, spec), output=output)

    def review(
        self, calls: list[ToolCallRequested], open_calls: dict[str, ToolCallRequested] | None
    ) -> list[ToolCallRequested]:
        """Review the step that asked for ``calls``: record its answer, if any, and answer
        the final-answer calls (taken out of ``open_calls``).

        Returns:
            The other calls, to run as usual. ``accepted`` says whether the turn is done.

        Raises:
            OutputFailed: a refusal more than the turn retries.
        """
        name = self._output.spec.name
        rest = [call for call in calls if call.name != name]
        answers = [call for call in calls if call.name == name]
        for call in answers:
            if open_calls is not None:
                open_calls.pop(call.call_id, None)
            self._judge(call.arguments, call)
        if not calls:
            self._judge_text()
        return rest

    def _judge_text(self) -> None:
        text = "".join(
            record.content
            for record in self._session.records_since(self._mark)
            if isinstance(record, AssistantMessage) and record.turn_id == self._turn_id
        )
        fenced = _FENCE.match(text)
        try:
            answer = json.loads(fenced["body"] if fenced else text)
        except ValueError as exc:
            what = "no answer" if not text.strip() else "not JSON"
            self._judge(text, None, [f"{what} ({exc}) @ answer"])
            return
        self._judge(answer, None)

    def _judge(
        self, answer: object, call: ToolCallRequested | None, problems: list[str] | None = None
    ) -> None:
        session = self._session
        call_id = call.call_id if call is not None else None
        if self.accepted:
            problems = ["the final answer was already given in this step; it stands"]
        elif problems is None:
            try:
                self._output.structure(answer)
                problems = []
            except ArgumentsError as exc:
                problems = [p.replace("@ arguments", "@ answer", 1) for p in exc.problems]
        session.append(
            OutputProduced(turn_id=self._turn_id, answer=answer, problems=problems, call_id=call_id)
        )
        if call is not None:
            session.append(
                ToolCallEnded(
                    turn_id=self._turn_id,
                    call_id=call.call_id,
                    name=call.name,
                    content=_call_feedback(problems) if problems else _ACCEPTED,
                    is_error=bool(problems),
                    started=True,
                )
            )
        if self.accepted:
            return
        if not problems:
            self.accepted = True
            return
        self._refused += 1
        if self._refused > self._retries:
            raise OutputFailed(
                f"the model's final answer was refused {self._refused} times "
                f"(output_retries={self._retries}); the last one: {'; '.join(problems)}"
            )
