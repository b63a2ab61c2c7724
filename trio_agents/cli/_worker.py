"""``trio-agents worker --store postgresql://...``: serve the work queue of that database.

Rules:
- The store must be a PostgreSQL DSN: the queue and the sessions live in that database.
- SIGTERM (or Ctrl-C) drains the worker: it stops claiming, finishes or hands back what it
  runs within ``--drain-timeout`` seconds, releases its sessions and exits 0. A second signal
  stops it at once (128 + the signal's number); the sessions' next owners re-run what ran.
- One line on stderr says the worker is serving (its id), one that it drained.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys

import trio

from ..session import parse_store_spec
from ..workers import Worker, serve_worker
from ._options import CliError, Settings


def add_worker_parser(commands: argparse._SubParsersAction, parents: list) -> None:  # type: ignore[type-arg]
    """Register the ``worker`` subcommand."""
    parser = commands.add_parser(
        "worker",
        parents=parents,
        help="run queued prompts of any session (the PostgreSQL work queue)",
        description="Serve the work queue in the --store PostgreSQL database: claim queued "
        "prompts, run them, release idle sessions. SIGTERM drains the worker and exits 0.",
    )
    parser.add_argument(
        "--idle-release",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="release a session idle this long, so load rebalances (default 60)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM, wait this long for running prompts before handing them back (default 30)",
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long this worker's sessions stay its own without a heartbeat (default 10)",
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=64,
        metavar="N",
        help="how many prompts run here at once at most (default 64)",
    )


def dsn_of(store: str | None, option: str, command: str) -> str:
    """The PostgreSQL DSN given as ``option``, or a :class:`CliError` that says what to give."""
    spec = parse_store_spec(store) if store is not None else None
    if spec is None or spec.kind != "postgresql":
        raise CliError(
            f"{command} needs the work queue's PostgreSQL database: give {option} "
            f"postgresql://USER@HOST/DB" + (f" (got {store!r})" if store is not None else "")
        )
    return str(spec.target)


async def worker(args: argparse.Namespace) -> int:
    """Serve until drained by SIGTERM or Ctrl-C."""
    settings: Settings = args.settings
    dsn = dsn_of(settings.store, "--store", "trio-agents worker")
    for name in ("idle_release", "drain_timeout", "lease"):
        value = getattr(args, name)
        if not value > 0:
            option = "--" + name.replace("_", "-")
            raise CliError(f"{option} is a number of seconds, > 0; got {value!r}")
    if args.max_sessions < 1:
        raise CliError(f"--max-sessions is at least 1; got {args.max_sessions!r}")
    status = 0
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            serve = functools.partial(
                serve_worker,
                dsn,
                model=settings.model,
                lease_seconds=args.lease,
                idle_release=args.idle_release,
                drain_timeout=args.drain_timeout,
                max_sessions=args.max_sessions,
            )
            serving: Worker = await nursery.start(serve)
            print(f"trio-agents: worker {serving.id} serving", file=sys.stderr, flush=True)

            async def watch() -> None:
                nonlocal status
                async for signum in signals:
                    if not serving.draining:
                        print(f"trio-agents: worker {serving.id} draining", file=sys.stderr)
                        serving.drain()
                    else:
                        status = 128 + signum
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(watch)
            await serving.wait_drained()
            nursery.cancel_scope.cancel()
    if status == 0:
        print(f"trio-agents: worker {serving.id} drained", file=sys.stderr, flush=True)
    return status
