"""``ctx.snapshot()``: the live ownership tree as plain data, in the order teardown takes it."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import cattrs
import pytest
import trio
import trio.testing

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.mcp_support import TOOLS_SERVER, tools_server
from tests.helpers.support import Tools, read_fifo, shell_of
from trio_agents.agent._snapshot import ToolCallSnapshot, TurnSnapshot, describe_agent
from trio_agents.kernel import Context, EntrySnapshot, FiberSnapshot, FiberState
from trio_agents.mcp import McpServerSnapshot
from trio_agents.model import CallTool, ScriptedModel
from trio_agents.shell import LocalShell, ShellExecRequest, ShellSnapshot, tool_bash


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
    assert alpha_tree.details.turn is not None
    assert alpha_tree.details.turn.id == "t-1"
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


@attrs.frozen
class SleepParams:
    seconds: float


async def _sleep(call: ag.ToolContext, params: SleepParams) -> str:
    await trio.sleep(params.seconds)
    return "slept"


SLEEP = ag.Tool("sleep", "Sleep for a while.", SleepParams, _sleep)


async def test_a_running_turn_shows_its_tool_calls_and_how_long_each_has_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The turn and its call in flight, aged on trio's clock; the agent's fiber older."""
    model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
    async with ta.open_runtime(model=model) as root:
        await root.plugin(Tools(SLEEP))
        agent = (await root.agents.create(session_id="a")).agent
        await trio.sleep(5)
        agent.prompt("go")
        await trio.sleep(3)
        tree = fiber_of(root.snapshot(), "agent:a")
    assert tree.running_for == 8.0
    assert isinstance(tree.details, ag.AgentSnapshot)
    assert tree.details.turn == TurnSnapshot(
        "t-1", 3.0, (ToolCallSnapshot("call-1", "sleep", 3.0),)
    )


@attrs.frozen
class Shown:
    what: str
    at: float


@attrs.define
class Describing:
    """A plugin that describes itself and provides a service that does too."""

    name: str = "describing"

    def describe(self, now: float) -> Shown:
        return Shown("plugin", now)

    async def apply(self, ctx: Context, config: None) -> None:
        ctx.provide("counter", Counter())


class Counter:
    def describe(self, now: float) -> Shown:
        return Shown("service", now)


async def test_a_plugin_and_its_services_describe_themselves_in_their_fiber(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The plugin's record is its fiber's details, the service's its entry's, both at one now."""
    async with ta.open_root() as root:
        await trio.sleep(2)
        await root.plugin(Describing())
        tree = fiber_of(root.snapshot(), "describing")
    assert tree.state is FiberState.ACTIVE
    assert tree.details == Shown("plugin", 2.0)
    assert tree.entries == (
        EntrySnapshot("service", "service counter", details=Shown("service", 2.0)),
    )


@attrs.define
class Broken:
    name: str = "broken"

    def describe(self, now: float) -> Shown:
        raise ValueError("no words")

    async def apply(self, ctx: Context, config: None) -> None:
        pass


async def test_a_describer_that_raises_is_shown_as_its_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The failing record says what went wrong; the rest of the tree is still read."""
    async with ta.open_root() as root:
        await root.plugin(Broken())
        await root.plugin(Describing())
        tree = root.snapshot()
    assert fiber_of(tree, "broken").details == "describe() failed: ValueError: no words"
    assert fiber_of(tree, "describing").details is not None
    assert "describe() of Broken(name='broken') failed during a snapshot" in caplog.messages


async def test_a_section_nests_its_entries_and_unwinds_them_where_it_stands() -> None:
    """A section's entries sit inside its entry; teardown takes them at its place."""
    log: list[str] = []
    async with ta.open_root() as root:
        root.defer(mark(log, "mark:before"))
        section = root.section("part")
        section.defer(mark(log, "mark:in-1"))
        section.defer(mark(log, "mark:in-2"))
        root.defer(mark(log, "mark:after"))
        tree = root.snapshot()
    [part] = [e for e in tree.entries if e.kind == "section"]
    assert [e.label for e in part.entries] == ["defer mark:in-1", "defer mark:in-2"]
    assert (
        observable(tree.teardown())
        == log
        == [
            "mark:after",
            "mark:in-2",
            "mark:in-1",
            "mark:before",
        ]
    )


async def test_a_fiber_a_co_owner_disposes_unwinds_where_that_entry_stands() -> None:
    """An entry that disposes another fiber names it, and teardown takes that fiber's exits
    there, before the entry of its parent, as the real teardown does."""
    log: list[str] = []
    async with ta.open_root() as root:
        owned = await root.child("owned")
        owned.defer(mark(log, "mark:owned"))
        owner = await root.child("owner")
        owner.defer(mark(log, "mark:owner-first"))
        owner.defer(owned.fiber.dispose)
        owner.defer(mark(log, "mark:owner-last"))
        tree = root.snapshot()
    [disposer] = [e for e in fiber_of(tree, "owner").entries if e.disposes is not None]
    assert disposer.disposes == owned.fiber.id
    assert (
        observable(tree.teardown())
        == log
        == [
            "mark:owner-last",
            "mark:owned",
            "mark:owner-first",
        ]
    )


@attrs.define
class Unhashable:
    """An attrs class with the default eq: its instances cannot be dict keys."""

    closed: bool = False

    async def close(self) -> None:
        self.closed = True


async def test_an_exit_bound_to_an_unhashable_object_is_read_as_a_plain_entry() -> None:
    """A cleanup that is a method of an unhashable object is an entry like any other."""
    async with ta.open_root() as root:
        root.defer(Unhashable().close)
        tree = root.snapshot()
    assert tree.entries == (EntrySnapshot("defer", "defer Unhashable.close"),)


async def test_a_foreground_command_is_counted_under_the_shell_service(tmp_path: Path) -> None:
    """A run in flight is no job, but the shell's record counts it while it runs."""
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    async with ta.open_runtime() as root:
        await root.plugin(LocalShell())
        shell = shell_of(root)
        spec = shell.resolve(ShellExecRequest(f"echo started > {fifo}; sleep 600"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shell.run, spec)
            with trio.fail_after(30):
                assert await read_fifo(fifo) == "started\n"
            [details] = [e.details for e in fiber_of(root.snapshot(), "shell").entries if e.details]
            nursery.cancel_scope.cancel()
    assert details == ShellSnapshot((), foreground=1)


class Bare:
    """An agent of another factory that does not describe itself: only what AgentLike says."""

    id = "bare"
    parent = None
    status = ag.AgentStatus.IDLE


def test_an_agent_that_does_not_describe_itself_shows_what_agentlike_says() -> None:
    """Its id, status and parent; no turn, queue or children."""
    described = describe_agent(Bare(), 0.0)  # type: ignore[arg-type]
    assert described == ag.AgentSnapshot("bare", ag.AgentStatus.IDLE)
