"""``trio-agents run PROMPT``: one prompt, the answer streamed to stdout."""

from __future__ import annotations

import argparse
import sys

import trio
from rich.console import Console

from ..agent import AgentOutput, open_runtime
from ..session import SessionNotFoundError, StopReason, TurnEnded
from ._options import make_store, resolve_model

__all__ = ["run"]


async def run(args: argparse.Namespace) -> int:
    """Run ``args.prompt`` on one agent; the exit status says how the turn ended."""
    err = Console(stderr=True)
    model = resolve_model(args.model)
    async with open_runtime(store=make_store(args.store), model=model) as root:
        handle = None
        if args.session is not None:
            try:
                handle = await root.agents.resume(args.session)
            except SessionNotFoundError:
                handle = None
        if handle is None:
            handle = await root.agents.create(session_id=args.session)
        agent = handle.agent
        first = trio.Event()

        def show(event: AgentOutput) -> None:
            if event.agent_id == agent.id:
                first.set()
                sys.stdout.write(event.text)
                sys.stdout.flush()

        root.on(AgentOutput, show)
        agent.prompt(args.prompt)
        with err.status("thinking…", spinner="dots") as status:
            async with trio.open_nursery() as nursery:

                async def stop_spinner() -> None:
                    await first.wait()
                    status.stop()

                nursery.start_soon(stop_spinner)
                await agent.when_idle()
                nursery.cancel_scope.cancel()
        sys.stdout.write("\n")
        ended = [r for r in agent.session.records if isinstance(r, TurnEnded)][-1]
        await handle.dispose()
    err.print(f"[dim]session {agent.id}: {ended.stop_reason.value}[/dim]")
    if ended.stop_reason is StopReason.ERROR:
        err.print(f"[red]error:[/red] {ended.error}")
        return 1
    return 0 if ended.stop_reason is StopReason.COMPLETED else 1
