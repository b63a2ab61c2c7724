"""``ctx.snapshot()``: the live ownership tree as plain data, in the order teardown takes it."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Awaitable, Callable

import cattrs
import trio
import trio.testing
from mcp_support import TOOLS_SERVER, tools_server

import trio_agents as ta
import trio_agents.agent as ag
from trio_agents.kernel import FiberSnapshot
from trio_agents.mcp import McpServerSnapshot
from trio_agents.model import ScriptedModel
from trio_agents.shell import LocalShell, ShellSnapshot, tool_bash


def mark(log: list[str], name: str) -> Callable[[], Awaitable[None]]:
    """An exit that logs ``name``; its entry is labelled ``defer <name>``."""

    async def exit() -> None:
        log.append(name)

    exit.__qualname__ = name
    return exit


def fiber_of(tree: FiberSnapshot, name: str) -> FiberSnapshot:
    """The one fiber of ``tree`` whose plugin is named ``name``."""
    [found] = [f for f in tree.fibers() if f.name == name]
    return found


def observable(exits: tuple[tuple[str, str], ...]) -> list[str]:
    """The exits a test sees happen: its marks, and each agent leaving the registry."""
    seen: list[str] = []
    for fiber_id, label in exits:
        if label.startswith("defer mark:"):
            seen.append(label.removeprefix("defer "))
        elif label == "defer AgentRegistry._detach":
            seen.append("disposed " + re.sub(r"^agent:(.*)#\d+$", r"\1", fiber_id))
    return seen


async def test_the_snapshot_lists_what_teardown_unwinds_in_its_order() -> None:
    """Plugins, two agents, a child, a job and an MCP server: the order the snapshot gives
    is the order the runtime's teardown takes."""
    log: list[str] = []
    slow = ScriptedModel.echo(delay=600)
    async with ta.open_runtime() as root:
        root.defer(mark(log, "mark:root-first"))
        root.on(ta.AgentDisposed, lambda event: log.append(f"disposed {event.agent_id}"))
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        await root.plugin(tools_server("files"))
        alpha = (await root.agents.create(session_id="alpha", model=slow)).agent
        beta = (await root.agents.create(session_id="beta")).agent
        gamma = (await root.agents.create(session_id="gamma", parent=alpha)).agent
        root.agents.scope_of(alpha).defer(mark(log, "mark:alpha-scope"))
        root.agents.scope_of(gamma).defer(mark(log, "mark:gamma-scope"))
        root.defer(mark(log, "mark:root-last"))
        arguments = {"command": "sleep 600", "run_in_background": True}
        started = await root.tools.invoke("bash", arguments, beta.caller())
        assert started.content == "bash-1"
        alpha.prompt("first")
        alpha.prompt("second")
        await trio.testing.wait_all_tasks_blocked()

        tree = root.snapshot()
        log.clear()

    assert (
        observable(tree.teardown())
        == log
        == [
            "mark:root-last",
            "disposed beta",
            "mark:alpha-scope",
            "mark:gamma-scope",
            "disposed gamma",
            "disposed alpha",
            "mark:root-first",
        ]
    )
    alpha_tree = fiber_of(tree, "agent:alpha")
    assert isinstance(alpha_tree.details, ag.AgentSnapshot)
    assert alpha_tree.details.status is ag.AgentStatus.RUNNING
    assert alpha_tree.details.turn is not None and alpha_tree.details.turn.id == "t-1"
    assert [m.content for m in alpha_tree.details.queued] == ["second"]
    assert alpha_tree.details.children == ("gamma",)
    assert fiber_of(tree, "agent:gamma").details == ag.AgentSnapshot(
        id="gamma", status=ag.AgentStatus.IDLE, parent_id="alpha"
    )
    [shell] = [e.details for f in tree.fibers() for e in f.entries if e.label == "service shell"]
    assert isinstance(shell, ShellSnapshot)
    assert [(j.id, j.command, j.owner) for j in shell.jobs] == [("bash-1", "sleep 600", "beta")]
    assert fiber_of(tree, "files").details == McpServerSnapshot(
        "files", "stdio", f"{sys.executable} {TOOLS_SERVER}"
    )
    unstructured = json.loads(json.dumps(cattrs.Converter().unstructure(tree)))
    assert unstructured["id"] == "root#1"
    kinds = {e["kind"] for e in unstructured["entries"]}
    assert {"fiber", "defer", "listener"} <= kinds
