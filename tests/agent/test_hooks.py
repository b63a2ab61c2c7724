"""Hooks: every point in order, vetoes and edits at each, failures under a policy, reload."""

from __future__ import annotations

import importlib
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import Tools
from trio_agents.cancel import HookCancel
from trio_agents.kernel import Context
from trio_agents.model import CallTool, ModelRequest, Say, ScriptedModel
from trio_agents.session import (
    AssistantMessage,
    InboxSpliced,
    JsonlStore,
    Record,
    StopReason,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
    load_record,
)


@attrs.frozen
class EchoParams:
    text: str


def echo_tool(ran: list[str]) -> ag.Tool:
    async def run(call: ag.ToolContext, params: EchoParams) -> str:
        ran.append(params.text)
        return f"echoed {params.text}"

    return ag.Tool("echo", "Echo the text.", EchoParams, run)


def spawn_tool() -> ag.Tool:
    async def run(call: ag.ToolContext, params: None) -> str:
        child = await call.start_child(session_id="child")
        await child.dispose()
        return "spawned"

    return ag.Tool("spawn", "Start a child and dispose it.", None, run)


@attrs.define
class CompactOnce:
    """A policy due once, that keeps the current turn (a real, recorded compaction)."""

    used: bool = False

    def due(self, context: ag.ContextUsage) -> bool:
        return not self.used

    async def compact(self, request: ag.CompactionRequest) -> ag.Compaction | None:
        self.used = True
        return ag.Compaction(summary="", kept_from_seq=request.turns[-1].seq)


class Hooked:
    """A plugin adding ``hooks`` (point, fn, keyword arguments) on its own fiber."""

    name = "hooked"
    inject = ("hooks",)

    def __init__(self, *hooks: tuple[Any, Any, dict[str, Any]]) -> None:
        self.hooks = hooks

    async def apply(self, ctx: Context, config: None) -> None:
        for point, fn, options in self.hooks:
            await ctx.hooks.add(point, fn, **options)


def at(point: Any, fn: Any, **options: Any) -> tuple[Any, Any, dict[str, Any]]:
    return (point, fn, options)


def veto(reason: str) -> Any:
    async def hook(event: object) -> HookCancel:
        return HookCancel(reason)

    return hook


def of(records: tuple[Record, ...], kind: type) -> list[Any]:
    return [r for r in records if isinstance(r, kind)]


def stored(directory: Path, agent_id: str) -> tuple[Record, ...]:
    """The agent's records as written to its file (after its agent was disposed)."""
    lines = (directory / f"{agent_id}.jsonl").read_text(encoding="utf-8").splitlines()
    return tuple(load_record(line) for line in lines[1:])


async def test_every_point_fires_in_order_in_one_scripted_turn(tmp_path: Path) -> None:
    """One turn with a compaction, a tool call that starts and ends a child, then dispose."""
    journal: list[str] = []

    def note(event: Any) -> None:
        journal.append(f"{type(event).__name__} {event.agent_id}")

    async def anote(event: Any) -> None:
        note(event)

    hooks = [at(name, note if name == "prompt_accepted" else anote) for name in ag.HOOK_POINTS]
    model = ScriptedModel([[CallTool("spawn", {})], [Say("done")]])
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(model=model, compactor=CompactOnce(), store=store) as root:
        await root.plugin(Tools(spawn_tool()))
        await root.plugin(Hooked(*hooks))
        handle = await root.agents.create(session_id="lead")
        assert await handle.agent.ask("go") == "done"
        await handle.dispose()
    assert journal == [
        "PromptAccepted lead",
        "TurnStart lead",
        "PreCompact lead",
        "PostCompact lead",
        "PreModel lead",
        "PostModel lead",
        "PreTool lead",
        "ChildStart lead",
        "ChildEnd lead",
        "AgentDispose child",
        "PostTool lead",
        "PreModel lead",
        "PostModel lead",
        "TurnEnd lead",
        "AgentDispose lead",
    ]


async def test_a_vetoed_prompt_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    """prompt() and ask() raise HookRefusedError; the session holds no trace of the text."""

    def no_secrets(event: ag.PromptAccepted) -> HookCancel | None:
        return HookCancel("it holds a secret") if "secret" in event.content else None

    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store) as root:
        await root.plugin(Hooked(at(ag.PROMPT_ACCEPTED, no_secrets)))
        handle = await root.agents.create(session_id="a")
        agent = handle.agent
        with pytest.raises(ag.HookRefusedError, match=r"^agent a refused the message: it holds"):
            agent.prompt("my secret")
        with pytest.raises(ag.HookRefusedError) as caught:
            await agent.ask("another secret")
        assert caught.value.cause == HookCancel("it holds a secret")
        assert await agent.ask("fine") == "fine"
        await handle.dispose()
    records = stored(tmp_path, "a")
    assert [r.content for r in of(records, InboxSpliced)] == ["fine"]
    assert not any("secret" in repr(r) for r in records)


@pytest.mark.parametrize("point", ["turn_start", "pre_model", "post_model", "turn_end"])
async def test_a_veto_in_the_turn_ends_it_blocked_with_the_reason_durably(
    point: str, tmp_path: Path
) -> None:
    """The turn ends blocked; TurnEnded carries the HookCancel, also read back from the store."""
    store = JsonlStore(tmp_path)
    model = ScriptedModel([[Say("the answer")]])
    async with ag.open_runtime(store=store, model=model) as root:
        await root.plugin(Hooked(at(point, veto(f"no {point}"))))
        handle = await root.agents.create(session_id="a")
        with pytest.raises(ag.TurnFailedError, match=r"^turn t-1 of agent a ended blocked by "):
            await handle.agent.ask("go")
        await handle.dispose()
    [ended] = of(stored(tmp_path, "a"), TurnEnded)
    assert ended.stop_reason is StopReason.BLOCKED
    assert ended.cause == HookCancel(f"no {point}")
    asked = point in {"post_model", "turn_end"}
    assert len(model.requests) == (1 if asked else 0)


async def test_pre_model_edits_the_request_the_model_sees() -> None:
    """A pre_model hook's ModelRequest is what is sent; the next hook sees the edit."""
    seen: list[int] = []

    async def drop_history(event: ag.PreModel) -> ModelRequest:
        return attrs.evolve(event.request, messages=event.request.messages[-1:])

    async def count(event: ag.PreModel) -> None:
        seen.append(len(event.request.messages))

    model = ScriptedModel.echo()
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Hooked(at(ag.PRE_MODEL, drop_history), at(ag.PRE_MODEL, count)))
        agent = (await root.agents.create(instructions="be brief")).agent
        assert await agent.ask("one") == "one"
        assert await agent.ask("two") == "two"
    assert seen == [1, 1]
    assert [len(r.messages) for r in model.requests] == [1, 1]


async def test_a_vetoed_tool_call_is_an_unstarted_error_result_the_model_reads(
    tmp_path: Path,
) -> None:
    """The tool does not run; the result names the reason; the turn goes on and completes."""
    ran: list[str] = []
    store = JsonlStore(tmp_path)
    model = ScriptedModel([[CallTool("echo", {"text": "hi"})], [Say("ok")]])
    async with ag.open_runtime(store=store, model=model) as root:
        await root.plugin(Tools(echo_tool(ran)))
        await root.plugin(Hooked(at(ag.PRE_TOOL, veto("not today"), match="ech.")))
        handle = await root.agents.create(session_id="a")
        assert await handle.agent.ask("go") == "ok"
        await handle.dispose()
    assert ran == []
    [ended] = of(stored(tmp_path, "a"), ToolCallEnded)
    assert (ended.is_error, ended.started) == (True, False)
    assert ended.content == "tool call 'echo' was blocked by a hook: not today"
    assert "not today" in str(model.requests[-1].messages[-1])


async def test_pre_tool_edits_arguments_or_answers_instead() -> None:
    """Edited arguments reach the tool; an answered ToolResult replaces the call unstarted."""
    ran: list[str] = []

    async def louder(event: ag.PreTool) -> dict[str, Any]:
        return {"text": str(event.arguments["text"]).upper()}

    async def cached(event: ag.PreTool) -> ag.ToolResult | None:
        if event.arguments["text"] == "CACHED":
            return ag.ToolResult("from the cache")
        return None

    model = ScriptedModel(
        [
            [CallTool("echo", {"text": "hi"})],
            [CallTool("echo", {"text": "cached"})],
            [Say("ok")],
        ]
    )
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(echo_tool(ran)))
        await root.plugin(Hooked(at(ag.PRE_TOOL, louder), at(ag.PRE_TOOL, cached)))
        agent = (await root.agents.create()).agent
        assert await agent.ask("go") == "ok"
        ended = of(agent.session.records, ToolCallEnded)
    assert ran == ["HI"]
    assert [(e.content, e.started) for e in ended] == [
        ("echoed HI", True),
        ("from the cache", False),
    ]


async def test_post_tool_edits_or_withholds_the_result() -> None:
    """A post_tool ToolResult replaces the result; a veto withholds it (it had run)."""
    ran: list[str] = []

    async def redact(event: ag.PostTool) -> ag.ToolResult | HookCancel:
        if event.arguments["text"] == "bad":
            return HookCancel("it leaks")
        return attrs.evolve(event.result, content=event.result.content.replace("a", "*"))

    model = ScriptedModel(
        [[CallTool("echo", {"text": "a cat"})], [CallTool("echo", {"text": "bad"})], [Say("k")]]
    )
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(echo_tool(ran)))
        await root.plugin(Hooked(at(ag.POST_TOOL, redact, match="echo")))
        agent = (await root.agents.create()).agent
        await agent.ask("go")
        ended = of(agent.session.records, ToolCallEnded)
    assert ran == ["a cat", "bad"]
    assert [(e.content, e.is_error, e.started) for e in ended] == [
        ("echoed * c*t", False, True),
        ("the result of tool 'echo' was withheld by a hook: it leaks", True, True),
    ]


async def test_a_vetoed_compaction_blocks_the_turn_and_refuses_compact(tmp_path: Path) -> None:
    """pre_compact: a turn that needed it ends blocked; compact() raises with the veto."""
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store, compactor=CompactOnce()) as root:
        await root.plugin(Hooked(at(ag.PRE_COMPACT, veto("keep it all"))))
        handle = await root.agents.create(session_id="a")
        with pytest.raises(
            ag.TurnFailedError,
            match=r"^turn t-1 of agent a ended blocked by HookCancel\(reason='keep it all'\): "
            r"compaction blocked by a hook: keep it all; the history is unchanged ",
        ):
            await handle.agent.ask("go")
        with pytest.raises(ag.CompactionError, match=r"^compaction blocked by a hook: keep") as e:
            await handle.agent.compact()
        assert e.value.cause == HookCancel("keep it all")
        await handle.dispose()
    [ended] = of(stored(tmp_path, "a"), TurnEnded)
    assert (ended.stop_reason, ended.cause) == (StopReason.BLOCKED, HookCancel("keep it all"))


async def test_a_vetoed_child_is_never_created(tmp_path: Path) -> None:
    """child_start vetoes a child of a matching id: create raises, nothing is stored."""
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store) as root:
        await root.plugin(Hooked(at(ag.CHILD_START, veto("no kids"), match="kid-.*")))
        lead = await root.agents.create(session_id="lead")
        with pytest.raises(ag.HookRefusedError, match=r"^child agent kid-1 of agent lead was"):
            await root.agents.create(session_id="kid-1", parent=lead.agent)
        other = await root.agents.create(session_id="other", parent=lead.agent)
        assert [c.id for c in lead.agent.children] == ["other"]
        await other.dispose()
        assert root.agents.get("kid-1") is None
        assert not await store.is_stored("kid-1")
        await lead.dispose()


@pytest.mark.parametrize(
    ("policy", "stop"), [("fail_open", StopReason.COMPLETED), ("fail_closed", StopReason.BLOCKED)]
)
async def test_a_failing_hook_is_contained_and_its_policy_decides(
    policy: str, stop: StopReason
) -> None:
    """A raising hook is reported (HookFailed) and the turn goes on or ends blocked."""
    failed: list[ag.HookFailed] = []

    async def broken(event: ag.TurnStart) -> None:
        raise RuntimeError("boom")

    async with ag.open_runtime() as root:
        root.on(ag.HookFailed, failed.append)
        await root.plugin(Hooked(at(ag.TURN_START, broken, policy=policy, name="broken")))
        agent = (await root.agents.create(session_id="a")).agent
        agent.prompt("go")
        await agent.when_idle()
        [ended] = of(agent.session.records, TurnEnded)
    assert ended.stop_reason is stop
    assert failed == [ag.HookFailed("a", "turn_start", "broken", "RuntimeError: boom", policy)]  # type: ignore[arg-type]
    if policy == "fail_closed":
        assert ended.cause == HookCancel("hook broken failed (RuntimeError: boom) and fails closed")


SLOW = (
    r"^turn t-1 of agent \S+ ended blocked by HookCancel\(reason='hook slow failed "
    r"\(timed out after 5 s\) and fails closed'\) "
)


async def test_a_hook_past_its_timeout_has_failed(autojump_clock: trio.testing.MockClock) -> None:
    """A hook still running at its timeout is stopped there and counts as failed."""
    failed: list[ag.HookFailed] = []

    async def slow(event: ag.PreModel) -> None:
        await trio.sleep(100)

    async with ag.open_runtime() as root:
        root.on(ag.HookFailed, failed.append)
        await root.plugin(
            Hooked(at(ag.PRE_MODEL, slow, timeout=5, policy="fail_closed", name="slow"))
        )
        agent = (await root.agents.create()).agent
        start = trio.current_time()
        with pytest.raises(
            ag.TurnFailedError,
            match=SLOW,
        ):
            await agent.ask("go")
        assert trio.current_time() - start == pytest.approx(5)
    assert [f.error for f in failed] == ["timed out after 5 s"]


async def test_a_hook_answering_what_its_point_does_not_take_has_failed() -> None:
    """A str from a turn_start hook is a failure (named), not an accident."""
    failed: list[ag.HookFailed] = []

    async def wrong(event: ag.TurnStart) -> str:
        return "yes"

    async with ag.open_runtime() as root:
        root.on(ag.HookFailed, failed.append)
        await root.plugin(Hooked(at("turn_start", wrong)))
        agent = (await root.agents.create()).agent
        assert await agent.ask("go") == "go"
    assert re.match(r"^answered str 'yes'; turn_start takes None, HookCancel$", failed[0].error)


async def test_a_hook_for_one_agent_leaves_the_others_alone() -> None:
    """agent= limits a hook to that agent id."""
    async with ag.open_runtime() as root:
        await root.plugin(Hooked(at(ag.TURN_START, veto("not you"), agent="a")))
        a = (await root.agents.create(session_id="a")).agent
        b = (await root.agents.create(session_id="b")).agent
        assert await b.ask("hi") == "hi"
        with pytest.raises(
            ag.TurnFailedError,
            match=r"^turn t-1 of agent a ended blocked by HookCancel\(reason='not you'\) ",
        ):
            await a.ask("hi")


@pytest.mark.parametrize(
    ("point", "options", "error"),
    [
        ("nowhere", {}, r"^unknown hook point 'nowhere'; the points: prompt_accepted, "),
        ("turn_start", {"match": "x"}, r"^turn_start has nothing to match; "),
        ("pre_tool", {"match": "("}, r"^match '\(' is not a regular expression: "),
        ("pre_tool", {"policy": "maybe"}, r"^a hook's policy is 'fail_open' or 'fail_closed'"),
        ("pre_tool", {"timeout": 0}, r"^a hook's timeout is a number of seconds > 0, or None; "),
    ],
)
async def test_add_refuses_what_cannot_work(
    point: str, options: dict[str, Any], error: str
) -> None:
    """Each mistake is one line naming it, raised by add()."""
    async with ag.open_runtime() as root:
        with pytest.raises(ValueError, match=error):
            await root.get(ag.HOOKS).add(point, veto("x"), **options)  # type: ignore[union-attr]


async def test_an_async_prompt_accepted_hook_is_refused() -> None:
    """prompt() never blocks, so its hooks are plain functions."""
    async with ag.open_runtime() as root:
        with pytest.raises(TypeError, match=r"^prompt_accepted hooks are plain functions"):
            await root.get(ag.HOOKS).add(ag.PROMPT_ACCEPTED, veto("x"))  # type: ignore[union-attr]


BLOCKED = r'^turn t-{turn} of agent a ended blocked by HookCancel\(reason="{reason}"\) '


async def test_guardrails_trip_with_their_name(tmp_path: Path) -> None:
    """An input guardrail checks the prompt, an output one the answer: blocked, named."""
    store = JsonlStore(tmp_path)
    async with ag.open_runtime(store=store) as root:
        hooks = root.get(ag.HOOKS)
        assert hooks is not None
        await hooks.input_guardrail("no-shouting", lambda text: text.isupper())
        await hooks.output_guardrail(
            "no-numbers", lambda text: "digits" * any(map(str.isdigit, text))
        )
        handle = await root.agents.create(session_id="a")
        agent = handle.agent
        assert await agent.ask("calm") == "calm"
        with pytest.raises(
            ag.TurnFailedError,
            match=BLOCKED.format(turn=2, reason="guardrail 'no-shouting' tripped"),
        ):
            await agent.ask("LOUD")
        with pytest.raises(
            ag.TurnFailedError,
            match=BLOCKED.format(turn=3, reason="guardrail 'no-numbers' tripped: digits"),
        ):
            await agent.ask("call 555")
        await handle.dispose()
    causes = [e.cause for e in of(stored(tmp_path, "a"), TurnEnded)]
    assert causes == [
        None,
        HookCancel("guardrail 'no-shouting' tripped"),
        HookCancel("guardrail 'no-numbers' tripped: digits"),
    ]
    user = [r.content for r in of(stored(tmp_path, "a"), UserMessage)]
    assert user == ["calm", "LOUD", "call 555"]
    answers = [r.content for r in of(stored(tmp_path, "a"), AssistantMessage)]
    assert answers == ["calm", "call 555"]  # the answer was said, then blocked


# -- reload -----------------------------------------------------------------------------------

PLUGIN = """
from trio_agents.cancel import HookCancel

name = "vetoer"
inject = ("hooks",)


async def veto(event):
    return HookCancel("version {version}")


async def apply(ctx, config):
    if {version} == 1:
        await ctx.hooks.add("pre_tool", veto)
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "hooks_reload_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN.format(version=1)), encoding="utf-8")
    yield path
    sys.modules.pop("hooks_reload_plugin", None)


async def test_hooks_added_by_a_plugin_are_gone_after_its_reload(plugin_module: Path) -> None:
    """Version 1 vetoes tool calls; after reloading version 2 (which adds none) they run."""
    ran: list[str] = []
    model = ScriptedModel(
        [
            [CallTool("echo", {"text": "1"})],
            [Say("a")],
            [CallTool("echo", {"text": "2"})],
            [Say("b")],
        ]
    )
    module = importlib.import_module("hooks_reload_plugin")
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(echo_tool(ran)))
        await root.plugin(module)
        agent = (await root.agents.create()).agent
        await agent.ask("first")
        await trio.Path(plugin_module).write_text(
            textwrap.dedent(PLUGIN.format(version=2)), encoding="utf-8"
        )
        await root.reload(module)
        hooks = root.get(ag.HOOKS)
        assert hooks is not None
        assert hooks.at(ag.PRE_TOOL) == ()
        await agent.ask("second")
        ended = of(agent.session.records, ToolCallEnded)
    assert ran == ["2"]
    assert [e.content for e in ended] == [
        "tool call 'echo' was blocked by a hook: version 1",
        "echoed 2",
    ]


class AsyncCallable:
    """An object whose ``__call__`` is async: add() cannot tell, the run can."""

    async def __call__(self, event: object) -> None:
        return None


def raising(event: ag.PromptAccepted) -> None:
    raise ValueError("bad prompt check")


def answering(event: ag.PromptAccepted) -> str:
    return "yes"


@pytest.mark.parametrize(
    ("fn", "error"),
    [
        (raising, r"^ValueError: bad prompt check$"),
        (answering, r"^answered str 'yes'; prompt_accepted takes None, HookCancel$"),
        (AsyncCallable(), r"^prompt_accepted hooks are plain functions; AsyncCallable is async$"),
    ],
)
@pytest.mark.parametrize("policy", ["fail_open", "fail_closed"])
async def test_a_failing_prompt_hook_is_contained_and_its_policy_decides(
    fn: Any, error: str, policy: str
) -> None:
    """At prompt_accepted too: reported, then queued (open) or refused (closed)."""
    failed: list[ag.HookFailed] = []
    async with ag.open_runtime() as root:
        root.on(ag.HookFailed, failed.append)
        await root.plugin(Hooked(at(ag.PROMPT_ACCEPTED, fn, policy=policy)))
        agent = (await root.agents.create(session_id="a")).agent
        if policy == "fail_open":
            assert await agent.ask("hi") == "hi"
        else:
            with pytest.raises(ag.HookRefusedError, match=r"^agent a refused the message: hook "):
                agent.prompt("hi")
            assert agent.queued() == ()
    [failure] = failed
    assert re.match(error, failure.error), failure.error


async def test_an_async_guardrail_checks_the_answer_after_a_tool_call() -> None:
    """An async check sees the final step's text: "" when it said nothing after its call."""
    seen: list[str] = []

    async def check(text: str) -> bool:
        seen.append(text)
        return False

    ran: list[str] = []
    model = ScriptedModel([[CallTool("echo", {"text": "x"})], [Say("")]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(echo_tool(ran)))
        await root.get(ag.HOOKS).output_guardrail("quiet", check)  # type: ignore[union-attr]
        agent = (await root.agents.create()).agent
        assert await agent.ask("go") == ""
    assert seen == [""]


async def test_add_refuses_what_is_not_a_function() -> None:
    """A hook is called with the event; anything else is refused at once."""
    async with ag.open_runtime() as root:
        with pytest.raises(TypeError, match=r"^a hook is a function of the event; got 3$"):
            await root.get(ag.HOOKS).add(ag.TURN_START, 3)  # type: ignore[union-attr, call-overload]


async def test_the_task_tools_children_pass_the_child_points() -> None:
    """A task child fires child_start and child_end; a vetoed one is the call's error result."""
    journal: list[str] = []

    async def note(event: ag.ChildStart | ag.ChildEnd) -> None:
        journal.append(f"{type(event).__name__} {event.agent_id}")

    async def no_second(event: ag.ChildStart) -> HookCancel | None:
        return HookCancel("one child is enough") if len(journal) > 2 else None

    task = [CallTool("task", {"agent": "echoer", "prompt": "hi"})]
    model = ScriptedModel([task, task, "ok"])
    async with ag.open_runtime() as root:
        await root.plugin(
            Hooked(at(ag.CHILD_START, note), at(ag.CHILD_END, note), at(ag.CHILD_START, no_second))
        )
        await root.agents.define("echoer", description="echoes", model="echo")
        lead = (await root.agents.create(model, session_id="lead", tools=["task"])).agent
        assert await lead.ask("go") == "ok"
        first, second = of(lead.session.records, ToolCallEnded)
    assert journal == ["ChildStart lead", "ChildEnd lead", "ChildStart lead"]
    assert not first.is_error
    assert second.is_error
    assert not second.started
    assert re.fullmatch(
        r"child agent \S+ of agent lead was refused: "
        r"one child is enough \(a child_start hook vetoed it; nothing was created\)",
        second.content,
    )
