"""``trio-agents chat``: a terminal conversation with one agent.

Rules:
- On a terminal (stdin and stdout both), lines come from a :class:`LineEditor`
  (``_input.py``: editing, history across runs in the sessions directory, multi-line input,
  output printed above the input line). Ctrl-C there clears the line being typed; on an
  empty line it is an interrupt, handled as below. Ctrl-D on an empty line is end of input.
- Otherwise lines come from stdin through a worker thread doing ``os.read`` on a private
  duplicate of fd 0: it never blocks trio, and an abandoned read at exit holds no Python lock
  (``sys.stdin.readline`` would). The duplicate is closed only when no read is in flight;
  otherwise it stays open for the abandoned thread, which then still reads the input it was
  started on, never whatever fd 0 becomes later.
- On a terminal, lines are read while a turn runs, so ``/steer`` and ``/cancel`` reach it and
  other text queues the next prompt (``queued: TEXT`` says so). From a pipe, each prompt is
  answered before the next line is read (so ``printf 'hi\\n/quit\\n' | trio-agents chat``
  answers, then quits).
- Ctrl-C (SIGINT, through ``trio.open_signal_receiver``): with a turn running or prompts
  queued, ``agent.cancel(UserCancel())``; at the idle prompt, exit (status 0). So the first
  Ctrl-C stops the work and the second leaves.
- End of input (or EIO: a terminal that hung up) waits for the running turn, then exits;
  ``/quit`` exits at once (disposing the agent cancels its turn with ``DisposedCancel``).
- A tool call that needs approval is asked on the terminal (:mod:`._ask`): the next input line
  is the answer, offered to the asker before anything else.
- A resumed session shows its last few exchanges first, then one line naming the standing
  ``allow_always`` approvals it restored (ignored with ``--forget-approvals``).
- ``/mode``, Shift-Tab, ``/model``, ``/clear``, ``/resume``, ``--continue``, ``/cost`` and
  ``@path`` mentions are :mod:`._chat_modes`'s; ``/clear`` and ``/resume N`` switch the chat
  to another agent (the input goes on: one reader for the whole chat), disposing the one it
  owned.
- On exit the last line says where the session is stored.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING

import trio
from rich.console import Console

from .._errors import TrioAgentsError
from ..agent import (
    Agent,
    AgentClosedError,
    AgentHandle,
    AgentStatus,
    CompactionError,
    HookRefusedError,
)
from ..cancel import UserCancel
from ..kernel import Context
from ..session import ToolCall, ToolCallEnded
from ..shell import JobDone, JobNotFoundError, job_state
from ..workspace import project_instructions
from ._ask import TerminalAsker, restored_note
from ._chat_modes import HELP as MORE_HELP
from ._chat_modes import ChatCommands, Handled, latest_here
from ._chat_view import ChatView
from ._edits import undo_last
from ._images import attached_images
from ._keys import Key
from ._logs import CliLog
from ._options import CliError, Settings, attach, open_cli_runtime, session_place, store_root
from ._tree_view import render_tree

if TYPE_CHECKING:
    from ._input import LineEditor

HELP = (
    "TEXT          send a prompt (queued while a turn runs)\n"
    "/steer TEXT   steer the running turn (its next step sees TEXT)\n"
    "/cancel       cancel the running turn and clear the queue\n"
    "/jobs         the background jobs of this agent\n"
    "/agents       this agent and the children its task calls started, live ones\n"
    "/tree         who owns what now: the runtime's ownership tree\n"
    "/undo         put back the last change a file tool made in this session\n"
    "/compact      summarize the older turns now (the session file keeps them)\n"
    f"{MORE_HELP}\n"
    "/help         this list\n"
    "/quit         leave (Ctrl-D waits for the answer first; Ctrl-C at the prompt leaves)\n"
    "a line ending with \\ (or Alt-Enter) continues on the next; Up/Down recall earlier lines"
)


async def chat(args: argparse.Namespace) -> int:
    """Talk to one agent until ``/quit``, end of input, or Ctrl-C at the prompt."""
    settings: Settings = args.settings
    console = Console(highlight=False)
    log: CliLog | None = getattr(args, "log", None)
    terminal = os.isatty(0) and os.isatty(1)
    commands = ChatCommands(models=settings.config.models)
    async with open_cli_runtime(settings) as root:
        session = args.session
        if getattr(args, "latest", False) and session is None:
            session = await latest_here(root, os.getcwd())
            if session is None:
                console.print("no stored session in this directory: a new one", style="dim")
        agent, handle = await attach(root, session, project_files=settings.project_files)
        editor = _editor(settings) if terminal else None
        with editor.screen() if editor is not None else nullcontext():
            view = ChatView(console, agent, editor)
            view.listen(root)
            forget = settings.forget_approvals
            asker = TerminalAsker(view.note, view.asked, forget_stored=forget)
            jobs: dict[str, JobDone] = {}
            root.on(JobDone, lambda event: jobs.__setitem__(event.job_id, event))
            _greet(view, agent, handle, asker)
            if log is not None:
                log.go_live()

            async def switch(old: Agent) -> Agent:
                nonlocal agent, handle
                instructions = (
                    await trio.to_thread.run_sync(project_instructions, os.getcwd())
                    if settings.project_files
                    else None
                )
                try:
                    agent, new = await commands.next_agent(root, instructions=instructions)
                except (TrioAgentsError, OSError) as exc:
                    view.note(str(exc), "red")
                    return old
                if handle is not None:
                    await handle.dispose()
                handle = new
                view.switch(agent)
                _greet(view, agent, handle, asker)
                await commands.refresh(root)
                return agent

            await commands.refresh(root)
            try:
                await _converse(
                    root,
                    agent,
                    view,
                    jobs,
                    interactive=os.isatty(0),
                    editor=editor,
                    asker=asker,
                    commands=commands,
                    switch=switch,
                )
            finally:
                if log is not None:
                    log.hold()
                view.close()
                if editor is not None:
                    await editor.aclose()
        where = session_place(root, agent.id)
        if handle is not None:
            await handle.dispose()
    console.print(f"session {agent.id}: {where}")
    return 0


def _greet(view: ChatView, agent: Agent, handle: AgentHandle | None, asker: TerminalAsker) -> None:
    """Put ``agent`` in the asker's hands and say who the chat is with (and what it resumed)."""
    agent.approver = asker
    view.mode(agent)
    owner = "" if handle is not None else " (declared in the config file)"
    view.note(f"chatting with {agent.id}{owner} on {agent.model.name}; /help for commands")
    view.history(agent.session.records)
    restored = restored_note(agent.session.records, forgotten=asker.forget_stored)
    if restored is not None:
        view.note(restored, "yellow")


def _editor(settings: Settings) -> LineEditor:
    from ._input import LineEditor, history_file  # prompt_toolkit: a terminal needs it only

    return LineEditor(history_file(store_root(settings.store)))


async def _converse(
    root: Context,
    agent: Agent,
    view: ChatView,
    jobs: dict[str, JobDone],
    *,
    interactive: bool,
    editor: LineEditor | None = None,
    asker: TerminalAsker | None = None,
    commands: ChatCommands | None = None,
    switch: Callable[[Agent], Awaitable[Agent]] | None = None,
) -> None:
    send, lines = trio.open_memory_channel[str | Key](0)
    async with trio.open_nursery() as nursery:
        if editor is not None:
            nursery.start_soon(_read_editor, send, editor)
        else:
            nursery.start_soon(_read_lines, send)
        async with lines:
            # Invariant: one reader for the whole chat; a switch only changes the agent.
            while True:
                going = await _talk(root, agent, view, jobs, lines, interactive, asker, commands)
                if not going or switch is None:
                    break
                agent = await switch(agent)
        nursery.cancel_scope.cancel()


async def _talk(
    root: Context,
    agent: Agent,
    view: ChatView,
    jobs: dict[str, JobDone],
    lines: trio.MemoryReceiveChannel[str | Key],
    interactive: bool,
    asker: TerminalAsker | None,
    commands: ChatCommands | None,
) -> bool:
    """Talk with ``agent`` until the chat ends (``False``) or switches agents (``True``)."""
    switching = False
    async with trio.open_nursery() as nursery:
        await nursery.start(_interrupts, agent, view, nursery.cancel_scope)
        view.prompt()
        async for line in lines:
            if line is Key.EOF:
                break
            if line is Key.INTERRUPT:
                if not _interrupt(agent, view):
                    nursery.cancel_scope.cancel()
                    return False
                continue
            if line is Key.MODE:
                if commands is not None:
                    commands.cycle(agent, view)
                continue
            if not interactive:
                view.echo(line)
            if asker is not None and asker.offer(line):
                if not interactive:
                    await asker.until_idle_or_asked(agent)
                continue
            going = _handle(line.strip(), root, agent, view, jobs, commands)
            if isinstance(going, Undo):
                # Awaited here, in input order: the next line sees its effect.
                async with _UNDOING:
                    view.note(await undo_last(agent))
                if not _busy(agent):
                    view.prompt()
                going = True
            if going is False:
                nursery.cancel_scope.cancel()
                return False
            if going is Handled.SWITCH:
                switching = True
                break
            if not interactive:
                await (agent.when_idle() if asker is None else asker.until_idle_or_asked(agent))
        if not switching:
            # End of input: let the running turn answer, then leave.
            await agent.when_idle()
        nursery.cancel_scope.cancel()
    return switching


def _handle(
    line: str,
    root: Context,
    agent: Agent,
    view: ChatView,
    jobs: dict[str, JobDone],
    commands: ChatCommands | None = None,
) -> bool | Handled | Undo:
    """Act on one input line; ``False`` means leave, :data:`Handled.SWITCH` go to another
    agent (see :mod:`._chat_modes`)."""
    try:
        return _act(line, root, agent, view, jobs, commands)
    except HookRefusedError as exc:  # a prompt_accepted hook vetoed the message
        view.note(str(exc), "red")
        return True


def _act(
    line: str,
    root: Context,
    agent: Agent,
    view: ChatView,
    jobs: dict[str, JobDone],
    commands: ChatCommands | None,
) -> bool | Handled | Undo:
    extra = commands.handle(line, agent, view) if commands is not None else None
    if extra is Handled.SWITCH:
        return extra
    if extra is Handled.DONE:
        if not _busy(agent):
            view.prompt()
        return True
    if isinstance(extra, str):
        line = extra
    command, _, rest = line.partition(" ")
    rest = rest.strip()
    if line and not line.startswith("/"):
        busy = _busy(agent)
        try:
            # A few local files (each at most 5 MiB), read here to keep the prompts' order.
            images = attached_images(line)
        except CliError as exc:
            view.note(str(exc), "red")  # nothing sent; the line can be typed again
            if not busy:
                view.prompt()
            return True
        agent.prompt(line, images=images)
        if busy:
            first, *more = line.splitlines()
            view.note(f"queued: {first}{' …' if more else ''} (sent when this turn ends)")
    elif command == "/quit":
        return False
    elif command == "/steer":
        if rest:
            view.note(f"steering with {agent.steer(rest)}")
        else:
            view.note("usage: /steer TEXT", "red")
    elif command == "/cancel":
        if not agent.cancel(UserCancel()):
            view.note("nothing to cancel")
    elif command == "/jobs":
        for row in _jobs(root, agent, jobs) or ["no background jobs"]:
            view.note(row)
    elif command == "/agents":
        for row in _agents(agent):
            view.note(row)
    elif command == "/tree":
        view.note(render_tree(root.snapshot(), width=view.console.width), "")
    elif command == "/undo":
        return Undo()
    elif command == "/compact":
        root.start_soon(_compact, agent, view)
    elif command == "/help":
        view.note(HELP)
    elif line:
        view.note(f"unknown command {command}; /help lists the commands", "red")
    if not _busy(agent):
        view.prompt()
    return True


#: One /undo at a time (each reads what the one before it recorded).
_UNDOING = trio.Lock()


class Undo:
    """What ``_handle`` answers for ``/undo``: the chat loop awaits it before the next line."""


async def _compact(agent: Agent, view: ChatView) -> None:
    try:
        record = await agent.compact()
    except (CompactionError, AgentClosedError) as exc:
        view.note(str(exc), "red")
        return
    if record is None:
        view.note("nothing to compact: the conversation is only its latest turns")
    else:
        view.note(f"compacted: {record.tokens_before:,} -> {record.tokens_after:,} tokens")


def _busy(agent: Agent) -> bool:
    """Whether a Ctrl-C has work to cancel: a running turn, or prompts waiting for one."""
    return agent.status is AgentStatus.RUNNING or any(m.wake for m in agent.queued())


async def _interrupts(
    agent: Agent,
    view: ChatView,
    leave: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        task_status.started()
        async for _ in interrupts:
            if not _interrupt(agent, view):
                leave.cancel()
                return


def _interrupt(agent: Agent, view: ChatView) -> bool:
    """Ctrl-C: cancel the work if there is some (``True``); ``False`` means leave."""
    if not _busy(agent):
        return False
    agent.cancel(UserCancel())
    view.note("cancelling… (Ctrl-C at the prompt leaves)", "yellow")
    return True


async def _read_editor(send: trio.MemorySendChannel[str | Key], editor: LineEditor) -> None:
    """Send each line (or key) the editor reads; end of input closes the channel."""
    async with send:
        while True:
            try:
                line = await editor.read()
            except OSError as exc:
                if exc.errno != errno.EIO:  # the terminal hung up: the end of its input
                    raise
                line = Key.EOF
            await send.send(line)
            if line is Key.EOF:
                return


async def _read_lines(send: trio.MemorySendChannel[str | Key]) -> None:
    """Send each line of stdin; close the channel at end of input."""
    pending = b""
    fd = os.dup(0)
    in_flight = False
    try:
        async with send:
            while True:
                in_flight = True
                try:
                    chunk = await trio.to_thread.run_sync(
                        os.read, fd, 65536, abandon_on_cancel=True
                    )
                except OSError as exc:
                    # EIO: the terminal hung up, which is the end of its input.
                    if exc.errno != errno.EIO:
                        raise
                    chunk = b""
                in_flight = False
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    await send.send(line.decode("utf-8", errors="replace"))
            if pending:
                await send.send(pending.decode("utf-8", errors="replace"))
    finally:
        if not in_flight:
            os.close(fd)


def _jobs(root: Context, agent: Agent, done: dict[str, JobDone]) -> list[str]:
    """One row per background job this agent started in this process.

    The session names the jobs (a ``bash`` call with ``run_in_background`` and its result, the
    job id); the executor's ``owner_of`` confirms each belongs to this agent; the ``JobDone``
    events seen say which have ended.
    """
    executor = root.get("shell")
    if executor is None:
        return []
    records = agent.session.records
    commands = {
        r.call_id: str(r.arguments.get("command", ""))
        for r in records
        if isinstance(r, ToolCall) and r.name == "bash" and r.arguments.get("run_in_background")
    }
    rows = []
    for record in records:
        if not (isinstance(record, ToolCallEnded) and record.call_id in commands):
            continue
        if record.is_error:
            continue
        job_id = record.content.strip()
        try:
            if executor.owner_of(job_id) != agent.id:
                continue
        except JobNotFoundError:
            continue  # started by an earlier process: gone with it
        ended = done.get(job_id)
        state = "running" if ended is None else job_state(ended.status, ended.exit_code)
        rows.append(f"{job_id}  {state}  {commands[record.call_id]}")
    return rows


def _agents(agent: Agent, depth: int = 0) -> list[str]:
    """``agent`` and its live children, indented by generation, each with its status."""
    turn = agent.statistics().running_turn
    running = f", turn {turn}" if turn is not None else ""
    rows = [f"{'  ' * depth}{agent.id}  {agent.status.value}{running}  {agent.model.name}"]
    for child in agent.children:
        rows.extend(_agents(child, depth + 1))
    return rows
