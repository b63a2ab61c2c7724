"""The ACP client's terminals: a session's foreground ``bash`` commands run in its editor.

Rules:
- When the client announced ``terminal: true``, a foreground ``bash`` of a session's agent (or
  of its children) runs through ``terminal/create`` (``/bin/sh -c COMMAND`` in the call's
  ``cwd``, the output bounded by the executor's cap), and the call's ``tool_call_update``
  carries the terminal as ``{"type": "terminal", "terminalId": ...}`` content from then on
  (its end too), so the editor shows the live output. Then ``terminal/wait_for_exit``, then
  ``terminal/output`` for the text the model reads, then ``terminal/release``.
- A timeout sends ``terminal/kill`` before the output is read (``timed_out``). A cancelled
  call (``session/cancel``, the session closed or the connection gone) sends ``terminal/kill``
  and ``terminal/release`` without waiting for their answers, before it re-raises: every
  terminal created is released, on every path.
- A client's error answer to ``terminal/create`` (or none at all) means the command did not
  start: :class:`~trio_agents.shell.ShellRequestError`, which the model reads. An error
  answer later is the command's output (``[the editor's terminal failed: ...]``).
- Background jobs (``run_in_background``) never come here: the executor owns them, their
  completion notice and their disposal (see :mod:`trio_agents.shell`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from typing import Any, Final, final

import trio

from ..shell import JobStatus, ShellExecSpec, ShellRequestError, ShellResult
from ._client_calls import ClientCalls
from ._jsonrpc import Response

#: The line that stands for the output the client's terminal dropped (it says not how much).
_DROPPED: Final = "[... earlier output dropped by the editor's terminal (over the output cap) ...]"


def offers_terminal(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether the client announced ``terminal: true``."""
    return capabilities is not None and capabilities.get("terminal") is True


def terminal_content(terminal_id: str) -> dict[str, Any]:
    """The ``terminal`` tool call content that embeds a client's terminal."""
    return {"type": "terminal", "terminalId": terminal_id}


def _exit_code(status: object) -> int | None:
    """The exit code of an ACP exit status: negative for the signal that ended it."""
    if not isinstance(status, Mapping):
        return None
    code = status.get("exitCode")
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    name = status.get("signal")
    if isinstance(name, str):
        try:
            return -signal.Signals[name if name.startswith("SIG") else f"SIG{name}"].value
        except KeyError:
            return None
    return None


def _failure(what: str, response: Response | None) -> str | None:
    """Why a response is no answer (``None``: it is one)."""
    if response is None:
        return f"the editor gave no answer to terminal/{what}"
    if response.error is not None:
        return f"the editor's terminal failed: {response.error.get('message')}"
    return None


@final
class ClientTerminal:
    """The terminals of one ACP session (a :class:`~trio_agents.shell.Terminal`).

    Args:
        calls: the bridge's requests to the client.
        session_id: the session.
        on_created: ``on_created(call_id, terminal_id)`` when a call's terminal exists.
    """

    def __init__(
        self,
        calls: ClientCalls,
        session_id: str,
        on_created: Callable[[str | None, str], None],
    ) -> None:
        self._calls = calls
        self._session_id = session_id
        self._on_created = on_created

    def _params(self, terminal_id: str) -> dict[str, Any]:
        return {"sessionId": self._session_id, "terminalId": terminal_id}

    async def run(self, spec: ShellExecSpec, call_id: str | None) -> ShellResult:
        """Run ``spec`` in a new terminal of the client (see the module rules)."""
        params = {
            "sessionId": self._session_id,
            "command": "/bin/sh",
            "args": ["-c", spec.command],
            "cwd": spec.cwd,
            "outputByteLimit": spec.output_cap,
        }
        created = await self._calls.call(self._session_id, "terminal/create", params)
        problem = _failure("create", created)
        result = created.result if created is not None else None
        terminal_id = result.get("terminalId") if isinstance(result, Mapping) else None
        if problem is None and not isinstance(terminal_id, str):
            problem = "the editor answered terminal/create without a terminalId"
        if problem is not None or not isinstance(terminal_id, str):
            await trio.lowlevel.checkpoint_if_cancelled()
            raise ShellRequestError(f"{problem}; the command did not run")
        done = False
        try:
            self._on_created(call_id, terminal_id)
            outcome = await self._wait(spec, terminal_id)
            done = True
        finally:
            if not done:  # cancelled, or a bug: the terminal must not outlive the call
                self._calls.send(self._session_id, "terminal/kill", self._params(terminal_id))
            self._calls.send(self._session_id, "terminal/release", self._params(terminal_id))
        return outcome

    async def _wait(self, spec: ShellExecSpec, terminal_id: str) -> ShellResult:
        params = self._params(terminal_id)
        session_id = self._session_id
        timeout = spec.timeout if spec.timeout is not None else float("inf")
        exited: Response | None = None
        with trio.move_on_after(timeout) as timer:
            exited = await self._calls.call(session_id, "terminal/wait_for_exit", params)
        if timer.cancelled_caught:
            await self._calls.call(session_id, "terminal/kill", params)
        elif exited is None:
            # Withdrawn by a session/cancel (whose cancel reaches us here), or the connection
            # is gone.
            await trio.lowlevel.checkpoint_if_cancelled()
        output = await self._calls.call(session_id, "terminal/output", params)
        await trio.lowlevel.checkpoint_if_cancelled()
        timed_out = timer.cancelled_caught
        problem = _failure("output", output)
        if problem is not None or output is None:
            return ShellResult(f"[{problem}]", None, JobStatus.KILLED, timed_out=timed_out)
        result = output.result if isinstance(output.result, Mapping) else {}
        text = result.get("output")
        text = text if isinstance(text, str) else ""
        if result.get("truncated") is True:
            text = f"{_DROPPED}\n{text}"
        status = result.get("exitStatus")
        if status is None and exited is not None:
            status = exited.result
        return ShellResult(
            text,
            _exit_code(status),
            # As the executor says it: killed only when we stopped it.
            JobStatus.KILLED if timed_out else JobStatus.EXITED,
            timed_out=timed_out,
        )
