"""``trio-agents run --remote postgresql://... --session ID PROMPT``: one prompt, run by
whichever worker serves the queue; the answer streamed to stdout as its records arrive.

Exit statuses as ``run``: 0 completed; 1 failed (one line on stderr); 130 cancelled, also by
Ctrl-C, which cancels the prompt with ``UserCancel`` (the worker records it) and waits for
the worker to stop it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import uuid

import trio

from ..cancel import UserCancel
from ..session import AssistantMessage
from ..workers import AgentTemplate, PromptClaimed, RemotePrompt, open_remote
from ._worker import dsn_of


async def run_remote(args: argparse.Namespace, prompt: str) -> int:
    """Submit ``prompt`` to the session ``args.session`` through the queue in
    ``args.remote``; print the answer."""
    dsn = dsn_of(args.remote, "--remote", "trio-agents run --remote")
    session_id = args.session or f"s-{uuid.uuid4().hex[:12]}"
    model = getattr(args, "model", None)
    async with open_remote(dsn) as remote:
        submitted = await remote.submit(session_id, prompt, agent=AgentTemplate(model=model))
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            async with trio.open_nursery() as nursery:

                async def cancel_on_interrupt() -> None:
                    async for _ in interrupts:
                        await submitted.cancel(UserCancel())

                nursery.start_soon(cancel_on_interrupt)
                await _stream(submitted)
                nursery.cancel_scope.cancel()
        status = await submitted.wait_settled()
    if status.state == "completed":
        return 0
    if status.state == "cancelled":
        print(f"trio-agents: cancelled ({status.cause!r})", file=sys.stderr)
        return 130
    print(f"trio-agents: error: prompt {submitted.id} failed: {status.error}", file=sys.stderr)
    return 1


async def _stream(submitted: RemotePrompt) -> None:
    """Print the text of each step of the prompt's completed turn as it is written."""
    printed = False
    async for record in submitted.records():
        if isinstance(record, PromptClaimed) and record.attempt > 1:
            if printed:
                sys.stdout.write("\n")
            print(
                f"trio-agents: its worker was lost mid-turn; attempt {record.attempt} runs it "
                f"again",
                file=sys.stderr,
            )
            printed = False
        if isinstance(record, AssistantMessage) and not record.interrupted:
            sys.stdout.write(record.content)
            sys.stdout.flush()
            printed = True
    if printed:
        sys.stdout.write("\n")
        sys.stdout.flush()
