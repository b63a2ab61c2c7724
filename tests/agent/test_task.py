"""Subagents the model starts (issue 37): agent definitions, the ``task`` tools, the child's
lifecycle under its parent (cancel, dispose, failure, owner loss at every checkpoint)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.checkpoints import cancelled_at_step
from tests.helpers.paths import HELPERS
from tests.helpers.support import P
from trio_agents.cancel import BudgetExhausted, ParentCancel, UserCancel
from trio_agents.kernel import Context
from trio_agents.model import CallTool, Fail, Say, ScriptedModel
from trio_agents.session import (
    AgentConfigured,
    ChildEnded,
    ChildStarted,
    JsonlStore,
    MemoryStore,
    Record,
    Session,
    StopReason,
    ToolCallEnded,
    TurnEnded,
)

TASK_TOOLS = ["task", "task_output", "task_cancel"]


def of(records: tuple[Record, ...] | list[Record], kind: type[Any]) -> list[Any]:
    return [r for r in records if isinstance(r, kind)]


def results(agent: ag.Agent) -> list[ToolCallEnded]:
    return of(agent.session.records, ToolCallEnded)


def told(model: ScriptedModel) -> list[str]:
    """The tools the model was told about in its latest request."""
    return [spec.name for spec in model.requests[-1].tools]


async def stored_records(ctx: Context, session_id: str) -> tuple[Record, ...]:
    session: Session = await ctx.sessions.load(session_id)
    try:
        return session.records
    finally:
        await ctx.sessions.abandon(session)


def ends(records: tuple[Record, ...]) -> list[TurnEnded]:
    return of(records, TurnEnded)


# -- definitions -----------------------------------------------------------------------------------


async def test_a_definition_is_listed_in_the_task_tool_while_its_fiber_is_loaded() -> None:
    """The task tool's schema and description list the definitions in force; a definition
    made by a plugin is gone when the plugin unloads."""

    async def define(ctx: Context, config: None) -> None:
        await ctx.agents.define("reviewer", description="reviews code")

    async with ag.open_runtime() as root:
        await root.agents.define("writer", description="writes prose")
        fiber = await root.plugin(P("definer", define, inject=("agents",)))
        (spec,) = [s for s in root.tools.specs(explicit=True) if s.name == "task"]
        assert spec.parameters["properties"]["agent"]["enum"] == ["writer", "reviewer"]
        assert "- writer: writes prose\n- reviewer: reviews code" in spec.description
        await fiber.dispose()
        (spec,) = [s for s in root.tools.specs(explicit=True) if s.name == "task"]
        assert spec.parameters["properties"]["agent"]["enum"] == ["writer"]
        assert "reviewer" not in spec.description


async def test_a_second_definition_of_a_name_is_refused() -> None:
    """Names are unique while defined, as tool names are."""
    async with ag.open_runtime() as root:
        await root.agents.define("writer", description="one")
        with pytest.raises(ag.DefinitionNameInUseError, match=r"^agent definition 'writer' "):
            await root.agents.define("writer", description="two")
        with pytest.raises(ValueError, match=r"^an agent definition's name is 1-64 "):
            await root.agents.define("no spaces", description="x")


async def test_task_is_seen_only_by_agents_that_name_it() -> None:
    """An agent given every tool is not told of task (nor may call it); one naming it is."""
    every_model = ScriptedModel([[CallTool("task", {"agent": "x", "prompt": "hi"})], "ok"])
    named_model = ScriptedModel(["fine"])
    async with ag.open_runtime() as root:
        await root.agents.define("x", description="x", model="echo")
        every = (await root.agents.create(every_model)).agent
        named = (await root.agents.create(named_model, tools=["task", "bash"])).agent
        assert await every.ask("go") == "ok"
        assert "task" not in told(every_model)
        assert await named.ask("go") == "fine"
        assert told(named_model) == ["task"]
        (refused,) = results(every)
        assert refused.is_error
        assert not refused.started
        assert re.match(r"^agent \S+ may not start children: task is given only", refused.content)
        assert root.agents.list() == (every, named)


# -- foreground ------------------------------------------------------------------------------------


async def test_a_foreground_task_answers_with_the_childs_answer_and_usage() -> None:
    """The call's result is the child's answer and usage; the parent records the child's start
    and end; the child is disposed, its session stored as the parent's child."""
    model = ScriptedModel([[CallTool("task", {"agent": "echoer", "prompt": "hello child"})], "ok"])
    async with ag.open_runtime() as root:
        await root.agents.define("echoer", description="echoes", model="echo")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        assert await parent.ask("go") == "ok"
        (result,) = results(parent)
        (started,) = of(parent.session.records, ChildStarted)
        (ended,) = of(parent.session.records, ChildEnded)
        child_id = started.child_id
        assert re.fullmatch(
            rf"hello child\n\n\[{child_id}: 1 model requests, \d+ input and 2 output tokens\]",
            result.content,
        )
        assert (started.definition, started.call_id, started.background) == (
            "echoer",
            result.call_id,
            False,
        )
        assert (ended.child_id, ended.stop_reason, ended.output_tokens) == (
            child_id,
            StopReason.COMPLETED,
            2,
        )
        assert root.agents.list() == (parent,)
        assert parent.children == ()
        stored = await stored_records(root, child_id)
        assert of(stored, AgentConfigured)[-1].parent_id == parent.id
        assert [e.stop_reason for e in ends(stored)] == [StopReason.COMPLETED]


async def test_a_childs_failure_is_the_calls_error_result_not_the_parents() -> None:
    """A child whose model fails ends the call in error; the parent's turn completes."""
    model = ScriptedModel([[CallTool("task", {"agent": "broken", "prompt": "x"})], "recovered"])
    async with ag.open_runtime() as root:
        await root.agents.define(
            "broken", description="fails", model=ScriptedModel([[Fail("provider down")]])
        )
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        assert await parent.ask("go") == "recovered"
        (result,) = results(parent)
        assert result.is_error
        assert re.match(r"^child \S+ \(broken\) ended error: provider down\n", result.content)
        (ended,) = of(parent.session.records, ChildEnded)
        assert ended.stop_reason is StopReason.ERROR
        assert ended.error == "provider down"


async def test_an_unknown_definition_is_an_error_result_that_starts_nothing() -> None:
    """The model reads which definitions exist; no child is made."""
    model = ScriptedModel([[CallTool("task", {"agent": "nope", "prompt": "x"})], "ok"])
    async with ag.open_runtime() as root:
        await root.agents.define("echoer", description="echoes", model="echo")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        await parent.ask("go")
        (result,) = results(parent)
        assert (result.content, result.started) == (
            "no agent definition 'nope'; defined: echoer",
            False,
        )
        assert of(parent.session.records, ChildStarted) == []


async def test_cancelling_the_parent_stops_two_streaming_children_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two task calls in one step, the parent cancelled while both children stream: both
    record ParentCancel, then the parent's turn ends cancelled; no child is left."""
    model = ScriptedModel(
        [
            [
                CallTool("task", {"agent": "slow", "prompt": "one two three four"}),
                CallTool("task", {"agent": "slow", "prompt": "five six seven eight"}),
            ]
        ]
    )
    async with ag.open_runtime() as root:
        await root.agents.define("slow", description="slow echo", model="echo?delay=1")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        parent.prompt("go")
        await trio.sleep(2.5)  # both children are mid-stream
        children = parent.children
        assert len(children) == 2
        assert parent.cancel(UserCancel())
        await parent.when_idle()
        (turn_end,) = ends(parent.session.records)
        assert turn_end.stop_reason is StopReason.CANCELLED
        assert turn_end.cause == UserCancel()
        child_ends = of(parent.session.records, ChildEnded)
        assert {e.child_id for e in child_ends} == {c.id for c in children}
        assert all(e.cause == ParentCancel(parent_id=parent.id) for e in child_ends)
        # The children's ends come before the parent's turn end, in the parent's record.
        records = parent.session.records
        assert max(records.index(e) for e in child_ends) < records.index(turn_end)
        for child in children:
            (end,) = ends(await stored_records(root, child.id))
            assert end.cause == ParentCancel(parent_id=parent.id)
        assert root.agents.list() == (parent,)
        assert parent.children == ()


async def test_disposing_the_parent_mid_task_disposes_the_child_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The parent's disposal stops and disposes its running child before the parent goes."""
    model = ScriptedModel([[CallTool("task", {"agent": "slow", "prompt": "a b c d"})]])
    gone: list[str] = []
    async with ag.open_runtime() as root:
        root.on(ag.AgentDisposed, lambda e: gone.append(e.agent_id))
        await root.agents.define("slow", description="slow echo", model="echo?delay=1")
        handle = await root.agents.create(model, tools=TASK_TOOLS)
        parent = handle.agent
        parent.prompt("go")
        await trio.sleep(1.5)
        (child,) = parent.children
        await handle.dispose()
        assert gone == [child.id, parent.id]
        (end,) = ends(await stored_records(root, child.id))
        assert end.stop_reason is StopReason.CANCELLED
        parent_records = await stored_records(root, parent.id)
        (ended,) = of(parent_records, ChildEnded)
        assert ended.stop_reason is StopReason.CANCELLED
        assert ends(parent_records)[-1].stop_reason is StopReason.CANCELLED


async def test_owner_loss_at_every_checkpoint_of_task_leaves_no_child_and_no_open_record(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancel the caller at checkpoint k = 1, 2, ... of a task call: no child stays
    registered or live, and every child start the parent recorded has its end."""
    store = MemoryStore()
    async with ag.open_runtime(store=store) as root:
        await root.agents.define("echoer", description="echoes", model="echo")
        parent = (await root.agents.create("echo", tools=TASK_TOOLS)).agent
        completed_at = None
        for k in range(1, 600):
            result, cancelled, fired = await cancelled_at_step(
                k,
                partial(
                    root.tools.invoke,
                    "task",
                    {"agent": "echoer", "prompt": "hi"},
                    parent,
                    call_id=f"c{k}",
                ),
            )
            await trio.testing.wait_all_tasks_blocked()
            assert root.agents.list() == (parent,)
            assert {s.id for s in store.live()} == {parent.id}
            records = parent.session.records
            started = {r.child_id for r in of(records, ChildStarted)}
            assert started == {r.child_id for r in of(records, ChildEnded)}
            if result is None:
                assert cancelled
            elif not fired:
                assert result.content.startswith("hi\n\n")
                completed_at = k
                break
        assert completed_at is not None
        assert completed_at > 10
        # Each recorded child ended cancelled or completed, its own turn closed durably
        # (a load would close an open one as interrupted).
        for ended in of(parent.session.records, ChildEnded):
            assert ended.stop_reason in (StopReason.CANCELLED, StopReason.COMPLETED)
            stored = await stored_records(root, ended.child_id)
            assert StopReason.INTERRUPTED not in [e.stop_reason for e in ends(stored)]


# -- background ------------------------------------------------------------------------------------


async def test_a_background_task_answers_at_once_and_its_end_is_a_notice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """background: the call answers with the child's id; the child runs on; its end is
    injected into the parent, and task_output reads its answer."""
    model = ScriptedModel(
        [
            [CallTool("task", {"agent": "slow", "prompt": "a b c", "background": True})],
            "started it",
        ]
    )
    async with ag.open_runtime() as root:
        await root.agents.define("slow", description="slow echo", model="echo?delay=1")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        assert await parent.ask("go") == "started it"
        (result,) = results(parent)
        child_id = re.match(r"^started (\S+) \(slow\) in the background; ", result.content)
        assert child_id is not None
        (child,) = parent.children
        assert child.id == child_id[1]
        await trio.sleep(10)
        assert parent.children == ()
        notice = parent.queued()[-1].content
        assert notice == (
            f"background task {child.id} ended completed; read its answer with "
            f'task_output(task_id="{child.id}")'
        )
        output = await root.tools.invoke("task_output", {"task_id": child.id}, parent)
        assert output.content == f"{child.id} ended completed:\na b c"


async def test_task_output_and_task_cancel_refuse_another_agents_child(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only the owning agent reaches a child: another agent is refused, live or ended."""
    model = ScriptedModel(
        [[CallTool("task", {"agent": "slow", "prompt": "a b c d e", "background": True})], "ok"]
    )
    async with ag.open_runtime() as root:
        await root.agents.define("slow", description="slow echo", model="echo?delay=1")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        other = (await root.agents.create("echo", tools=TASK_TOOLS)).agent
        await parent.ask("go")
        (child,) = parent.children
        for name in ("task_output", "task_cancel"):
            refused = await root.tools.invoke(name, {"task_id": child.id}, other)
            assert (refused.content, refused.is_error) == (
                f"{child.id} is not a child of yours",
                True,
            )
        running = await root.tools.invoke("task_output", {"task_id": child.id}, parent)
        assert running.content == f"{child.id} is running (running)"
        cancelled = await root.tools.invoke("task_cancel", {"task_id": child.id}, parent)
        assert cancelled.content == f"{child.id} cancelled"
        await trio.testing.wait_all_tasks_blocked()
        assert parent.children == ()
        (end,) = ends(await stored_records(root, child.id))
        assert end.cause == ParentCancel(parent_id=parent.id)
        ended = await root.tools.invoke("task_output", {"task_id": child.id}, other)
        assert ended.content == f"{child.id} is not a child of yours"
        mine = await root.tools.invoke("task_output", {"task_id": child.id}, parent)
        assert re.match(rf"^{child.id} ended cancelled by ParentCancel\(", mine.content)


async def test_resume_asks_an_earlier_child_again_with_its_history() -> None:
    """``resume`` continues a child of the caller's (its history kept); another's is refused."""
    model = ScriptedModel([[CallTool("task", {"agent": "echoer", "prompt": "first"})], "ok"])
    async with ag.open_runtime() as root:
        await root.agents.define("echoer", description="echoes", model="echo")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        other = (await root.agents.create("echo", tools=TASK_TOOLS)).agent
        await parent.ask("go")
        (started,) = of(parent.session.records, ChildStarted)
        args = {"agent": "echoer", "prompt": "second", "resume": started.child_id}
        refused = await root.tools.invoke("task", args, other)
        assert refused.content == f"{started.child_id} is not a child of yours"
        again = await root.tools.invoke("task", args, parent)
        assert again.content.startswith("second\n\n")
        stored = await stored_records(root, started.child_id)
        assert [e.stop_reason for e in ends(stored)] == [StopReason.COMPLETED] * 2


# -- a process killed mid-task ---------------------------------------------------------------------


async def test_resume_after_sigkill_mid_task_closes_the_call_and_the_childs_turn(
    tmp_path: Path,
) -> None:
    """A real process SIGKILLed while its parent's task child streams: resuming the parent
    records the child's end as interrupted, the child's open turn is closed as interrupted,
    and the parent can ask the same child again."""
    directory = tmp_path / "sessions"
    worker = HELPERS / "task_worker.py"
    process = await trio.lowlevel.open_process(
        [sys.executable, str(worker), str(directory)], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive_some(1)
        child_id = line.decode().split()[1]
    finally:
        process.kill()
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
    assert process.returncode == -signal.SIGKILL
    async with ag.open_runtime(store=JsonlStore(directory)) as root:
        await root.agents.define("slow", description="slow echo", model="echo")
        parent = (await root.agents.resume("p")).agent
        records = parent.session.records
        (ended,) = of(records, ChildEnded)
        assert (ended.child_id, ended.stop_reason) == (child_id, StopReason.INTERRUPTED)
        assert ends(records)[-1].stop_reason is StopReason.INTERRUPTED
        child_ends = ends(await stored_records(root, child_id))
        assert [e.stop_reason for e in child_ends] == [StopReason.INTERRUPTED]
        args = {"agent": "slow", "prompt": "again", "resume": child_id}
        again = await root.tools.invoke("task", args, parent)
        assert again.content.startswith("again\n\n")


async def test_star_names_every_tool_and_the_explicit_ones_listed_beside_it() -> None:
    """tools=["*", "task"]: every plain tool and task (not task_output); calls of plain
    tools are allowed."""
    model = ScriptedModel([[CallTool("plan", {"steps": []})], "ok"])
    async with ag.open_runtime() as root:

        async def plan(ctx: ag.ToolContext[None], args: dict[str, Any]) -> str:
            await trio.lowlevel.checkpoint()
            return "planned"

        root.tools.register(ag.Tool("plan", "plans", None, plan, schema={"type": "object"}))
        agent = (await root.agents.create(model, tools=["*", "task"])).agent
        assert await agent.ask("go") == "ok"
        assert told(model) == ["task", "plan"]
        (result,) = results(agent)
        assert (result.content, result.is_error) == ("planned", False)


async def test_a_definitions_budget_stops_only_the_child_it_made(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child started from a definition with a budget of 2 output tokens that says three
    stops with its own BudgetExhausted; the call is an error the parent reads, and the
    parent's turn goes on to complete, as does its second child (an unbudgeted definition)."""
    model = ScriptedModel(
        [
            [
                CallTool("task", {"agent": "tight", "prompt": "one two three four"}),
                CallTool("task", {"agent": "free", "prompt": "five six seven"}),
            ],
            "carried on",
        ]
    )
    async with ag.open_runtime() as root:
        # Its model says three words and asks for a tool: the check before the call stops it.
        tight_model = ScriptedModel([[Say("one two three"), CallTool("plan", {})], "never"])
        await root.agents.define(
            "tight", description="t", model=tight_model, budget=ag.Budget(output_tokens=2)
        )
        await root.agents.define("free", description="f", model="echo?delay=1")
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        assert await parent.ask("go") == "carried on"
        started = {r.definition: r.child_id for r in of(parent.session.records, ChildStarted)}
        ended = {r.child_id: r for r in of(parent.session.records, ChildEnded)}
        tight, free = ended[started["tight"]], ended[started["free"]]
        assert tight.stop_reason is StopReason.CANCELLED
        assert isinstance(tight.cause, BudgetExhausted)
        assert (tight.cause.owner_id, tight.cause.limit) == (started["tight"], "output_tokens")
        assert (free.stop_reason, free.cause) == (StopReason.COMPLETED, None)
        by_call = {r.call_id: r for r in results(parent)}
        assert len(by_call) == 2
        assert sorted(r.is_error for r in by_call.values()) == [False, True]


async def test_a_plan_mode_agent_starts_children_that_only_read() -> None:
    """In plan mode task runs (it reads, by its children); the child is in plan mode too, so
    its call of a changing tool is refused."""
    child_model = ScriptedModel([[CallTool("bash", {"command": "touch x"})], "could not"])
    model = ScriptedModel([[CallTool("task", {"agent": "worker", "prompt": "go"})], "ok"])
    modes: list[str] = []
    async with ag.open_runtime() as root:
        root.on(ag.TaskStarted, lambda e: modes.append(root.agents.get(e.child_id).mode.id))
        await root.agents.define("worker", description="w", model=child_model)
        parent = (await root.agents.create(model, tools=TASK_TOOLS)).agent
        parent.set_mode("plan")
        assert await parent.ask("go") == "ok"
        (result,) = results(parent)
        assert not result.is_error
        assert result.content.startswith("could not\n\n")
        assert modes == ["plan"]
        (started,) = of(parent.session.records, ChildStarted)
        stored = await stored_records(root, started.child_id)
        (refused,) = of(stored, ToolCallEnded)
        assert refused.is_error
        assert not refused.started


async def test_a_resumed_parent_counts_what_its_ended_children_spent() -> None:
    """A parent's budget after a resume includes its children's spending, folded from its
    ChildEnded records: 1 output token of its own and 3 of its child's, then 2 more spend a
    budget of 5, so the next turn stops at its first request."""
    store = MemoryStore()
    first = ScriptedModel([[CallTool("task", {"agent": "echoer", "prompt": "a b c"})], "ok"])
    async with ag.open_runtime(store=store) as root:
        await root.agents.define("echoer", description="echoes", model="echo")
        handle = await root.agents.create(
            first, session_id="p", tools=TASK_TOOLS, budget=ag.Budget(output_tokens=5)
        )
        assert await handle.agent.ask("go") == "ok"
        (ended,) = of(handle.agent.session.records, ChildEnded)
        assert (ended.output_tokens, ended.requests, ended.turns) == (3, 1, 1)
        await handle.dispose()
        again = (await root.agents.resume("p", model=ScriptedModel(["x y", "z"]))).agent
        assert await again.ask("more") == "x y"  # the request that spends it ends its turn
        with pytest.raises(ag.TurnFailedError) as failed:
            await again.ask("again")
        assert failed.value.record.cause == BudgetExhausted("p", "output_tokens", 6, 5)
