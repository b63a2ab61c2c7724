"""``trio-agents chat``: a terminal conversation with one agent.

Rules:
- Lines come from stdin through a worker thread doing ``os.read`` on a private duplicate of
  fd 0: it never blocks trio, and an abandoned read at exit holds no Python lock
  (``sys.stdin.readline`` would). The duplicate is closed only when no read is in flight;
  otherwise it stays open for the abandoned thread, which then still reads the input it was
  started on, never whatever fd 0 becomes later.
- On a terminal, lines are read while a turn runs, so ``/steer`` and ``/cancel`` reach it and
  other text queues the next prompt. From a pipe, each prompt is answered before the next
  line is read (so ``printf 'hi\\n/quit\\n' | trio-agents chat`` answers, then quits).
- Ctrl-C (SIGINT, through ``trio.open_signal_receiver``): with a turn running or prompts
  queued, ``agent.cancel(UserCancel())``; at the idle prompt, exit (status 0). So the first
  Ctrl-C stops the work and the second leaves.
- End of input (or EIO: a terminal that hung up) waits for the running turn, then exits;
  ``/quit`` exits at once (disposing the agent cancels its turn with ``DisposedCancel``).
- On exit the last line says where the session is stored.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal

import trio
from rich.console import Console

from ..agent import Agent, AgentStatus
from ..cancel import UserCancel
from ..kernel import Context
from ..session import ToolCall, ToolCallEnded
from ..shell import JobDone, JobNotFoundError, job_state
from ._chat_view import ChatView
from ._logs import CliLog
from ._options import Settings, attach, open_cli_runtime, session_path

__all__ = ["chat"]

HELP = (
    "TEXT          send a prompt (queued while a turn runs)\n"
    "/steer TEXT   steer the running turn (its next step sees TEXT)\n"
    "/cancel       cancel the running turn and clear the queue\n"
    "/jobs         the background jobs of this agent\n"
    "/help         this list\n"
    "/quit         leave (Ctrl-D waits for the answer first; Ctrl-C at the prompt leaves)"
)


async def chat(args: argparse.Namespace) -> int:
    """Talk to one agent until ``/quit``, end of input, or Ctrl-C at the prompt."""
    settings: Settings = args.settings
    console = Console(highlight=False)
    log: CliLog | None = getattr(args, "log", None)
    async with open_cli_runtime(settings) as root:
        agent, handle = await attach(root, args.session)
        view = ChatView(console, agent)
        view.listen(root)
        jobs: dict[str, JobDone] = {}
        root.on(JobDone, lambda event: jobs.__setitem__(event.job_id, event))
        path = session_path(root, agent.id)
        owner = "" if handle is not None else " (declared in the config file)"
        view.note(f"chatting with {agent.id}{owner} on {agent.model.name}; /help for commands")
        if log is not None:
            log.go_live()
        try:
            await _converse(root, agent, view, jobs, interactive=os.isatty(0))
        finally:
            if log is not None:
                log.hold()
            view.close()
        if handle is not None:
            await handle.dispose()
    where = str(path) if path is not None else "memory only (--store memory): not kept"
    console.print(f"session {agent.id}: {where}")
    return 0


async def _converse(
    root: Context, agent: Agent, view: ChatView, jobs: dict[str, JobDone], *, interactive: bool
) -> None:
    send, lines = trio.open_memory_channel[str](0)
    async with trio.open_nursery() as nursery:
        await nursery.start(_interrupts, agent, view, nursery.cancel_scope)
        nursery.start_soon(_read_lines, send)
        view.prompt()
        async with lines:
            async for line in lines:
                if not interactive:
                    view.echo(line)
                if not _handle(line.strip(), root, agent, view, jobs):
                    nursery.cancel_scope.cancel()
                    return
                if not interactive:
                    await agent.when_idle()
        # End of input: let the running turn answer, then leave.
        await agent.when_idle()
        nursery.cancel_scope.cancel()


def _handle(
    line: str, root: Context, agent: Agent, view: ChatView, jobs: dict[str, JobDone]
) -> bool:
    """Act on one input line; ``False`` means leave."""
    command, _, rest = line.partition(" ")
    rest = rest.strip()
    if line and not line.startswith("/"):
        agent.prompt(line)
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
    elif command == "/help":
        view.note(HELP)
    elif line:
        view.note(f"unknown command {command}; /help lists the commands", "red")
    if not _busy(agent):
        view.prompt()
    return True


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
            if _busy(agent):
                agent.cancel(UserCancel())
                view.note("cancelling… (Ctrl-C at the prompt leaves)", "yellow")
            else:
                leave.cancel()
                return


async def _read_lines(send: trio.MemorySendChannel[str]) -> None:
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
