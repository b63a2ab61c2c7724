"""The command's approvers: ``chat`` asks on the terminal, ``run`` refuses unless ``--yes``.

Rules:
- :class:`TerminalAsker` shows an edit's diff with its question (``_edits.diff_lines``) and
  asks one question at a time (concurrent calls of one step wait their
  turn) and takes the next input line as the answer: ``y``/``yes`` allows once, ``a``/``always``
  allows the tool for the rest of the session, ``n``/``no`` refuses. Anything else asks again.
  The chat loop offers each line to :meth:`TerminalAsker.offer` first; it is the only hook,
  so how lines are read (a pipe, a terminal, a line editor) is not this module's business.
- A resumed session's standing ``allow_always`` answers are announced in one line
  (:func:`restored_note`); with ``forget_stored`` (``--forget-approvals``) they are ignored,
  and the line says so.
- Ctrl-C while a question is open cancels the turn (the chat's own handler); the question is
  withdrawn with it and the call does not run.
- :class:`RunApprover` never waits: with ``--yes`` every call is allowed once (recorded
  ``by="run --yes"``); without it the call is refused (a tool error result: the model reads
  why, and the turn goes on), and stderr says, in one line per tool refused the first time,
  which call was refused and how to allow it (``--yes``, or the config file's
  ``[approval] allow``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import TextIO, final

import attrs
import trio

from ..agent import Agent, ApprovalRequest, Decision, Refusal, standing_answers
from ..session import Record
from ._config import ASKED_BY_DEFAULT
from ._controls import visible_controls
from ._edits import diff_lines

#: How a diff line shown with a question is drawn, by its first character.
_DIFF_STYLES = {"+": "green", "-": "red", "@": "cyan"}

_ANSWERS = {
    "y": Decision.ALLOW_ONCE,
    "yes": Decision.ALLOW_ONCE,
    "a": Decision.ALLOW_ALWAYS,
    "always": Decision.ALLOW_ALWAYS,
    "n": Decision.REJECT_ONCE,
    "no": Decision.REJECT_ONCE,
}


@final
@attrs.define(eq=False)
class _Question:
    answered: trio.Event = attrs.Factory(trio.Event)
    answer: Decision = Decision.REJECT_ONCE


@final
class TerminalAsker:
    """The ``chat`` approver: asks on the terminal, answered by the next input line.

    Args:
        show: prints one line of its own (the chat view's ``note``), with a rich style.
        waiting: told ``True`` when a question starts waiting for its answer line and
            ``False`` when it stops (the chat's input line shows ``answer>`` meanwhile).
    """

    name = "terminal"

    def __init__(
        self,
        show: Callable[[str, str], None],
        waiting: Callable[[bool], None] | None = None,
        *,
        forget_stored: bool = False,
    ) -> None:
        #: Ignore the standing answers restored from the session (``--forget-approvals``).
        self.forget_stored = forget_stored
        self._show = show
        self._waiting = waiting if waiting is not None else _unseen
        self._lock = trio.Lock()
        self._open: _Question | None = None
        self._asked = trio.Event()

    @property
    def asking(self) -> bool:
        """Whether a question waits for its answer (one just answered does not)."""
        return self._open is not None and not self._open.answered.is_set()

    async def approve(self, request: ApprovalRequest) -> Decision:
        """Ask about ``request`` and wait for the answer line."""
        async with self._lock:
            question = self._open = _Question()
            self._asked.set()
            self._asked = trio.Event()
            for line in await diff_lines(request, os.getcwd()):
                self._show(line, _DIFF_STYLES.get(line[:1], "dim"))
            self._show(f"allow {request.title}?  [y]es / [n]o / [a]lways", "bold magenta")
            self._waiting(True)
            try:
                await question.answered.wait()
            finally:
                self._open = None
                self._waiting(False)
            return question.answer

    def offer(self, line: str) -> bool:
        """Take ``line`` as the answer to the open question; ``False`` when none is open
        (the line is the chat's)."""
        question = self._open
        if question is None or question.answered.is_set():
            return False
        answer = _ANSWERS.get(line.strip().lower())
        if answer is None:
            self._show("answer y (yes, once), n (no) or a (always, for this session)", "magenta")
            return True
        question.answer = answer
        question.answered.set()
        return True

    async def until_idle_or_asked(self, agent: Agent) -> None:
        """Wait until ``agent`` is idle or a question waits for its answer (input from a
        pipe is read one prompt at a time, and the answer is the next line)."""
        if self.asking:
            await trio.lowlevel.checkpoint()
            return
        async with trio.open_nursery() as nursery:

            async def idle() -> None:
                await agent.when_idle()
                nursery.cancel_scope.cancel()

            async def asked() -> None:
                await self._asked.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(idle)
            nursery.start_soon(asked)


@final
class RunApprover:
    """The ``run`` approver: allow with ``--yes``, else refuse and say so on stderr."""

    def __init__(
        self, yes: bool, err: TextIO | None = None, *, forget_stored: bool = False
    ) -> None:
        #: Ignore the standing answers restored from the session (``--forget-approvals``).
        self.forget_stored = forget_stored
        self.yes = yes
        self.name = "run --yes" if yes else "run"
        self._err = err
        self._said: set[str] = set()

    async def approve(self, request: ApprovalRequest) -> Decision | Refusal:
        """Answer at once (see the module rules)."""
        await trio.lowlevel.checkpoint()
        if self.yes:
            return Decision.ALLOW_ONCE
        if request.tool not in self._said:
            self._said.add(request.tool)
            err = self._err if self._err is not None else sys.stderr
            config = (
                f", or add {request.tool!r} to the config file's [approval] allow"
                if request.tool in ASKED_BY_DEFAULT
                else ""
            )
            title = visible_controls(request.title) if err.isatty() else request.title
            print(
                f"trio-agents: refused {title} (tool {request.tool!r} needs approval); "
                f"run with --yes to allow it{config}",
                file=err,
                flush=True,
            )
        return Refusal(
            f"refused: tool {request.tool!r} needs approval and 'trio-agents run' asks nobody; "
            f"it did not run (run with --yes to allow it)"
        )


def restored_note(records: Iterable[Record], *, forgotten: bool) -> str | None:
    """The one line that says which standing approvals a resumed session restored (a session
    file is trusted input: the user should know what runs unasked), or ``None``."""
    tools = sorted(t for t, d in standing_answers(records).items() if d is Decision.ALLOW_ALWAYS)
    if not tools:
        return None
    names = visible_controls(", ".join(tools))  # from the session file, which anyone may edit
    if forgotten:
        return f"the session's stored 'always' approvals ({names}) are ignored: asked again"
    return (
        f"stored in the session: 'always' approvals of {names}, which run unasked "
        f"(--forget-approvals asks again)"
    )


def _unseen(waiting: bool) -> None:
    """The ``waiting`` of an asker nobody watches."""
