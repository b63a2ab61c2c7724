"""``trio-agents run PROMPT``: one prompt, the answer streamed to stdout.

Rules:
- The prompt is the argument; ``-`` reads it from stdin instead. Otherwise, text piped to stdin
  (a pipe or a file, not a terminal) is sent after the argument, separated by a blank line,
  so ``git diff | trio-agents run "review this"`` works.
- ``@path`` of an image file in the prompt attaches the image (:mod:`._images`).
- A resumed session's standing ``allow_always`` approvals are named in one stderr line
  (ignored with ``--forget-approvals``).
- On a terminal, the answer's control characters (but newline and tab) are shown as visible
  escapes (:mod:`._controls`): the model does not control the terminal. A pipe gets the text
  as it is.
- stdout carries the answer only; the spinner (a terminal only) and notes go to stderr. With
  ``--output-schema FILE`` the answer is the turn's typed answer, validated JSON on one line
  (:mod:`._output_schema`).
- A tool call that needs approval (``bash`` and ``bash_kill`` by default) is refused unless
  ``--yes`` (:mod:`._ask`); the model reads the refusal and the turn goes on, and the exit
  status is the turn's (a refusal alone does not change it).
- The exit status says how the turn ended: 0 completed; 1 error, max steps, blocked or
  stopped by a spent budget (``--max-*``; one line on stderr that says which budget and what
  was spent); 130 cancelled by Ctrl-C, which cancels the turn with ``UserCancel`` so the
  session records it.
- The store is checked at start: one that cannot be written fails the command before any
  model call. If writing the session fails later, the turn is cancelled at once, nothing more
  of the answer is printed, and the write error is the one line on stderr (status 1).
"""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
import textwrap

import trio
from rich.console import Console

from ..agent import AgentOutput
from ..cancel import UserCancel
from ..session import (
    Record,
    SessionAppended,
    SessionWriteError,
    SessionWriteFailed,
    StopReason,
    ToolCall,
    TurnEnded,
    UserMessage,
)
from ..workspace import format_plan, plan_entries
from ._ask import RunApprover, restored_note
from ._budget import budget_from, stopped_line
from ._controls import visible_controls
from ._images import read_attached_images
from ._options import CliError, Settings, attach, open_cli_runtime, session_path
from ._output_schema import accepted_json, load_output_schema


async def run(args: argparse.Namespace) -> int:
    """Run ``args.prompt`` on one agent; the exit status says how the turn ended."""
    settings: Settings = args.settings
    err = Console(stderr=True, highlight=False)
    wrote = False
    failed: SessionWriteError | None = None
    prompt = await _prompt(args.prompt)
    budget = budget_from(args)
    schema = load_output_schema(getattr(args, "output_schema", None))
    images = await read_attached_images(prompt)  # @path of an image (see _images)
    if getattr(args, "remote", None) is not None:
        if budget is not None:
            raise CliError("--max-* options are not taken with --remote (a worker runs it)")
        if schema is not None:
            raise CliError("--output-schema does not work with --remote; run the prompt here")
        from ._remote import run_remote

        return await run_remote(args, prompt)
    async with open_cli_runtime(settings) as root:
        agent, handle = await attach(
            root, args.session, project_files=settings.project_files, budget=budget
        )
        forget = settings.forget_approvals
        agent.approver = RunApprover(getattr(args, "yes", False), forget_stored=forget)
        if schema is not None:
            agent.output = schema
        restored = restored_note(agent.session.records, forgotten=forget)
        if restored is not None:
            print(f"trio-agents: {restored}", file=sys.stderr)
        status = err.status("thinking…", spinner="dots")
        shown = visible_controls if sys.stdout.isatty() else str

        def show(event: AgentOutput) -> None:
            nonlocal wrote
            if event.agent_id == agent.id and failed is None and schema is None:
                status.stop()
                wrote = True
                try:
                    sys.stdout.write(shown(event.text))
                    sys.stdout.flush()
                except BrokenPipeError:
                    # The reader is gone (``| head``): stop the turn; the last write of the
                    # command meets the closed pipe again, and the entry point ends quietly.
                    agent.cancel()

        def on_write_failed(event: SessionWriteFailed) -> None:
            nonlocal failed
            if event.session_id == agent.id and failed is None:
                failed = event.error
                status.stop()
                agent.cancel()  # an answer that cannot be kept is not worth waiting for

        def show_plan(event: SessionAppended) -> None:
            # The plan, compactly, on stderr (stdout is the answer).
            record = event.record
            if event.session_id == agent.id and isinstance(record, ToolCall):
                entries = plan_entries(record.arguments) if record.name == "plan" else None
                if entries is not None:
                    status.stop()
                    print(f"plan:\n{textwrap.indent(format_plan(entries), '  ')}", file=sys.stderr)

        root.on(AgentOutput, show)
        root.on(SessionAppended, show_plan)
        root.on(SessionWriteFailed, on_write_failed)
        message_id = agent.prompt(prompt, images=images)
        status.start()
        try:
            with trio.open_signal_receiver(signal.SIGINT) as interrupts:
                async with trio.open_nursery() as nursery:

                    async def cancel_on_interrupt() -> None:
                        async for _ in interrupts:
                            agent.cancel(UserCancel())

                    nursery.start_soon(cancel_on_interrupt)
                    await agent.when_idle()
                    nursery.cancel_scope.cancel()
        finally:
            status.stop()
        ended = _turn_of(agent.session.records, message_id)
        typed = accepted_json(agent.session.records, ended.turn_id) if ended else None
        path = session_path(root, agent.id)
        if handle is not None:
            try:
                await handle.dispose()
            except* SessionWriteError as group:
                # The flushes of the teardown raise the failure we report below, again.
                if failed is None or any(e is not failed for e in _leaves(group)):
                    raise
        if failed is not None:
            if wrote:
                sys.stdout.write("\n")
                sys.stdout.flush()
            raise failed
    if wrote:
        sys.stdout.write("\n")
        sys.stdout.flush()
    where = f" ({path})" if path is not None else ""
    stopped = stopped_line(ended.cause if ended is not None else None)
    if stopped is not None:
        print(f"trio-agents: {stopped}; session {agent.id}{where}", file=sys.stderr)
        return 1
    if ended is None or ended.stop_reason is StopReason.CANCELLED:
        print(f"trio-agents: cancelled; session {agent.id}{where}", file=sys.stderr)
        return 130
    if ended.stop_reason is StopReason.COMPLETED:
        if schema is not None:
            print(typed)
        err.print(f"[dim]session {agent.id}{where}[/dim]")
        return 0
    detail = f": {ended.error}" if ended.error else ""
    print(
        f"trio-agents: error: turn {ended.turn_id} ended with {ended.stop_reason.value}{detail}",
        file=sys.stderr,
    )
    return 1


def _leaves(group: BaseExceptionGroup[SessionWriteError]) -> list[BaseException]:
    return [
        leaf
        for e in group.exceptions
        for leaf in (_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    ]


def _piped() -> bool:
    """Whether stdin is a pipe, a socket or a file (not a terminal, not ``/dev/null``)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


async def _prompt(argument: str) -> str:
    """The prompt to send: see the module rules.

    Raises:
        CliError: ``-`` with nothing on stdin.
    """
    if argument != "-" and not _piped():
        return argument
    fd = os.dup(0)  # an abandoned read (Ctrl-C) keeps its own descriptor
    piped = await trio.to_thread.run_sync(_read_all, fd, abandon_on_cancel=True)
    os.close(fd)
    if argument != "-":
        return f"{argument}\n\n{piped.rstrip()}" if piped.strip() else argument
    if not piped.strip():
        raise CliError("'run -' reads the prompt from stdin, which was empty; pipe the prompt in")
    return piped.rstrip()


def _turn_of(records: tuple[Record, ...], message_id: str) -> TurnEnded | None:
    """How the turn that claimed ``message_id`` ended (``None``: it never ran)."""
    turn_id = next(
        (r.turn_id for r in records if isinstance(r, UserMessage) and r.message_id == message_id),
        None,
    )
    if turn_id is None:
        return None
    return next(
        (r for r in reversed(records) if isinstance(r, TurnEnded) and r.turn_id == turn_id), None
    )
