"""What ``chat`` shows: the agent's live events rendered on a rich console.

Rules:
- Everything is drawn from events (``AgentOutput`` streamed as it arrives; ``SessionAppended``
  for tool calls, notices and the end of each turn; ``AgentStatusChanged`` for the prompt),
  in the emitter's task, synchronously: nothing here waits.
- The spinner runs while the agent waits for its model (from the start of a turn, and again
  after each tool result) and stops at the first text, a tool call, or the end of the turn.
- A turn that did not complete says so in one line: ``turn t-2 cancelled (UserCancel)``.
"""

from __future__ import annotations

from typing import final

from rich.console import Console
from rich.status import Status
from rich.text import Text

from ..agent import Agent, AgentOutput, AgentStatus, AgentStatusChanged
from ..kernel import Context, PluginReloaded
from ..session import (
    InboxSpliced,
    SessionAppended,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
)

__all__ = ["ChatView"]

PROMPT = "you> "


@final
class ChatView:
    """Renders one agent's conversation."""

    def __init__(self, console: Console, agent: Agent) -> None:
        self.console = console
        self._agent_id = agent.id
        self._status: Status | None = None
        self._midline = False

    def listen(self, root: Context) -> None:
        """Subscribe to the events this view draws (entries of ``root``'s fiber)."""
        root.on(AgentOutput, self._on_output)
        root.on(SessionAppended, self._on_record)
        root.on(AgentStatusChanged, self._on_status)
        root.on(PluginReloaded, self._on_reload)

    # -- the parts -------------------------------------------------------------------------

    def prompt(self) -> None:
        """Show that the agent is idle and waiting for the user."""
        self._end_line()
        self.console.print(Text(PROMPT, style="bold cyan"), end="")
        self._midline = True

    def echo(self, line: str) -> None:
        """Show a line the terminal did not echo (input from a pipe)."""
        self.console.print(Text(line), soft_wrap=True)
        self._midline = False

    def note(self, text: str, style: str = "dim") -> None:
        """A line of its own, outside the conversation."""
        self._stop_spinner()
        self._end_line()
        self.console.print(Text(text, style=style))

    def close(self) -> None:
        """Stop the spinner and finish the current line."""
        self._stop_spinner()
        self._end_line()

    def _start_spinner(self) -> None:
        if self._status is None:
            self._end_line()
            self._status = self.console.status("thinking… (Ctrl-C cancels)", spinner="dots")
            self._status.start()

    def _stop_spinner(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_line(self) -> None:
        if self._midline:
            self.console.print()
            self._midline = False

    # -- the listeners ---------------------------------------------------------------------

    def _on_output(self, event: AgentOutput) -> None:
        if event.agent_id != self._agent_id or not event.text:
            return
        self._stop_spinner()
        self.console.print(Text(event.text, style="green"), end="", soft_wrap=True)
        self._midline = not event.text.endswith("\n")

    def _on_record(self, event: SessionAppended) -> None:
        if event.session_id != self._agent_id:
            return
        record = event.record
        if isinstance(record, TurnStarted):
            self._midline = False  # the user's Enter ended the prompt's line
            self._start_spinner()
        elif isinstance(record, ToolCall):
            args = ", ".join(f"{k}={v!r}" for k, v in record.arguments.items())
            self.note(f"→ {record.name}({args})", "yellow")
        elif isinstance(record, ToolCallEnded):
            lines = record.content.splitlines() or [""]
            more = f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
            self.note(f"← {lines[0]}{more}", "red" if record.is_error else "dim yellow")
            self._start_spinner()
        elif isinstance(record, InboxSpliced) and record.op == "add" and not record.wake:
            self.note(f"notice for the agent: {record.content}")
        elif isinstance(record, TurnEnded):
            self._stop_spinner()
            self._end_line()
            if record.stop_reason is not StopReason.COMPLETED:
                self.note(_ending(record), "red" if record.error else "yellow")

    def _on_status(self, event: AgentStatusChanged) -> None:
        if event.agent_id == self._agent_id and event.new is AgentStatus.IDLE:
            self.prompt()

    def _on_reload(self, event: PluginReloaded) -> None:
        self.note(f"reloaded plugin {event.plugin} from {event.module}")


def _ending(record: TurnEnded) -> str:
    text = f"turn {record.turn_id} {record.stop_reason.value}"
    if record.cause is not None:
        text += f" ({type(record.cause).__name__})"
    if record.error:
        text += f": {record.error}"
    return text
