"""Entry point of the ``trio-agents`` command.

User mistakes (a bad option, an unknown session, an invalid model spec) end with one readable
line on stderr and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import trio

from .._errors import TrioAgentsError
from ._options import add_common

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-agents",
        description="Long-lived LLM agents on trio, with one owner for every piece of work.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    acp = commands.add_parser("acp", help="serve agents over the Agent Client Protocol on stdio")
    acp.add_argument(
        "--allow-bash",
        action="store_true",
        help="run shell commands without asking the client for permission",
    )
    add_common(acp)

    chat = commands.add_parser("chat", help="a conversation with one agent in the terminal")
    chat.add_argument("--session", default=None, help="resume (or create) this session id")
    add_common(chat)

    demo = commands.add_parser("demo", help="show the agent lifecycle end to end")
    add_common(demo)

    run = commands.add_parser("run", help="run one prompt and print the answer")
    run.add_argument("prompt", help="the prompt text")
    run.add_argument("--session", default=None, help="resume (or create) this session id")
    add_common(run)

    sessions = commands.add_parser("sessions", help="manage stored sessions")
    sessions_commands = sessions.add_subparsers(dest="action", required=True, metavar="ACTION")
    add_common(sessions_commands.add_parser("list", help="list stored sessions"))
    show = sessions_commands.add_parser("show", help="print a session's conversation")
    show.add_argument("id")
    add_common(show)
    delete = sessions_commands.add_parser("delete", help="delete a stored session")
    delete.add_argument("id")
    add_common(delete)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "acp":
            from ._acp import acp

            return trio.run(acp, args)
        if args.command == "chat":
            from ._chat import chat

            return trio.run(chat, args)
        if args.command == "demo":
            from ._demo import demo

            return trio.run(demo, args)
        if args.command == "run":
            from ._run import run

            return trio.run(run, args)
        from ._sessions import sessions

        return trio.run(sessions, args)
    except KeyboardInterrupt:
        print("trio-agents: interrupted", file=sys.stderr)
        return 130
    except (TrioAgentsError, OSError) as exc:
        print(f"trio-agents: error: {exc}", file=sys.stderr)
        return 1
