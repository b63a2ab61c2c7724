"""The permission guard: ask the client before ``bash`` runs in a bridge session.

Rules (permission): unless ``allow_bash``, a tool guard asks the client with
``session/request_permission`` before ``bash`` runs in a bridge session. ``allow_*`` runs it
(``allow_always`` for the rest of the session), ``reject_*`` answers the model with an error
(``reject_always`` for the rest of the session) and the turn goes on, ``cancelled`` (or a
closed connection) does not run it and ends the turn cancelled. A ``session/cancel`` withdraws
the questions of its session; an answer that is not one of the offered options is a
``reject_once``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping
from typing import Any, final

import attrs
import trio

from ..agent import ToolContext, ToolResult
from ..cancel import UserCancel
from ._jsonrpc import Response
from ._prompts import AcpSession, Sessions
from ._protocol import PERMISSION_OPTIONS
from ._serving import Serving

__all__ = ["Permissions"]

log = logging.getLogger("trio_agents.acp")


@final
@attrs.define(eq=False)
class _Waiter:
    session_id: str
    done: trio.Event = attrs.Factory(trio.Event)
    response: Response | None = None


@final
class Permissions:
    """The ``session/request_permission`` questions of one bridge, and the guard that asks."""

    def __init__(self, serving: Serving, sessions: Sessions, closed: Callable[[], bool]) -> None:
        self._serving = serving
        self._sessions = sessions
        self._closed = closed
        self._waiters: dict[int, _Waiter] = {}
        self._tool_call_ids = itertools.count(1)

    def __len__(self) -> int:
        """How many questions await the client."""
        return len(self._waiters)

    def on_response(self, response: Response) -> None:
        """The client answered one of our requests."""
        # Invariant: a response comes only to an open request (Connection drops the others),
        # and each open request has its waiter: both are dropped together (withdraw, _ask).
        waiter = self._waiters.pop(response.id)
        waiter.response = response
        waiter.done.set()

    def withdraw(self, session_id: str) -> None:
        """Stop waiting for the answers about ``session_id`` (they count as ``cancelled``)."""
        for request_id, waiter in list(self._waiters.items()):
            if waiter.session_id == session_id:
                del self._waiters[request_id]
                self._serving.rpc.abandon(request_id)
                waiter.done.set()

    def release_all(self) -> None:
        """The connection is closing: every question is answered ``cancelled``."""
        for waiter in self._waiters.values():
            waiter.done.set()

    async def guard(
        self, name: str, arguments: Mapping[str, Any], call: ToolContext
    ) -> ToolResult | None:
        """The tool guard (see the module rules); ``None`` lets the call run."""
        session = self._sessions.get(call.agent.id) if call.agent is not None else None
        if name != "bash" or session is None or session.agent is not call.agent:
            return None
        if session.policy == "allow":
            return None
        if session.policy == "reject":
            return ToolResult("the user rejected shell commands for this session", is_error=True)
        kind = await self._ask(session, arguments, call)
        if kind in ("allow_once", "allow_always"):
            if kind == "allow_always":
                session.policy = "allow"
            return None
        if kind in ("reject_once", "reject_always"):
            if kind == "reject_always":
                session.policy = "reject"
            return ToolResult("the user rejected running this command", is_error=True)
        # Cancelled (or the connection closed): the command does not run, the turn ends.
        if session.prompt is not None:
            session.prompt.cancel_requested = True
        if call.scope is not None:
            call.scope.cancel(UserCancel())
        else:
            session.agent.cancel(UserCancel(), keep_inbox=True)
        return ToolResult("the user cancelled; the command did not run", is_error=True)

    async def _ask(
        self, session: AcpSession, arguments: Mapping[str, Any], call: ToolContext
    ) -> str:
        command = arguments.get("command")
        params = {
            "sessionId": session.agent.id,
            "toolCall": {
                "toolCallId": call.call_id or f"guard-{next(self._tool_call_ids)}",
                "title": f"bash: {command}" if isinstance(command, str) else "bash",
                "kind": "execute",
                "status": "pending",
                "rawInput": dict(arguments),
            },
            "options": [dict(o) for o in PERMISSION_OPTIONS],
        }
        if self._closed():
            await trio.lowlevel.checkpoint()
            return "cancelled"
        rpc = self._serving.rpc
        request_id, frame = rpc.request("session/request_permission", params)
        waiter = self._waiters[request_id] = _Waiter(session.agent.id)
        self._serving.send(frame)
        try:
            await waiter.done.wait()
        finally:
            if self._waiters.pop(request_id, None) is not None:
                rpc.abandon(request_id)
        return _outcome(waiter.response)


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
