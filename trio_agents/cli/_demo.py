"""``trio-agents demo``: the lifecycle end to end on the embedded model.

Queue, steer, cancel, a background job and its owner, a plugin reload, a subagent and a
budget that stops its subtree, dispose: each step narrated, with the live events that show the
ownership rules at work.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

import trio
from rich.console import Console

from .. import shell
from ..agent import (
    Agent,
    AgentCancelRequested,
    AgentDisposed,
    AgentHandle,
    AgentStatus,
    AgentStatusChanged,
    Budget,
    TaskEnded,
    TaskStarted,
    open_runtime,
)
from ..kernel import Context
from ..session import (
    AssistantMessage,
    InboxSpliced,
    SessionAppended,
    SessionDisposed,
    StopReason,
    TurnEnded,
    UserMessage,
)
from ._options import CliError, announce_store, make_store, resolve_model, session_path, store_place

T = TypeVar("T")


async def demo(args: argparse.Namespace) -> int:
    """Run the scenario; returns 0 when every step behaved as the contract says."""
    out = Console(highlight=False)
    spec = args.model if args.model not in (None, "echo") else "echo?delay=0.2"
    model = resolve_model(spec)
    # A missing API key was refused with the demo's hint before trio started (settings_from).
    root_dir = store_place(args.store)
    announce_store(args.store)
    out.rule("trio-agents demo")
    out.print(f"model [bold]{model.name}[/], sessions in [bold]{root_dir or 'memory'}[/]")
    async with open_runtime(store=make_store(args.store), model=model) as root:
        _narrate(root, out)
        handle = await root.agents.create(instructions="You are the demo agent.")
        agent = handle.agent

        out.rule("1. a prompt, streamed")
        agent.prompt("hello from the demo")
        await agent.when_idle()
        _check_first_turn(agent, model.name)

        out.rule("2. queue, steer and cancel")
        agent.prompt("a long first prompt")
        await _wait_for(
            root,
            AgentStatusChanged,
            lambda e: e.agent_id == agent.id and e.new is AgentStatus.RUNNING,
        )
        queued = agent.prompt("a queued prompt that will be cancelled")
        agent.steer("a steer for the running turn")
        out.print(f"queued: {[m.id for m in agent.queued()]}; cancelling…")
        agent.cancel()
        later = agent.prompt("a prompt sent after the cancel")
        await agent.when_idle()
        ran = [r.message_id for r in agent.session.records if isinstance(r, UserMessage)]
        out.print(f"{queued} ran: {queued in ran};  {later} ran: {later in ran}")

        await _shell_steps(root, agent, out)
        await _subagent_steps(root, model.name, spec, out)

        out.rule("6. dispose")
        await handle.dispose()
        out.print(f"live agents after dispose: {len(root.agents.list())}")
        path = session_path(root, agent.id)
    if path is not None:
        out.print(f"session written to [bold]{path}[/]")
    out.rule("done")
    return 0


def _check_first_turn(agent: Agent, model: str) -> None:
    """The rest of the demo needs a model that answers: stop with one line if it did not."""
    ended = next(r for r in reversed(agent.session.records) if isinstance(r, TurnEnded))
    if ended.stop_reason is not StopReason.COMPLETED:
        detail = f": {ended.error}" if ended.error else ""
        raise CliError(
            f"the demo stopped: model {model} did not answer ({ended.stop_reason.value}{detail}); "
            "run it without --model to use the embedded echo model"
        )


def _narrate(root: Context, out: Console) -> None:
    def on_record(event: SessionAppended) -> None:
        record = event.record
        if isinstance(record, TurnEnded):
            cause = f", cause {record.cause!r}" if record.cause is not None else ""
            out.print(f"  [dim]turn {record.turn_id} ended: {record.stop_reason.value}{cause}[/]")
        elif isinstance(record, UserMessage):
            out.print(f"  [cyan]user[/] ({record.message_id}): {record.content}")
        elif isinstance(record, AssistantMessage):
            out.print(f"  [green]agent[/]: {record.content}")

    root.on(SessionAppended, on_record)
    root.on(
        AgentCancelRequested,
        lambda e: out.print(f"  [magenta]cancel requested[/] {e.agent_id}: {e.cause!r}"),
    )
    root.on(AgentDisposed, lambda e: out.print(f"  [dim]agent {e.agent_id} left the registry[/]"))
    root.on(SessionDisposed, lambda e: out.print(f"  [dim]session {e.session_id} detached[/]"))


async def _wait_for(root: Context, event_type: type[T], match: Callable[[T], bool]) -> T:
    """Wait for the next ``event_type`` that ``match`` accepts."""
    seen: list[T] = []
    arrived = trio.Event()

    def on_event(event: T) -> None:
        if not seen and match(event):
            seen.append(event)
            arrived.set()

    entry = root.on(event_type, on_event)
    try:
        with trio.fail_after(30):
            await arrived.wait()
    finally:
        await entry.close()
    return seen[0]


async def _shell_steps(root: Context, agent: Agent, out: Console) -> None:
    # The shell layer is part of the package (the command's options import it): always there.
    await root.plugin(shell.LocalShell())
    await root.plugin(shell.tool_bash)
    tools = root.get("tools")
    executor = root.get("shell")
    other: AgentHandle = await root.agents.create()

    out.rule("3. a background job and its owner")
    started = await tools.invoke(
        "bash", {"command": "sleep 0.5; echo job finished", "run_in_background": True}, agent
    )
    job_id = started.content.split()[-1].strip(".")
    out.print(f"{started.content}  (owner_of({job_id}) = {executor.owner_of(job_id)!r})")
    refused = await tools.invoke("bash_output", {"job_id": job_id}, other.agent)
    out.print(f"another agent asks for its output: {refused.content}")

    out.rule("4. reload tool_bash: ownership lives in the executor")
    await root.reload(shell.tool_bash)
    refused = await tools.invoke("bash_kill", {"job_id": job_id}, other.agent)
    out.print(f"after the reload the other agent is still refused: {refused.content}")
    await _wait_for(
        root,
        SessionAppended,
        lambda e: e.session_id == agent.id and isinstance(e.record, InboxSpliced),
    )
    out.print(f"completion notice injected into the owner: {agent.queued()[-1].content!r}")
    await other.dispose()


async def _subagent_steps(root: Context, model_name: str, spec: str, out: Console) -> None:
    out.rule("5. a subagent, and a budget that stops its subtree")
    if model_name != "echo":
        out.print("skipped: the scripted tool calls need the embedded echo model")
        return
    root.on(
        TaskStarted,
        lambda e: out.print(f"  [blue]task[/] {e.agent_id} started child {e.child_id}"),
    )
    root.on(
        TaskEnded,
        lambda e: out.print(
            f"  [blue]task[/] child {e.child_id} ended {e.stop_reason.value}"
            + (f", cause {e.cause!r}" if e.cause is not None else "")
        ),
    )
    await root.agents.define("helper", description="repeats what it is told", model=spec)
    # A fresh session id: the default store keeps the sessions of every earlier run.
    lead = await root.agents.create(tools=["*", "task"], budget=Budget(output_tokens=12))
    lead.agent.prompt('!tool task {"agent": "helper", "prompt": "a short errand"}')
    await lead.agent.when_idle()
    out.print(
        f"the child answered and is gone (live children: {len(lead.agent.children)}); what it "
        f"spent counts against the lead's budget of 12 output tokens"
    )
    lead.agent.prompt("one more errand")
    await lead.agent.when_idle()
    out.print("the budget is spent: the next turn stopped before its first model request")
    await lead.dispose()
