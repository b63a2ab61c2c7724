"""Where a foreground ``bash`` command runs: the executor, unless a front end routes it.

Rules:
- :class:`ShellRoutes` (the service ``shell_routes``, provided by ``tool_bash``) asks its
  choosers, newest first, for the calling agent; the first that answers a :class:`Terminal`
  runs that call's foreground command (the ACP bridge answers for its sessions whose client
  offers ``terminal``: the command runs in the editor's terminal). With no answer, the
  executor's ``run`` does, as it always did.
- A chooser is an effect of the fiber that added it, so a front end that goes away takes its
  route with it. The routes live with ``tool_bash``: a reload of it starts with none.
- Only foreground commands are routed, and only when the executor has no sandbox (a sandboxed
  command must not leave its sandbox for someone else's terminal). Background jobs stay with
  the executor, which owns them (their owner, their completion notice, their disposal).
- A :class:`Terminal` keeps the executor's ``run`` contract: a timeout kills the command and
  returns ``timed_out=True``; a cancelled caller stops the command before re-raising; a
  command that cannot start raises :class:`~._errors.ShellRequestError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol, final

import trio

from ..kernel import Entry, ServiceKey, current_context
from ._types import ShellExecSpec, ShellResult


class Terminal(Protocol):
    """Somewhere else a foreground command can run (an editor's terminal)."""

    async def run(self, spec: ShellExecSpec, call_id: str | None) -> ShellResult:
        """Run ``spec`` to completion for the tool call ``call_id`` (see the module rules).

        Raises:
            ShellRequestError: the command could not start there.
        """
        ...


#: ``chooser(agent) -> Terminal | None``: where the agent's foreground commands run, or
#: ``None`` to leave the choice to the next chooser.
TerminalChooser = Callable[[Any], "Terminal | None"]


@final
class ShellRoutes:
    """The service ``shell_routes``: the terminal each agent's foreground commands run in."""

    def __init__(self) -> None:
        self._choosers: list[TerminalChooser] = []

    def add_chooser(self, chooser: TerminalChooser) -> Entry:
        """Ask ``chooser`` first, for as long as the calling fiber is loaded.

        Returns:
            The calling fiber's entry; ``await entry.close()`` removes the chooser early.
        """
        entry = current_context().defer(self._remove, chooser)
        self._choosers.append(chooser)
        return entry

    async def _remove(self, chooser: TerminalChooser) -> None:
        if chooser in self._choosers:
            self._choosers.remove(chooser)
        await trio.lowlevel.checkpoint()

    def for_agent(self, agent: Any) -> Terminal | None:
        """The terminal the foreground commands of ``agent`` run in, or ``None`` (the
        executor's ``run``)."""
        for chooser in reversed(self._choosers):
            chosen = chooser(agent)
            if chosen is not None:
                return chosen
        return None


#: The key of the ``shell_routes`` service (provided by ``tool_bash``).
SHELL_ROUTES: Final[ServiceKey[ShellRoutes]] = ServiceKey("shell_routes")
