"""The ACP front end of approval: ``session/request_permission``.

Rules (permission): the bridge is the :class:`~trio_agents.agent.Approver` of the agents of its
sessions. A call that needs approval (a tool marked ``ask``, ``write_file`` and ``edit_file``,
and ``bash`` and ``bash_kill`` unless ``allow_bash``) is asked with
``session/request_permission`` (the tool call as announced: its kind, the file it touches and
the diff an edit asks for, :func:`~._protocol.tool_call_start`), offering allow once /
always and reject once / always. ``allow_*`` runs it, ``reject_*`` answers the model with an
error and the turn goes on (the ``*_always`` answers stand for the rest of the session, kept by the
agent's approval state), ``cancelled`` (or a closed connection) does not run it and ends the
turn cancelled. A ``session/cancel`` withdraws the questions of its session; an answer that is
not one of the offered options is a ``reject_once``. An allowed call is announced
``in_progress`` (``on_allowed``). A child agent of a session's agent
inherits the bridge as its approver (and its ``ask``): its calls are asked in that session.

Rules (restored answers): ``session/load`` of a session whose records hold standing
``allow_always`` answers sends one ``agent_message_chunk`` notice naming those tools, after
the replay; with ``forget_stored`` they are ignored (asked again) and the notice says so.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final, final

from ..agent import ApprovalRequest, Decision, Refusal, standing_answers
from ..session import Record
from ._client_calls import ClientCalls
from ._jsonrpc import Response
from ._prompts import AcpSession, Sessions
from ._protocol import PERMISSION_OPTIONS, tool_call_start

log = logging.getLogger("trio_agents.acp")

#: The shell's tools that change the world (``bash_output`` only reads).
_SHELL: Final = frozenset({"bash", "bash_kill"})
#: The file tools that change files (asked about unless the agent's mode says otherwise).
_WRITES: Final = frozenset({"write_file", "edit_file"})
_DECISIONS: Final = {"allow_once": Decision.ALLOW_ONCE, "allow_always": Decision.ALLOW_ALWAYS}


@final
class Permissions:
    """The ``session/request_permission`` questions of one bridge: the approver of its
    sessions' agents."""

    name = "acp client"

    def __init__(
        self,
        calls: ClientCalls,
        sessions: Sessions,
        *,
        allow_bash: bool = False,
        forget_stored: bool = False,
        on_allowed: Callable[[AcpSession, ApprovalRequest], None] | None = None,
        old_text: Callable[[AcpSession, str], Awaitable[str | None]] | None = None,
    ) -> None:
        #: What the bridge asks about besides the tools marked ``ask`` (see the seam's rules).
        self.ask: frozenset[str] = _WRITES if allow_bash else _SHELL | _WRITES
        #: Ignore the standing answers restored from a loaded session (see the seam's rules).
        self.forget_stored = forget_stored
        self._calls = calls
        self._sessions = sessions
        self._on_allowed = on_allowed
        # Reads a file's text as the call would see it (through the client when it offers
        # fs), so the diff asked about for a write is the change, not a new file.
        self._old_text = old_text
        self._tool_call_ids = itertools.count(1)

    def __len__(self) -> int:
        """How many questions await the client."""
        return self._calls.pending("session/request_permission")

    async def approve(self, request: ApprovalRequest) -> Decision | Refusal:
        """Ask the client about one call (see the module rules)."""
        session = self._session_of(request.agent_id)
        kind = "cancelled" if session is None else await self._ask(session, request)
        if kind in _DECISIONS:
            if session is not None and self._on_allowed is not None:
                self._on_allowed(session, request)
            return _DECISIONS[kind]
        if kind in ("reject_once", "reject_always"):
            return Refusal(
                f"the user rejected this call of tool {request.tool!r}; it did not run",
                always=kind == "reject_always",
            )
        # Cancelled (or the connection closed): the call does not run, the turn ends.
        if session is not None and session.prompt is not None:
            session.prompt.cancel_requested = True
        return Decision.CANCEL

    def _session_of(self, agent_id: str) -> AcpSession | None:
        """The session of ``agent_id``: its own, or for a child agent (which inherits this
        approver) the session of the agent it descends from."""
        session = self._sessions.get(agent_id)
        if session is not None:
            return session
        for candidate in self._sessions:
            family = list(candidate.agent.children)
            while family:
                child = family.pop()
                if child.id == agent_id:
                    return candidate
                family.extend(child.children)
        return None

    async def _ask(self, session: AcpSession, request: ApprovalRequest) -> str:
        call_id = request.call_id or f"guard-{next(self._tool_call_ids)}"
        call = tool_call_start(request.tool, call_id, request.arguments, session.cwd)
        if call["title"] == request.tool:  # no title of its own: the request's, arguments shown
            call["title"] = request.title
        if request.tool == "write_file" and self._old_text is not None:
            for content in call.get("content", ()):
                if content.get("type") == "diff" and content.get("oldText") is None:
                    content["oldText"] = await self._old_text(session, content["path"])
        params = {
            "sessionId": session.agent.id,
            "toolCall": call,
            "options": [dict(o) for o in PERMISSION_OPTIONS],
        }
        response = await self._calls.call(session.agent.id, "session/request_permission", params)
        return _outcome(response)


def restored_notice(records: Iterable[Record], *, forgotten: bool) -> str | None:
    """The ``agent_message`` notice of ``session/load`` naming the standing ``allow_always``
    answers restored from the session (a session file is trusted input), or ``None``."""
    tools = sorted(t for t, d in standing_answers(records).items() if d is Decision.ALLOW_ALWAYS)
    if not tools:
        return None
    names = ", ".join(tools)
    if forgotten:
        return f"[trio-agents] this session's stored 'always' approvals ({names}) are ignored.\n"
    return (
        f"[trio-agents] this session stores 'always' approvals: {names} run without asking "
        f"(trio-agents acp --forget-approvals asks again).\n"
    )


def _outcome(response: Response | None) -> str:
    """The permission option kind chosen, ``cancelled``, or ``reject_once`` for nonsense."""
    if response is None:
        return "cancelled"
    if response.error is not None:
        log.warning("session/request_permission failed: %s", response.error)
        return "reject_once"
    result = response.result
    outcome = result.get("outcome") if isinstance(result, Mapping) else None
    if not isinstance(outcome, Mapping):
        return "reject_once"
    if outcome.get("outcome") == "cancelled":
        return "cancelled"
    chosen = outcome.get("optionId")
    for option in PERMISSION_OPTIONS:
        if option["optionId"] == chosen:
            return option["kind"]
    return "reject_once"
