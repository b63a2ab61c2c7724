"""What ``chat`` shows: the agent's live events rendered on a rich console.

Rules:
- Everything is drawn from events (``AgentOutput`` streamed as it arrives; ``SessionAppended``
  for tool calls, notices and the end of each turn; ``AgentStatusChanged`` for the prompt),
  in the emitter's task, synchronously: nothing here waits.
- The spinner runs while the agent waits for its model (from the start of a turn, and again
  after each tool result) and stops at the first text, a tool call, or the end of the turn.
- A tool call is one line, its name and JSON arguments (``→ bash {"command": "ls"}``); its
  result another, the first line and how many more (``← bin  (+3 lines)``).
- A turn that did not complete says so in one line: ``turn t-2 cancelled (UserCancel)``.
- With a :class:`LineEditor` (a terminal), nothing is drawn on the input line: what is final
  is printed above it, and what is still changing (the answer's unfinished block, the
  spinner's status) is the editor's live area. The answer is printed a Markdown block at a
  time (a blank line outside a code fence ends one), rendered by rich; each turn ends with its
  token usage and the running total, dimmed. Without an editor (a pipe) the text is plain,
  streamed as it arrives.
- Steered and queued answers, and every note, start on a line of their own.
- On a terminal, the control characters (but newline and tab) of what is shown, model and
  tool text included, are visible escapes (:mod:`._controls`); a pipe gets the text as is.
"""

from __future__ import annotations

import json
import textwrap
from typing import TYPE_CHECKING, final

from rich.console import Console
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from ..agent import (
    Agent,
    AgentOutput,
    AgentStatus,
    AgentStatusChanged,
    AgentUsage,
    TaskEnded,
    TaskStarted,
)
from ..kernel import Context, PluginReloaded
from ..session import (
    AssistantMessage,
    Compacted,
    InboxSpliced,
    SessionAppended,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from ..workspace import format_plan, plan_entries
from ._budget import stopped_line
from ._controls import visible_controls

if TYPE_CHECKING:
    from ._input import LineEditor

PROMPT = "you> "
THINKING = "thinking… (Ctrl-C cancels)"
# How many lines of an unfinished block the live area shows (the rest is printed when done).
_LIVE_LINES = 8


@final
class ChatView:
    """Renders one agent's conversation."""

    def __init__(self, console: Console, agent: Agent, editor: LineEditor | None = None) -> None:
        self.console = console
        # Text from the model or a tool reaches a terminal with its controls made visible.
        self._clean = visible_controls if console.is_terminal else str
        self._agent = agent
        self._agent_id = agent.id
        self._editor = editor
        self._status: Status | None = None
        self._midline = False
        self._pending = ""  # with an editor: the answer's text not printed yet
        self._thinking = False
        self._asked = False
        self._working = False  # with an editor: from a turn's start until the agent is idle
        self._usage_at_start = AgentUsage()
        # The children (and theirs) the agent's task calls started: how deep each is.
        self._depth: dict[str, int] = {}

    def switch(self, agent: Agent) -> None:
        """Show ``agent``'s conversation from now on (``/clear``, ``/resume``)."""
        self._stop_spinner()
        self._agent = agent
        self._agent_id = agent.id
        self._pending = ""
        self._usage_at_start = agent.usage

    def listen(self, root: Context) -> None:
        """Subscribe to the events this view draws (entries of ``root``'s fiber)."""
        root.on(AgentOutput, self._on_output)
        root.on(SessionAppended, self._on_record)
        root.on(AgentStatusChanged, self._on_status)
        root.on(PluginReloaded, self._on_reload)
        root.on(TaskStarted, self._on_task)
        root.on(TaskEnded, self._on_task_ended)

    # -- the parts -------------------------------------------------------------------------

    def prompt(self) -> None:
        """Show that the agent is idle and waiting for the user."""
        if self._editor is not None:  # its input line is always there: it says idle
            self._working = False
            self._live()
            return
        self._end_line()
        self.console.print(Text(PROMPT, style="bold cyan"), end="")
        self._midline = True

    def echo(self, line: str) -> None:
        """Show a line the terminal did not echo (input from a pipe)."""
        self.console.print(Text(line), soft_wrap=True)
        self._midline = False

    def note(self, text: str, style: str = "dim") -> None:
        """A line of its own, outside the conversation (above an answer still streaming)."""
        self._stop_spinner()
        if self._editor is None:
            self._end_line()
        self.console.print(Text(self._clean(text), style=style))

    def close(self) -> None:
        """Stop the spinner and finish the current line."""
        self._stop_spinner()
        self._end_line()

    def history(self, records: tuple[object, ...], exchanges: int = 3) -> None:
        """Show the last ``exchanges`` prompts of a resumed session, each with its answer."""
        shown: list[tuple[str, str]] = []
        for record in records:
            if isinstance(record, UserMessage):
                shown.append((record.content, ""))
            elif isinstance(record, AssistantMessage) and shown and record.content:
                prompt, answer = shown[-1]
                shown[-1] = (prompt, f"{answer}\n{record.content}" if answer else record.content)
        if not shown:
            return
        earlier = len(shown) - exchanges
        more = f" ({earlier} earlier not shown; trio-agents sessions show)" if earlier > 0 else ""
        self.note(f"resumed; the last exchanges{more}:")
        for prompt, answer in shown[-exchanges:]:
            said = Text(self._clean(prompt))
            self.console.print(Text(PROMPT, style="bold cyan") + said, soft_wrap=True)
            if answer:
                self._print_answer(answer)

    def _print_answer(self, text: str) -> None:
        text = self._clean(text)
        if self._editor is not None and self.console.is_terminal:
            self.console.print(Markdown(text, justify="default"))
        else:
            self.console.print(Text(text, style="green"), soft_wrap=True)

    def _live(self) -> None:
        if self._editor is not None:
            tail = "\n".join(self._pending.splitlines()[-_LIVE_LINES:])
            status = THINKING if self._thinking and not self._asked else ""
            self._editor.show(tail, status, busy=self._working, asked=self._asked)

    def mode(self, agent: Agent) -> None:
        """Show the agent's mode before the input line's prompt (none for the first mode)."""
        if self._editor is not None:
            self._editor.badge("" if agent.mode.id == "ask" else agent.mode.id)

    def asked(self, waiting: bool) -> None:
        """A question waits for the next line (``True``), or no longer (``False``): the
        input line's prompt says so."""
        self._asked = waiting
        self._live()

    def _start_spinner(self) -> None:
        if self._editor is not None:
            self._thinking = True
            self._live()
            return
        if self._status is None:
            self._end_line()
            self._status = self.console.status("thinking… (Ctrl-C cancels)", spinner="dots")
            self._status.start()

    def _stop_spinner(self) -> None:
        if self._thinking:
            self._thinking = False
            self._live()
        if self._status is not None:
            self._status.stop()
            self._status = None

    def _end_line(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, ""
            self._print_answer(pending)
            self._live()
        if self._midline:
            self.console.print()
            self._midline = False

    # -- the listeners ---------------------------------------------------------------------

    def _on_output(self, event: AgentOutput) -> None:
        if event.agent_id != self._agent_id or not event.text:
            return
        self._stop_spinner()
        text = self._clean(event.text)
        if self._editor is not None:
            self._pending += text
            done, self._pending = split_blocks(self._pending)
            if done:
                self._print_answer(done)
            self._live()
            return
        self.console.print(Text(text, style="green"), end="", soft_wrap=True)
        self._midline = not text.endswith("\n")

    def _on_record(self, event: SessionAppended) -> None:
        if event.session_id != self._agent_id:
            depth = self._depth.get(event.session_id)
            if depth is not None:
                self._child_record(event.record, "  " * depth)
            return
        record = event.record
        if isinstance(record, TurnStarted):
            if self._editor is None:
                self._midline = False  # the user's Enter ended the prompt's line
            self._end_line()
            self._usage_at_start = self._agent.usage
            self._working = True
            self._start_spinner()
        elif isinstance(record, ToolCall) and record.name == "plan":
            entries = plan_entries(record.arguments)
            shown = format_plan(entries) if entries is not None else "(not a plan)"
            self.note("→ plan\n" + textwrap.indent(shown, "  "), "yellow")
        elif isinstance(record, ToolCall):
            args = json.dumps(dict(record.arguments), ensure_ascii=False, default=str)
            self.note(
                f"→ {record.name} {args}" if record.arguments else f"→ {record.name}", "yellow"
            )
        elif isinstance(record, ToolCallEnded):
            lines = record.content.splitlines() or [""]
            more = f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
            self.note(f"← {lines[0]}{more}", "red" if record.is_error else "dim yellow")
            self._start_spinner()
        elif isinstance(record, InboxSpliced) and record.op == "add" and not record.wake:
            self.note(f"notice for the agent: {record.content}")
        elif isinstance(record, AssistantMessage):
            self._end_line()  # so the next step's answer (a steered one) starts on its own line
        elif isinstance(record, Compacted) and record.turn_id is not None:
            # An automatic compaction (one asked for with /compact is reported by it).
            self.note(
                f"compacted the older turns to fit the context window: "
                f"{record.tokens_before:,} -> {record.tokens_after:,} tokens "
                f"(the session file keeps them)"
            )
        elif isinstance(record, TurnEnded):
            self._stop_spinner()
            self._end_line()
            if record.stop_reason is not StopReason.COMPLETED:
                self.note(_ending(record), "red" if record.error else "yellow")
            if self._editor is not None:
                self.note(_usage(self._usage_at_start, self._agent.usage))

    def _on_task(self, event: TaskStarted) -> None:
        depth = 0 if event.agent_id == self._agent_id else self._depth.get(event.agent_id)
        if depth is None:
            return
        self._depth[event.child_id] = depth + 1
        how = " in the background" if event.background else ""
        self.note(f"{'  ' * (depth + 1)}↳ {event.definition} {event.child_id} started{how}", "cyan")

    def _on_task_ended(self, event: TaskEnded) -> None:
        depth = self._depth.pop(event.child_id, None)
        if depth is not None:
            why = f" by {event.cause!r}" if event.cause is not None else ""
            state = f"{event.stop_reason.value}{why}"
            style = "cyan" if event.stop_reason is StopReason.COMPLETED else "yellow"
            self.note(f"{'  ' * depth}↳ {event.child_id} ended {state}", style)

    def _child_record(self, record: object, indent: str) -> None:
        """A child's work, as indented lines: its tool calls and what it said."""
        if isinstance(record, ToolCall):
            args = json.dumps(dict(record.arguments), ensure_ascii=False, default=str)
            self.note(f"{indent}  → {record.name} {args}", "yellow")
        elif isinstance(record, ToolCallEnded):
            first = (record.content.splitlines() or [""])[0]
            self.note(f"{indent}  ← {first}", "red" if record.is_error else "dim yellow")
        elif isinstance(record, AssistantMessage) and record.content:
            lines = record.content.splitlines()
            more = f"  (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
            self.note(f"{indent}  {lines[0]}{more}", "green")

    def _on_status(self, event: AgentStatusChanged) -> None:
        if event.agent_id == self._agent_id and event.new is AgentStatus.IDLE:
            self.prompt()

    def _on_reload(self, event: PluginReloaded) -> None:
        self.note(f"reloaded plugin {event.plugin} from {event.module}")


def split_blocks(text: str) -> tuple[str, str]:
    """``text`` cut after its last finished Markdown block: ``(finished, unfinished)``.

    A block ends at a blank line outside a fenced code block, or with the line that closes a
    fence; the unfinished part is what may still change how the finished part renders.
    """
    cut = 0
    fenced = False
    position = 0
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        position += len(line)
        if not line.endswith("\n"):
            break  # still streaming
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            if not fenced:
                cut = position
        elif not fenced and not line.strip() and index > 0:
            cut = position
    return text[:cut].strip("\n"), text[cut:]


def _usage(before: AgentUsage, after: AgentUsage) -> str:
    turn_in = after.input_tokens - before.input_tokens
    turn_out = after.output_tokens - before.output_tokens
    return (
        f"tokens: {turn_in} in, {turn_out} out · session {after.input_tokens} in, "
        f"{after.output_tokens} out ({after.requests} requests)"
    )


def _ending(record: TurnEnded) -> str:
    stopped = stopped_line(record.cause)
    if stopped is not None:
        return f"turn {record.turn_id} {stopped}"
    text = f"turn {record.turn_id} {record.stop_reason.value}"
    if record.cause is not None:
        text += f" ({type(record.cause).__name__})"
    if record.error:
        text += f": {record.error}"
    return text
