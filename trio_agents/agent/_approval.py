"""Approval: asking before a tool call that is marked *ask* runs.

Rules:
- A call needs approval when its tool is marked (``Tool(ask=True)``, ``@tool(ask=True)``, an
  MCP server's ``ask``), when the registry asks for its name (``tools.require_approval``,
  the config file's ``[approval]`` table), or when the calling agent's definition names it
  (``create(ask=...)``, ``[[agents]] ask``), or when the agent's approver names it in its
  optional ``ask`` attribute (a front end's own policy: the ACP bridge asks about ``bash``).
  Nothing else is ever asked about.
- There is one seam: the calling agent's :class:`Approver` (``agent.approver``, given to
  ``create``/``resume`` or set by the front end that shows the agent). A call that needs
  approval and has nobody to ask (no agent, or an agent without an approver) is refused.
- A child agent (``create(parent=...)``) without an approver of its own is answered by its
  parent's (the one the parent has at the time of the call, with the approver's ``ask``), and
  one without an ``ask`` of its own asks about its parent's; given its own, it uses its own.
- Answers: ``allow_*`` runs the call; ``reject_*`` (or a :class:`Refusal`) answers the model
  with an error result and the turn goes on; ``cancel`` does not run the call and stops the
  agent through its one public stop, ``Agent.cancel(UserCancel())`` (``AgentCancelRequested``
  first, the queued prompts cleared, the turn aborted); a call outside the agent's turn stops
  only what it runs in (its own scope, or the agent's turn keeping the queue). An
  ``*_always`` answer stands, for that tool name, for the rest of the agent's session; a
  resumed agent restores it from the records. A session file is trusted input: a standing
  answer restored from it is in force unless the approver says ``forget_stored`` (then only
  the answers given since the agent was built stand); the front ends announce the restored
  ones (:func:`standing_answers` of the records they resumed).
- One question at a time per agent: concurrent calls of one step are asked in turn, so an
  ``*_always`` answer to the first stands for the rest.
- Every answer is a :class:`~trio_agents.session.ToolApproval` record, written before the call
  runs or is refused; a standing answer is recorded too (``by="standing answer"``).
- The agent's mode (:mod:`._modes`) is part of its approval state: it is read from the
  records with the standing answers, a child without a mode of its own follows its parent's,
  and :meth:`Approvals.set_mode` records the change.
- Asking is a checkpoint like any other: a cancel while the question is open propagates
  (:class:`trio.Cancelled`), nothing runs and nothing is recorded; the turn records the call
  as cancelled before it started. An approver that raises refuses the call (fail closed).
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Protocol, final, runtime_checkable

import attrs
import trio

from .. import tracing
from ..session import ModeChanged, Record, Session, ToolApproval
from ._modes import MODES, Mode, mode_named, recorded_mode

log = logging.getLogger("trio_agents")

#: The longest title an :class:`ApprovalRequest` makes of a call's arguments.
_TITLE_MAX: Final = 200
# Trick: shared by every agent that asks about no tool (an empty frozenset is 216 B of every
# idle agent: python -m benchmarks --only memory).
_NO_TOOLS: Final[frozenset[str]] = frozenset()


class Decision(enum.Enum):
    """An answer to an :class:`ApprovalRequest`."""

    #: Run this call.
    ALLOW_ONCE = "allow_once"
    #: Run this call, and every later call of this tool in the session, unasked.
    ALLOW_ALWAYS = "allow_always"
    #: Do not run this call; the model reads that the user refused it.
    REJECT_ONCE = "reject_once"
    #: Refuse this call and every later call of this tool in the session, unasked.
    REJECT_ALWAYS = "reject_always"
    #: Do not run this call, and cancel the turn (:class:`~trio_agents.UserCancel`).
    CANCEL = "cancel"


@attrs.frozen
class Refusal:
    """A rejection that tells the model why (instead of the default wording).

    Attributes:
        reason: what the model reads as the call's error result.
        always: refuse later calls of this tool in the session too, unasked.
    """

    reason: str
    always: bool = False


@attrs.frozen
class ApprovalRequest:
    """A tool call waiting for approval.

    Attributes:
        agent_id: the calling agent's id.
        tool: the tool's name.
        arguments: the (validated) JSON object the model sent.
        description: the tool's description.
        call_id: the model's id of the call, or ``None``.
    """

    agent_id: str
    tool: str
    arguments: Mapping[str, Any] = attrs.field(hash=False)
    description: str = ""
    call_id: str | None = None

    @property
    def title(self) -> str:
        """One line for a person: ``bash: ls -l`` (a ``command`` argument) or
        ``write_file {"path": "a.txt", ...}``, at most 200 characters."""
        command = self.arguments.get("command")
        if isinstance(command, str):
            text = f"{self.tool}: {command}"
        elif self.arguments:
            text = f"{self.tool} {json.dumps(dict(self.arguments), ensure_ascii=False)}"
        else:
            text = self.tool
        text = " ".join(text.split())
        return text if len(text) <= _TITLE_MAX else text[: _TITLE_MAX - 1] + "…"


@runtime_checkable
class Approver(Protocol):
    """The seam a front end provides: ask someone whether a tool call may run.

    ``approve`` may take as long as the person does; a cancel of the turn cancels it.
    Optional attributes: ``name`` says who answered in the session's records (default: the
    class name); ``ask``, a collection of tool names, adds those tools to the ones asked about
    for the agents this approver serves; ``forget_stored``, when true, ignores the standing
    answers restored from the session's records (``--forget-approvals``), so those calls are
    asked again.
    """

    async def approve(self, request: ApprovalRequest) -> Decision | Refusal:
        """Answer ``request``."""
        ...


def standing_answers(records: Iterable[Record]) -> dict[str, Decision]:
    """The ``*_always`` answers in force after ``records``, by tool name."""
    standing: dict[str, Decision] = {}
    for record in records:
        if isinstance(record, ToolApproval) and record.decision.endswith("_always"):
            standing[record.name] = Decision(record.decision)
    return standing


def _refused(tool: str, always: bool) -> str:
    rest = " and every later call of it in this session" if always else ""
    return (
        f"the user refused to let tool {tool!r} run{rest}; it did not run. Do not retry it: "
        f"go on without it, or ask the user"
    )


def _tool_names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(names) or _NO_TOOLS


@final
# Converters at init only (no hook on every attribute set, as History).
@attrs.define(eq=False, repr=False, kw_only=True, on_setattr=attrs.setters.NO_OP)
class Approvals:
    """The approval state of one agent: who asks, what its definition asks about, and the
    standing answers of its session (see the module rules)."""

    ask: frozenset[str] = attrs.field(converter=_tool_names)
    _own: Approver | None = attrs.field(alias="approver")
    # Trick: where its answers and modes are recorded is the session, not a bound ``append``
    # (a 64 B method object on every idle agent: python -m benchmarks --only memory).
    _session: Session
    # A child agent's: what it asks about and who answers, when it has none of its own.
    _parent: Approvals | None = None
    # Trick: made by the first standing answer, as most sessions have none (an empty dict is
    # 64 B of every idle agent: python -m benchmarks --only memory).
    _standing: dict[str, Decision] | None = attrs.field(init=False)
    # The agent's own mode (its latest ModeChanged), or None: its parent's, else the first.
    _mode: Mode | None = attrs.field(init=False)
    # The tools whose standing answer came from the records (not given in this process).
    _restored: frozenset[str] = attrs.field(init=False)
    # One question at a time per agent: the calls of one step are asked in turn, and an
    # *_always answer to one of them stands for the others still waiting. Made by the
    # first question: most agents never ask one.
    _asking: trio.Lock | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        records = self._session.records
        self._standing = standing_answers(records) or None
        self._mode = recorded_mode(records)
        self._restored = _tool_names(self._standing or ())

    @property
    def approver(self) -> Approver | None:
        """Who answers: the agent's own approver, else its parent's (a child inherits it)."""
        if self._own is None and self._parent is not None:
            return self._parent.approver
        return self._own

    @approver.setter
    def approver(self, approver: Approver | None) -> None:
        self._own = approver

    @property
    def mode(self) -> Mode:
        """The mode in force: the agent's own, else its parent's, else the first of
        :data:`MODES` (``ask``)."""
        if self._mode is not None:
            return self._mode
        return self._parent.mode if self._parent is not None else MODES[0]

    def set_mode(self, mode: str | Mode, turn_id: str | None = None) -> Mode:
        """Put the agent in ``mode`` from its next tool call on, and record it.

        Raises:
            UnknownModeError: no mode has that id.
        """
        chosen = mode_named(mode)
        self._session.append(ModeChanged(mode=chosen.id, turn_id=turn_id))
        self._mode = chosen
        return chosen

    def asks(self, name: str) -> bool:
        """Whether the agent's definition (a child without an ``ask`` of its own: its
        parent's) or its approver names the tool ``name``."""
        return self._defined(name) or name in getattr(self.approver, "ask", ())

    def _defined(self, name: str) -> bool:
        if self.ask or self._parent is None:
            return name in self.ask
        return self._parent._defined(name)

    def standing(self) -> dict[str, Decision]:
        """A copy of the standing answers, by tool name."""
        return dict(self._standing or {})

    async def check(
        self,
        request: ApprovalRequest,
        *,
        turn_id: str | None,
        stop: Callable[[], object],
    ) -> str | None:
        """Ask about ``request`` (unless an answer stands); ``None`` lets the call run, a
        string is the refusal the model reads (the call did not run). ``stop`` is called
        on a ``cancel`` answer (see the module rules)."""
        # Acquiring the lock is a checkpoint on every path, as if asked.
        if self._asking is None:
            self._asking = trio.Lock()
        async with self._asking:
            return await self._check(request, turn_id, stop)

    async def _check(
        self, request: ApprovalRequest, turn_id: str | None, stop: Callable[[], object]
    ) -> str | None:
        standing = self._standing.get(request.tool) if self._standing is not None else None
        if request.tool in self._restored and getattr(self.approver, "forget_stored", False):
            standing = None
        if standing is not None:
            self._record(request, turn_id, standing, "standing answer")
            return None if standing is Decision.ALLOW_ALWAYS else _refused(request.tool, True)
        approver = self.approver
        if approver is None:
            return (
                f"tool {request.tool!r} needs approval and nobody can be asked here; it did not "
                f"run (the program must give the agent an approver)"
            )
        by = str(getattr(approver, "name", type(approver).__name__))
        try:
            answer = await approver.approve(request)
        except Exception as exc:
            log.error("the approver of tool %r failed", request.tool, exc_info=exc)
            return f"tool {request.tool!r} was refused: asking for approval failed: {exc}"
        decision, reason = _decision(request.tool, answer)
        self._record(request, turn_id, decision, by)
        if decision in (Decision.ALLOW_ALWAYS, Decision.REJECT_ALWAYS):
            if self._standing is None:
                self._standing = {}
            self._standing[request.tool] = decision
            self._restored -= {request.tool}
        if decision in (Decision.ALLOW_ONCE, Decision.ALLOW_ALWAYS):
            return None
        if decision is Decision.CANCEL:
            stop()
            return f"the user cancelled; tool {request.tool!r} did not run"
        return reason

    def _record(
        self, request: ApprovalRequest, turn_id: str | None, decision: Decision, by: str
    ) -> None:
        self._session.append(
            ToolApproval(
                turn_id=turn_id,
                call_id=request.call_id,
                name=request.tool,
                decision=decision.value,
                by=by,
            )
        )
        tracing.approved(decision.value, by)


def _decision(tool: str, answer: object) -> tuple[Decision, str]:
    """The decision an approver's answer stands for, and the refusal text if it refuses."""
    if isinstance(answer, Refusal):
        return (Decision.REJECT_ALWAYS if answer.always else Decision.REJECT_ONCE), answer.reason
    if isinstance(answer, Decision):
        return answer, _refused(tool, answer is Decision.REJECT_ALWAYS)
    log.error("an approver answered %r for tool %r; refused", answer, tool)
    return Decision.REJECT_ONCE, (
        f"tool {tool!r} was refused: the approver answered {answer!r}, not a Decision"
    )
