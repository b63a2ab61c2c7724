"""Approval: the one seam (an agent's Approver) before a call marked ask runs, in plain trio."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.paths import SERVERS
from tests.helpers.support import Tools
from trio_agents.cancel import DisposedCancel, UserCancel
from trio_agents.mcp import McpServer
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import (
    AgentConfigured,
    InboxSpliced,
    JsonlStore,
    StopReason,
    ToolApproval,
    ToolCallEnded,
    TurnEnded,
)


class Asker:
    """An approver that plays a script of answers, optionally holding each question open."""

    name = "scripted"

    def __init__(self, *answers: ta.Decision | ta.Refusal, hold: bool = False) -> None:
        self.answers = list(answers)
        self.requests: list[ta.ApprovalRequest] = []
        self.hold = hold
        self.asking = trio.Event()
        self.release = trio.Event()

    async def approve(self, request: ta.ApprovalRequest) -> ta.Decision | ta.Refusal:
        self.requests.append(request)
        self.asking.set()
        if self.hold:
            await self.release.wait()
        else:
            await trio.lowlevel.checkpoint()
        return self.answers.pop(0)


def writer(ran: list[str], *, ask: bool = True) -> ag.Tool:
    @ta.tool(ask=ask)
    async def write(text: str) -> str:
        """Write some text."""
        ran.append(text)
        return f"wrote {text}"

    return write


def calls(*texts: str) -> ScriptedModel:
    """One turn per text: call ``write`` with it, then say ``ok``."""
    replies: list[Sequence[CallTool | Say]] = []
    for text in texts:
        replies += [[CallTool("write", {"text": text})], [Say("ok")]]
    return ScriptedModel(replies)


def of(agent: ag.Agent, kind: type) -> list:  # type: ignore[type-arg]
    return [r for r in agent.session.records if isinstance(r, kind)]


async def run_prompts(agent: ag.Agent, count: int) -> None:
    for n in range(count):
        agent.prompt(f"go {n}")
        await agent.when_idle()


async def test_allow_once_runs_the_call_and_asks_again_next_time() -> None:
    """allow_once: the tool runs, the answer is recorded, and the next call is asked again."""
    ran: list[str] = []
    asker = Asker(ta.Decision.ALLOW_ONCE, ta.Decision.ALLOW_ONCE)
    async with ag.open_runtime(model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 2)
        assert ran == ["a", "b"]
        assert [r.tool for r in asker.requests] == ["write", "write"]
        request = asker.requests[0]
        assert (request.agent_id, request.call_id) == (agent.id, "call-1")
        assert dict(request.arguments) == {"text": "a"}
        assert request.title == 'write {"text": "a"}'
        assert request.description == "Write some text."
        approvals = of(agent, ToolApproval)
        assert [(r.turn_id, r.call_id, r.decision, r.by) for r in approvals] == [
            ("t-1", "call-1", "allow_once", "scripted"),
            ("t-2", "call-2", "allow_once", "scripted"),
        ]
        # The answer is recorded before the call's result.
        records = agent.session.records
        first_result = next(r for r in records if isinstance(r, ToolCallEnded))
        assert approvals[0].seq < first_result.seq


async def test_allow_always_runs_later_calls_unasked() -> None:
    """allow_always: the second call of the tool is not asked, and is recorded as standing."""
    ran: list[str] = []
    asker = Asker(ta.Decision.ALLOW_ALWAYS)
    async with ag.open_runtime(model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 2)
        assert ran == ["a", "b"]
        assert len(asker.requests) == 1
        assert [(r.decision, r.by) for r in of(agent, ToolApproval)] == [
            ("allow_always", "scripted"),
            ("allow_always", "standing answer"),
        ]


async def test_reject_answers_the_model_and_the_turn_goes_on() -> None:
    """reject_once: not run, an error result the model reads, the turn completes."""
    ran: list[str] = []
    asker = Asker(ta.Decision.REJECT_ONCE, ta.Decision.ALLOW_ONCE)
    async with ag.open_runtime(model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 2)
        assert ran == ["b"]
        result = of(agent, ToolCallEnded)[0]
        assert result.is_error
        assert not result.started
        assert result.content.startswith("the user refused to let tool 'write' run;")
        assert [r.stop_reason for r in of(agent, TurnEnded)] == [StopReason.COMPLETED] * 2
        assert len(asker.requests) == 2


async def test_reject_always_refuses_later_calls_unasked() -> None:
    """reject_always: the later call is refused without a question."""
    ran: list[str] = []
    asker = Asker(ta.Decision.REJECT_ALWAYS)
    async with ag.open_runtime(model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 2)
        assert ran == []
        assert len(asker.requests) == 1
        results = of(agent, ToolCallEnded)
        assert all("every later call of it" in r.content for r in results)


async def test_a_refusal_tells_the_model_its_reason() -> None:
    """A Refusal's reason is what the model reads."""
    ran: list[str] = []
    asker = Asker(ta.Refusal("refused: run with --yes to allow"))
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 1)
        assert ran == []
        assert of(agent, ToolCallEnded)[0].content == "refused: run with --yes to allow"
        assert of(agent, ToolApproval)[0].decision == "reject_once"


async def test_cancel_answer_stops_the_turn_with_user_cancel() -> None:
    """Decision.CANCEL: not run, the turn ends cancelled by UserCancel."""
    ran: list[str] = []
    asker = Asker(ta.Decision.CANCEL)
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 1)
        assert ran == []
        (ended,) = of(agent, TurnEnded)
        assert (ended.stop_reason, ended.cause) == (StopReason.CANCELLED, UserCancel())
        result = of(agent, ToolCallEnded)[0]
        assert (result.content, result.started) == (
            "the user cancelled; tool 'write' did not run",
            False,
        )
        assert of(agent, ToolApproval)[0].decision == "cancel"


async def test_cancel_answer_is_the_agents_public_stop_and_clears_the_queue() -> None:
    """Decision.CANCEL goes through Agent.cancel(): AgentCancelRequested is emitted before the
    turn is aborted, and a prompt queued behind the turn never runs."""
    ran: list[str] = []
    asker = Asker(ta.Decision.CANCEL, hold=True)
    seen: list[str] = []
    async with ag.open_runtime(model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent

        def requested(event: ta.AgentCancelRequested) -> None:
            turn = agent._turn
            seen.append("aborted" if turn is not None and turn.scope.cancel_called else "first")

        root.on(ta.AgentCancelRequested, requested)
        agent.prompt("go 0")
        await asker.asking.wait()
        queued = agent.prompt("go 1")
        asker.release.set()
        await agent.when_idle()
        assert seen == ["first"]
        assert ran == []
        assert len(of(agent, TurnEnded)) == 1
        removed = [(r.op, r.reason) for r in of(agent, InboxSpliced) if r.message_id == queued]
        assert removed == [("add", None), ("remove", "cancelled")]


@pytest.mark.parametrize("checkpoints", [0, 1, 2, 3])
async def test_cancel_while_asking_runs_nothing(checkpoints: int) -> None:
    """A cancel at any checkpoint of the question: unrun, unrecorded answer, typed cause."""
    ran: list[str] = []

    class Slow:
        async def approve(self, request: ta.ApprovalRequest) -> ta.Decision:
            for n in range(4):
                if n == checkpoints:
                    assert agent.cancel(UserCancel())
                await trio.lowlevel.checkpoint()
            return ta.Decision.ALLOW_ONCE

    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=Slow())).agent
        await run_prompts(agent, 1)
        assert ran == []
        assert of(agent, ToolApproval) == []
        result = of(agent, ToolCallEnded)[0]
        assert (result.content, result.started) == ("cancelled before it started", False)
        (ended,) = of(agent, TurnEnded)
        assert (ended.stop_reason, ended.cause) == (StopReason.CANCELLED, UserCancel())


async def test_a_cancel_as_the_answer_arrives_still_runs_nothing() -> None:
    """The approver allows after the turn was cancelled (no checkpoint between): unrun."""
    ran: list[str] = []

    class Late:
        async def approve(self, request: ta.ApprovalRequest) -> ta.Decision:
            await trio.lowlevel.checkpoint()
            agent.cancel(UserCancel())
            return ta.Decision.ALLOW_ONCE

    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=Late())).agent
        await run_prompts(agent, 1)
        assert ran == []
        assert not of(agent, ToolCallEnded)[0].started


async def test_dispose_while_asking_ends_the_call_disposed() -> None:
    """Disposing the agent while the question is open: unrun, the turn records DisposedCancel."""
    ran: list[str] = []
    asker = Asker(ta.Decision.ALLOW_ONCE, hold=True)
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran)))
        handle = await root.agents.create(approver=asker)
        handle.agent.prompt("go")
        await asker.asking.wait()
        await handle.dispose()
        assert ran == []
        (ended,) = of(handle.agent, TurnEnded)
        assert (ended.stop_reason, ended.cause) == (StopReason.CANCELLED, DisposedCancel())
        assert not of(handle.agent, ToolCallEnded)[0].started


async def test_without_an_approver_a_marked_call_is_refused() -> None:
    """Nobody to ask: refused with a message that says so; unmarked tools still run."""
    ran: list[str] = []
    model = ScriptedModel(
        [[CallTool("write", {"text": "a"}), CallTool("free", {"text": "b"})], [Say("ok")]]
    )
    async with ag.open_runtime(model=model) as root:
        free = ag.Tool("free", "Free.", writer(ran).params, writer(ran).fn)
        await root.plugin(Tools(writer(ran), free))
        agent = (await root.agents.create()).agent
        await run_prompts(agent, 1)
        assert ran == ["b"]
        refused = next(r for r in of(agent, ToolCallEnded) if r.name == "write")
        assert refused.content.startswith("tool 'write' needs approval and nobody can be asked")
        assert of(agent, ToolApproval) == []


async def test_a_call_without_an_agent_is_refused() -> None:
    """tools.invoke of a marked tool with no agent: refused, not run."""
    ran: list[str] = []
    async with ag.open_runtime() as root:
        await root.plugin(Tools(writer(ran)))
        tools: ag.ToolRegistry = root.get("tools")
        result = await tools.invoke("write", {"text": "a"})
        assert result.is_error
        assert not result.started
        assert "has nobody to ask" in result.content
        assert ran == []


async def test_a_failing_approver_refuses(caplog: pytest.LogCaptureFixture) -> None:
    """An approver that raises: refused (fail closed), logged, the turn goes on."""
    ran: list[str] = []

    class Broken:
        async def approve(self, request: ta.ApprovalRequest) -> ta.Decision:
            raise RuntimeError("the terminal is gone")

    with caplog.at_level(logging.ERROR, "trio_agents"):
        async with ag.open_runtime(model=calls("a")) as root:
            await root.plugin(Tools(writer(ran)))
            agent = (await root.agents.create(approver=Broken())).agent
            await run_prompts(agent, 1)
    assert ran == []
    assert "asking for approval failed: the terminal is gone" in of(agent, ToolCallEnded)[0].content
    assert of(agent, TurnEnded)[0].stop_reason is StopReason.COMPLETED
    assert "the approver of tool 'write' failed" in caplog.text


async def test_unmarked_tools_are_never_asked() -> None:
    """A tool not marked ask, and named nowhere, runs without a question."""
    ran: list[str] = []
    asker = Asker()
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        agent = (await root.agents.create(approver=asker)).agent
        await run_prompts(agent, 1)
        assert ran == ["a"]
        assert asker.requests == []


async def test_require_approval_marks_names_for_as_long_as_its_entry_lives() -> None:
    """tools.require_approval(names) asks about those tools until its entry closes."""
    ran: list[str] = []
    asker = Asker(ta.Decision.ALLOW_ONCE)
    async with ag.open_runtime(model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        tools: ag.ToolRegistry = root.get("tools")
        entry = tools.require_approval(["write", "not-yet-registered"])
        agent = (await root.agents.create(approver=asker)).agent
        assert tools.needs_approval("write", agent=agent)
        await run_prompts(agent, 1)
        await entry.close()
        assert not tools.needs_approval("write", agent=agent)
        await run_prompts(agent, 1)
        assert ran == ["a", "b"]
        assert len(asker.requests) == 1
        with pytest.raises(TypeError, match=r"^require_approval\(\) takes tool names"):
            tools.require_approval("write")


async def test_ask_in_the_definition_is_recorded_and_kept_on_resume(tmp_path: Path) -> None:
    """create(ask=...) asks about those tools; the definition records it, resume keeps it."""
    ran: list[str] = []
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        asker = Asker(ta.Decision.ALLOW_ONCE)
        handle = await root.agents.create(session_id="s", ask=["write"], approver=asker)
        await run_prompts(handle.agent, 1)
        assert len(asker.requests) == 1
        await handle.dispose()
        asker = Asker(ta.Decision.REJECT_ONCE)
        resumed = await root.agents.resume("s", approver=asker)
        assert resumed.agent.config.ask == ("write",)
        await run_prompts(resumed.agent, 1)
        assert ran == ["a"]
        assert len(asker.requests) == 1
        assert of(resumed.agent, AgentConfigured)[-1].ask == ["write"]


async def test_standing_answers_are_restored_on_resume(tmp_path: Path) -> None:
    """An allow_always answer written to the session still stands after a resume."""
    ran: list[str] = []
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=calls("a", "b")) as root:
        await root.plugin(Tools(writer(ran)))
        handle = await root.agents.create(session_id="s", approver=Asker(ta.Decision.ALLOW_ALWAYS))
        await run_prompts(handle.agent, 1)
        await handle.dispose()
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=calls("b")) as root:
        await root.plugin(Tools(writer(ran)))
        never = Asker()
        resumed = await root.agents.resume("s", approver=never)
        assert resumed.agent._approvals.standing() == {"write": ta.Decision.ALLOW_ALWAYS}
        await run_prompts(resumed.agent, 1)
        assert ran == ["a", "b"]
        assert never.requests == []
        assert [r.by for r in of(resumed.agent, ToolApproval)] == ["scripted", "standing answer"]


async def test_the_approver_can_be_set_later_and_is_checked() -> None:
    """agent.approver is set by the front end that shows an agent; a non-approver is refused."""
    ran: list[str] = []
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create()).agent
        assert agent.approver is None
        with pytest.raises(TypeError, match=r"^an approver has 'async def approve"):
            agent.approver = object()
        asker = Asker(ta.Decision.ALLOW_ONCE)
        agent.approver = asker
        await run_prompts(agent, 1)
        assert ran == ["a"]


def test_the_title_names_a_command_and_is_one_bounded_line() -> None:
    """ApprovalRequest.title: ``bash: CMD``, or the name and the arguments, one line, bounded."""
    assert ta.ApprovalRequest("a", "bash", {"command": "ls\n -l"}).title == "bash: ls -l"
    assert ta.ApprovalRequest("a", "now", {}).title == "now"
    long = ta.ApprovalRequest("a", "write", {"text": "x" * 500}).title
    assert len(long) == 200
    assert long.endswith("…")


async def test_an_mcp_servers_ask_list_marks_its_tools() -> None:
    """McpServer(ask=[...]) marks those of the server's tools; a refused call never reaches it."""
    server_py = str(SERVERS / "tools_server.py")
    model = ScriptedModel(
        [[CallTool("t__add", {"a": 1, "b": 2}), CallTool("t__pid", {})], [Say("ok")]]
    )
    asker = Asker(ta.Decision.REJECT_ONCE)
    async with ag.open_runtime(model=model) as root:
        with trio.fail_after(30):
            await root.plugin(McpServer("t", command=sys.executable, args=[server_py], ask=["add"]))
        tools: ag.ToolRegistry = root.get("tools")
        assert [n for n in tools.names() if tools.get(n).ask] == ["t__add"]  # type: ignore[union-attr]
        agent = (await root.agents.create(approver=asker)).agent
        with trio.fail_after(30):
            await run_prompts(agent, 1)
        assert [r.tool for r in asker.requests] == ["t__add"]
        results = {r.name: r for r in of(agent, ToolCallEnded)}
        assert results["t__add"].is_error
        assert not results["t__pid"].is_error


async def test_calls_of_one_step_are_asked_in_turn_and_always_covers_the_rest() -> None:
    """Three concurrent calls: one question at a time; allow_always answers all of them."""
    ran: list[str] = []
    model = ScriptedModel([[CallTool("write", {"text": t}) for t in "abc"], [Say("ok")]])
    asker = Asker(ta.Decision.ALLOW_ALWAYS, hold=True)
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(writer(ran)))
        agent = (await root.agents.create(approver=asker)).agent
        agent.prompt("go")
        await asker.asking.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert len(asker.requests) == 1
        asker.release.set()
        await agent.when_idle()
        assert sorted(ran) == ["a", "b", "c"]
        assert len(asker.requests) == 1
        assert sorted(r.by for r in of(agent, ToolApproval)) == [
            "scripted",
            "standing answer",
            "standing answer",
        ]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["write", "erase"]),
            st.sampled_from(list(ta.Decision.__members__.values())),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_any_sequence_of_answers_matches_the_model(
    plan: list[tuple[str, ta.Decision]],
) -> None:
    """Sequential calls of two tools with random answers: what ran, what was asked, the
    records and the stop reasons follow the rules (always answers stand per tool)."""
    ran: list[str] = []

    class Scripted:
        name = "plan"

        def __init__(self) -> None:
            self.asked: list[str] = []

        async def approve(self, request: ta.ApprovalRequest) -> ta.Decision:
            await trio.lowlevel.checkpoint()
            self.asked.append(request.arguments["text"])
            return plan[int(request.arguments["text"])][1]

    # The model of the rules.
    standing: dict[str, ta.Decision] = {}
    expect_ran, expect_asked, expect_stop = [], [], []
    for n, (name, answer) in enumerate(plan):
        decision = standing.get(name)
        if decision is None:
            expect_asked.append(str(n))
            decision = answer
            if answer in (ta.Decision.ALLOW_ALWAYS, ta.Decision.REJECT_ALWAYS):
                standing[name] = answer
        if decision in (ta.Decision.ALLOW_ONCE, ta.Decision.ALLOW_ALWAYS):
            expect_ran.append(str(n))
        cancelled = decision is ta.Decision.CANCEL
        expect_stop.append(StopReason.CANCELLED if cancelled else StopReason.COMPLETED)
    # A cancelled turn never asks the model again, so its script has no answer.
    replies: list[Sequence[CallTool | Say]] = []
    for n, (name, _) in enumerate(plan):
        replies.append([CallTool(name, {"text": str(n)})])
        if expect_stop[n] is StopReason.COMPLETED:
            replies.append([Say("ok")])

    async def main() -> None:
        approver = Scripted()
        async with ag.open_runtime(model=ScriptedModel(replies)) as root:
            erase = ag.Tool("erase", "Erase.", writer(ran).params, writer(ran).fn, ask=True)
            await root.plugin(Tools(writer(ran), erase))
            agent = (await root.agents.create(approver=approver)).agent
            for n in range(len(plan)):
                agent.prompt(f"go {n}")
                await agent.when_idle()
            assert approver.asked == expect_asked
            assert ran == expect_ran
            assert [r.stop_reason for r in of(agent, TurnEnded)] == expect_stop
            assert len(of(agent, ToolApproval)) == len(plan)

    trio.run(main)


async def test_a_child_inherits_its_parents_approver_and_ask() -> None:
    """A child created without approver or ask is asked about its parent's ask, by the
    parent's approver (the one the parent has when the call comes)."""
    ran: list[str] = []
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        parent = (await root.agents.create(ask=["write"])).agent
        child = (await root.agents.create(parent=parent)).agent
        asker = Asker(ta.Decision.ALLOW_ONCE)
        parent.approver = asker
        assert child.approver is asker
        await run_prompts(child, 1)
        assert ran == ["a"]
        assert [r.tool for r in asker.requests] == ["write"]


async def test_a_child_inherits_what_its_parents_approver_asks_about() -> None:
    """An approver's own ask (the ACP bridge's "always ask about bash") reaches the child."""

    class Strict(Asker):
        ask = frozenset({"write"})

    ran: list[str] = []
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        asker = Strict(ta.Decision.REJECT_ONCE)
        parent = (await root.agents.create(approver=asker)).agent
        child = (await root.agents.create(parent=parent)).agent
        await run_prompts(child, 1)
        assert ran == []
        assert [r.agent_id for r in asker.requests] == [child.id]


async def test_a_child_with_its_own_approver_and_ask_uses_them() -> None:
    """Given its own approver and ask, the child is asked by its own about its own tools."""
    ran: list[str] = []
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        theirs, mine = Asker(), Asker(ta.Decision.ALLOW_ONCE)
        parent = (await root.agents.create(ask=["other"], approver=theirs)).agent
        child = (await root.agents.create(parent=parent, ask=["write"], approver=mine)).agent
        await run_prompts(child, 1)
        assert ran == ["a"]
        assert (len(theirs.requests), len(mine.requests)) == (0, 1)


async def test_a_child_with_asked_tools_and_nobody_to_ask_refuses_them() -> None:
    """Neither the child nor its parent has an approver: the inherited ask fails closed."""
    ran: list[str] = []
    async with ag.open_runtime(model=calls("a")) as root:
        await root.plugin(Tools(writer(ran, ask=False)))
        parent = (await root.agents.create(ask=["write"])).agent
        child = (await root.agents.create(parent=parent)).agent
        await run_prompts(child, 1)
        assert ran == []
        (ended,) = of(child, ToolCallEnded)
        assert re.match(r"^tool 'write' needs approval and nobody can be asked here", ended.content)
