"""``trio-agents acp``: serve agents over the Agent Client Protocol on stdin/stdout.

Rules:
- File descriptor 1 belongs to the protocol alone. The bridge writes to a duplicate of it,
  and fd 1 itself (and ``sys.stdout``) point to stderr while serving, so a stray ``print``
  or a library's output cannot corrupt the stream of frames.
- Logs go to stderr, through the command's log handler, as they happen.
- The command returns when the client closes stdin, after every session was disposed and
  the runtime torn down (so no child process is left): status 0, or 1 when serving itself
  failed (the one line about it is already on stderr, from the bridge's log).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from ..acp import AcpBridge
from ._logs import CliLog
from ._options import open_cli_runtime


@contextmanager
def _protocol_fds() -> Iterator[tuple[int, int]]:
    """Duplicates of stdin and stdout for the protocol; fd 1 goes to stderr meanwhile."""
    saved = os.dup(1)
    receive_fd, send_fd = os.dup(0), os.dup(1)
    stdout = sys.stdout
    try:
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        yield receive_fd, send_fd
    finally:
        sys.stdout = stdout
        os.dup2(saved, 1)
        os.close(saved)


def _log_live() -> None:
    # A server runs for long: the CLI's log handler prints problems as they happen.
    for handler in logging.getLogger("trio_agents").handlers:
        if isinstance(handler, CliLog):
            handler.go_live()


async def acp(args: argparse.Namespace) -> int:
    """Serve ACP on stdio until the client closes stdin; returns the exit status."""
    _log_live()
    with _protocol_fds() as (receive_fd, send_fd):
        receive = trio.lowlevel.FdStream(receive_fd)
        send = trio.lowlevel.FdStream(send_fd)
        allow = ("bash", "bash_kill") if args.allow_bash else ()
        # A sandboxed command cannot leave the sandbox: the client is not asked (as Codex).
        unasked = bool(args.allow_bash) or args.settings.sandbox is not None
        async with open_cli_runtime(args.settings, allow=allow) as root:
            bridge = AcpBridge(
                send,
                receive,
                allow_bash=unasked,
                forget_approvals=args.settings.forget_approvals,
                project_files=args.settings.project_files,
                models=args.settings.config.models,
            )
            fiber = await root.plugin(bridge)
            await bridge.wait_closed()
            await fiber.dispose()
    return 0 if bridge.failure is None else 1
