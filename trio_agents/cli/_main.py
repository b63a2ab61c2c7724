"""Entry point of the ``trio-agents`` command.

Exit statuses: 0 success; 1 an error (one readable line on stderr, never a traceback, for
anything the user got wrong: a usage mistake, with a "did you mean" when an option or command
is close (``_usage.py``), an unknown session, an invalid model spec or config file, a plugin
whose teardown failed); 130 interrupted or
cancelled with Ctrl-C; 143 SIGTERM; 129 SIGHUP (``_signals.py`` says how each tears down);
141 (128 + SIGPIPE, as the shell reports a Unix tool that SIGPIPE ended) when the reader of
stdout closed it (``trio-agents sessions show ID | head``), quietly: no line on stderr.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import select
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

import trio

from .._errors import TrioAgentsError
from ._budget import add_budget_options
from ._logs import CliLog
from ._options import common_parents, settings_from
from ._signals import Terminated, Termination, guarded, stoppable
from ._stdout import PipedStdout
from ._usage import Parser, version

#: The statuses of a command that Ctrl-C or a stop signal ended: its output is not waited for.
_STOPPED = frozenset(128 + s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
#: The status of a command whose stdout was closed by its reader (``| head``): 128 + SIGPIPE,
#: what the shell reports for a Unix tool that SIGPIPE ended.
_CLOSED_STDOUT = 128 + signal.SIGPIPE


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="trio-agents",
        description="Long-lived LLM agents on trio, with one owner for every piece of work.",
        epilog="Common options go after the subcommand: trio-agents chat --store memory",
    )
    parser.add_argument("--version", action="version", version=f"trio-agents {version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    runtime = common_parents(model=True, watch=True)
    acp = commands.add_parser(
        "acp", parents=runtime, help="serve agents over the Agent Client Protocol on stdio"
    )
    acp.add_argument(
        "--allow-bash",
        action="store_true",
        help="run shell commands without asking the client for permission",
    )

    chat = commands.add_parser(
        "chat",
        parents=runtime,
        help="a conversation with one agent in the terminal",
        description="Talk to one agent. Ctrl-C cancels a running turn; at the prompt it exits. "
        "Commands: /steer TEXT, /jobs, /cancel, /mode, /model, /clear, /resume, /cost, "
        "/help, /quit (Shift-Tab cycles the modes; @path attaches a file).",
    )
    which = chat.add_mutually_exclusive_group()
    which.add_argument("--session", default=None, help="resume (or create) this session id")
    which.add_argument(
        "--continue",
        dest="latest",
        action="store_true",
        help="resume the most recently updated session of this directory",
    )

    commands.add_parser(
        "demo", parents=common_parents(model=True), help="show the agent lifecycle end to end"
    )

    run = commands.add_parser("run", parents=runtime, help="run one prompt and print the answer")
    run.add_argument(
        "prompt",
        help="the prompt text; '-' reads it from stdin, and text piped to stdin is sent after it",
    )
    run.add_argument("--session", default=None, help="resume (or create) this session id")
    run.add_argument(
        "--remote",
        default=None,
        metavar="DSN",
        help="submit the prompt to the work queue in this PostgreSQL database (a worker runs it)",
    )
    run.add_argument(
        "--yes", action="store_true", help="allow the tool calls that need approval, unasked"
    )
    run.add_argument(
        "--output-schema",
        default=None,
        metavar="FILE",
        help="answer with JSON validated by the JSON Schema in FILE (printed on stdout)",
    )
    add_budget_options(run)

    stored = common_parents()
    sessions = commands.add_parser("sessions", help="manage stored sessions")
    sessions_commands = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = sessions_commands.add_parser("list", parents=stored, help="list stored sessions")
    listing.add_argument(
        "--json", action="store_true", help="one JSON object per session, one per line"
    )
    show = sessions_commands.add_parser(
        "show", parents=stored, help="print a session's conversation"
    )
    show.add_argument("id")
    show.add_argument(
        "--full", action="store_true", help="print long messages whole (not shortened)"
    )
    show.add_argument(
        "--json", action="store_true", help="print the records as JSON lines, one per record"
    )
    delete = sessions_commands.add_parser("delete", parents=stored, help="delete a stored session")
    delete.add_argument("id")
    repair = sessions_commands.add_parser(
        "repair",
        parents=stored,
        help="keep the valid start of a corrupt session file, move the rest to a side file",
    )
    repair.add_argument("id")
    from ._worker import add_worker_parser

    add_worker_parser(commands, common_parents(model=True))
    return parser


def _command(name: str) -> Callable[[argparse.Namespace], Awaitable[int]]:
    if name == "acp":
        from ._acp import acp

        return acp
    if name == "chat":
        from ._chat import chat

        return chat
    if name == "demo":
        from ._demo import demo

        return demo
    if name == "run":
        from ._run import run

        return run
    if name == "worker":
        from ._worker import worker

        return worker
    from ._sessions import sessions

    return sessions


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


# The kernel's wording of a failed teardown (Fiber.dispose); test_cli_signals pins it.
_TEARDOWN = re.compile(r"teardown of fiber (\S+) failed")


def _located(
    exc: BaseException, fiber: str | None = None
) -> list[tuple[str | None, BaseException]]:
    """Every leaf of ``exc`` with the innermost fiber whose teardown it broke (or ``None``)."""
    if isinstance(exc, BaseExceptionGroup):
        found = _TEARDOWN.fullmatch(exc.message)
        inner = found[1] if found else fiber
        return [leaf for sub in exc.exceptions for leaf in _located(sub, inner)]
    return [(fiber, exc)]


def _once(
    located: list[tuple[str | None, BaseException]],
) -> list[tuple[str | None, BaseException]]:
    seen: set[int] = set()
    kept = []
    for fiber, leaf in located:
        if id(leaf) not in seen:
            seen.add(id(leaf))
            kept.append((fiber, leaf))
    return kept


def _plugin_teardown(fiber: str | None) -> bool:
    # The root fiber's own entries are the command's: a failure there is a bug, not a plugin's.
    return fiber is not None and not fiber.startswith("root#")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, TrioAgentsError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename is not None else exc.strerror
    return str(exc) or type(exc).__name__


def _closed(fd: int | None) -> bool:
    """Whether ``fd`` is a pipe or socket whose reader has gone (``poll`` says ``POLLERR``)."""
    if fd is None:
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):
        return False


def _stdout_copy() -> int | None:
    """A duplicate of fd 1 to ask later whether its reader closed it: rich's Console points
    fd 1 itself at /dev/null when it meets the closed pipe (``Console.on_broken_pipe``)."""
    try:
        return os.dup(1)
    except OSError:
        return None


def _quiet_exit() -> int:
    """End quietly on a closed stdout: what is still buffered for it goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the interpreter's last flush of sys.stdout then succeeds
    os.close(devnull)
    return _CLOSED_STDOUT


def _flushed(status: int, stdout: int | None, piped: PipedStdout | None, *, stop: bool) -> int:
    """``status``, once what is buffered or queued for stdout is written (or its reader is
    gone); a command that a signal or Ctrl-C stopped (``stop``) does not wait for a reader."""
    try:
        sys.stdout.flush()
        if piped is not None and not stop:
            stopped = stoppable(piped.drain)
            if stopped is not None:
                return stopped
    except BrokenPipeError:
        if _closed(stdout):
            return _quiet_exit()
        raise
    if piped is not None and piped.error is not None and _closed(stdout):
        return _quiet_exit()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    stdout = _stdout_copy()
    # Invariant: with stdout a pipe, no write blocks the trio thread (``_stdout.py``).
    piped = PipedStdout.install() if args.command != "acp" else None
    try:
        status = _main(args, stdout)
        stop = status in _STOPPED
        return _flushed(status, stdout, piped, stop=stop)
    finally:
        if piped is not None:
            piped.uninstall()
        if stdout is not None:
            os.close(stdout)


def _main(args: argparse.Namespace, stdout: int | None) -> int:
    log = CliLog().install()
    args.log = log
    reported: BaseException | None = None
    termination = Termination()
    try:
        # Every subcommand reads the config file: its store is the default of ``sessions``
        # and ``demo``, its model that of ``demo``.
        args.settings = settings_from(args)
        args.store = args.settings.store
        if args.command == "demo" and args.model is None:
            args.model = args.settings.config.model
        status = trio.run(guarded, termination, functools.partial(_command(args.command), args))
        if termination.status is not None:
            print(termination.line, file=sys.stderr)
        return status
    except BaseException as exc:
        # The same error raised by two teardown steps (two flushes of a session that failed
        # to write, say) is one problem: it is printed once.
        # A problem already printed while it happened (chat prints as it goes) is not
        # printed again; the exit status still says something failed.
        located = [(f, leaf) for f, leaf in _once(_located(exc)) if not log.shown(leaf)]
        torn = [(fiber, leaf) for fiber, leaf in located if _plugin_teardown(fiber)]
        leaves = [leaf for fiber, leaf in located if not _plugin_teardown(fiber)]
        broken = (BrokenPipeError, SystemExit)  # rich's Console exits on a closed stdout
        if any(isinstance(leaf, broken) for leaf in leaves) and _closed(stdout):
            # ``sessions show | head``: the reader has all it wanted, as with every Unix tool.
            reported = exc
            return _quiet_exit()
        # A Ctrl-C that lands mid-work may bring follow-on errors of the teardown it caused
        # (an agent that is disposing refuses messages): Ctrl-C is what the user did.
        if not all(
            isinstance(leaf, KeyboardInterrupt | Terminated | TrioAgentsError | OSError)
            for leaf in leaves
        ):
            raise
        reported = exc
        for fiber, leaf in torn:
            assert fiber is not None
            name = fiber.rpartition("#")[0]
            print(
                f"trio-agents: error: plugin {name!r} failed to tear down ({fiber}): "
                f"{type(leaf).__name__}: {_describe(leaf)}",
                file=sys.stderr,
            )
        if termination.status is not None:
            for leaf in leaves:
                if not isinstance(leaf, KeyboardInterrupt | Terminated):
                    print(f"trio-agents: error: {_describe(leaf)}", file=sys.stderr)
            print(termination.line, file=sys.stderr)
            return termination.status
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            print("trio-agents: interrupted", file=sys.stderr)
            return 130
        for leaf in leaves:
            print(f"trio-agents: error: {_describe(leaf)}", file=sys.stderr)
        return 1
    finally:
        log.publish(reported)
        log.uninstall()
