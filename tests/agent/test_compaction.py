"""Compaction keeps a long conversation inside the model's context window, losing nothing."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import trio_agents.agent as ag
from tests.helpers.strategies import conversations
from tests.helpers.support import conversation
from trio_agents.agent._compaction import CompactionPlugin
from trio_agents.agent._history import SUMMARY_HEADING, History, message_chars
from trio_agents.agent._meter import estimate
from trio_agents.cancel import UserCancel
from trio_agents.model import (
    AssistantText,
    Fail,
    Finished,
    ModelEvent,
    ModelRequest,
    Say,
    ScriptedModel,
    SystemText,
    UserText,
)
from trio_agents.model._messages import ChatMessage
from trio_agents.session import (
    AssistantMessage,
    Compacted,
    JsonlStore,
    MemoryStore,
    Record,
    Session,
    SessionAppended,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

WINDOW = 400
# Each prompt and each echoed answer: 80 characters = 20 tokens, + 4 for the message.
PROMPT = "word " * 16


def _prompt(i: int) -> str:
    return f"{i:02d} " + PROMPT[3:]


def _tokens(messages: Sequence[ChatMessage]) -> int:
    return estimate(sum(message_chars(m) for m in messages), len(messages))


@attrs.define(eq=False)
class Witness:
    """The agent's model: echoes, keeps every request, reports no usage (so the meter
    estimates, deterministically)."""

    name: str = "witness"
    context_window: int | None = WINDOW
    inner: ScriptedModel = attrs.field(factory=ScriptedModel.echo)
    seen: list[list[ChatMessage]] = attrs.field(factory=list)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.seen.append(list(request.messages))
        async with aclosing(self.inner.stream(request)) as events:
            async for event in events:
                yield Finished(event.reason) if isinstance(event, Finished) else event


def summarizer(*replies: str | Sequence[Say | Fail]) -> ScriptedModel:
    return ScriptedModel(list(replies) or ["the summary"], name="summarizer")


async def _turns(agent: ag.Agent, numbers: range) -> None:
    for i in numbers:
        agent.prompt(_prompt(i))
        await agent.when_idle()


def _user_texts(records: Sequence[object]) -> list[str]:
    return [r.content for r in records if isinstance(r, UserMessage)]


async def test_compaction_happens_before_a_request_would_overflow() -> None:
    """No request goes over 80 % of the window: the turn that would have sent one compacts
    first, and that request is the system text, the summary, the last turns and the prompt."""
    model = Witness()
    compactor = ag.SummarizingCompactor(model=summarizer())
    async with ag.open_runtime(model=model, compactor=compactor) as root:
        agent = (await root.agents.create(instructions="be brief")).agent
        await _turns(agent, range(8))
        records = agent.session.records
    assert all(_tokens(request) <= 0.8 * WINDOW for request in model.seen)
    [compacted] = [r for r in records if isinstance(r, Compacted)]
    # The full conversation at the compacting turn would not have fitted.
    at = next(i for i, r in enumerate(records) if r.seq == compacted.seq)
    assert _tokens(conversation(records[:at], "be brief")) > 0.8 * WINDOW
    assert compacted.tokens_before > 0.8 * WINDOW >= compacted.tokens_after
    assert compacted.summary == "the summary"
    # The request right after the compaction: the summary, then the last three turns (the
    # one being run included).
    first = next(
        i
        for i, r in enumerate(model.seen)
        if len(r) > 1 and r[1].content.startswith(SUMMARY_HEADING)
    )
    request = model.seen[first]
    n = first  # one request per turn, so the request index is the turn's prompt number
    assert request == [
        SystemText("be brief"),
        SystemText(f"{SUMMARY_HEADING}\nthe summary"),
        UserText(_prompt(n - 2)),
        AssistantText(_prompt(n - 2)),
        UserText(_prompt(n - 1)),
        AssistantText(_prompt(n - 1)),
        UserText(_prompt(n)),
    ]
    kept = next(r for r in records if isinstance(r, UserMessage) and r.content == _prompt(n - 2))
    started = next(r for r in records if isinstance(r, TurnStarted) and r.turn_id == kept.turn_id)
    assert compacted.kept_from_seq == started.seq
    assert compacted.turn_id == next(
        r.turn_id for r in records if isinstance(r, UserMessage) and r.content == _prompt(n)
    )


async def test_the_session_file_keeps_every_record_and_a_resume_sends_the_compacted_history(
    tmp_path: Path,
) -> None:
    """Compaction removes nothing from the JSONL file, and an agent resumed from it in a new
    runtime sends the compacted history (summary + kept turns), not the full one."""
    model = Witness()
    compactor = ag.SummarizingCompactor(model=summarizer())
    async with ag.open_runtime(
        store=JsonlStore(tmp_path), model=model, compactor=compactor
    ) as root:
        agent = (await root.agents.create(session_id="long", instructions="be brief")).agent
        await _turns(agent, range(8))
        before = list(agent._history.messages())
    assert any(isinstance(m, SystemText) and m.content.startswith(SUMMARY_HEADING) for m in before)
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        stored = await root.sessions.load("long")
        assert _user_texts(stored.records) == [_prompt(i) for i in range(8)]
        assert sum(isinstance(r, Compacted) for r in stored.records) == 1
        await root.sessions.abandon(stored)
    again = Witness()
    async with ag.open_runtime(
        store=JsonlStore(tmp_path), model=again, compactor=compactor
    ) as root:
        resumed = (await root.agents.resume("long", model=again)).agent
        resumed.prompt("back")
        await resumed.when_idle()
    assert again.seen[0] == [*before, UserText("back")]
    assert len(again.seen[0]) < len(conversation([], "be brief")) + 2 * 8


@pytest.mark.parametrize("wait", range(5))
async def test_a_cancel_at_any_wait_of_a_compaction_leaves_the_history_unchanged(
    wait: int, autojump_clock: trio.testing.MockClock
) -> None:
    """Cancelled in any of the summarizer's waits (one before each of its five words), the
    compaction records nothing: the turn ends cancelled with the typed cause, the history is
    the full one, and the agent goes on."""
    slow = summarizer([Say("a b c d e", delay=1.0)], "the summary")
    model = Witness()
    async with ag.open_runtime(model=model, compactor=ag.SummarizingCompactor(model=slow)) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(7))
        full = list(agent._history.messages())
        assert not any(isinstance(r, Compacted) for r in agent.session.records)
        agent.prompt(_prompt(7))  # this turn's request would be over: it compacts first
        await trio.sleep(wait + 0.5)
        assert agent.statistics().running_turn == "t-8"
        assert agent.cancel(UserCancel())
        await agent.when_idle()
        records = agent.session.records
        assert not any(isinstance(r, Compacted) for r in records)
        ended = [r for r in records if isinstance(r, TurnEnded)][-1]
        assert (ended.stop_reason, ended.cause) == (StopReason.CANCELLED, UserCancel())
        assert list(agent._history.messages()) == [*full, UserText(_prompt(7))]
        assert len(model.seen) == 7  # the cancelled turn sent no request
        agent.prompt(_prompt(8))
        await agent.when_idle()
        assert [r for r in agent.session.records if isinstance(r, Compacted)]
        assert model.seen[-1][0] == SystemText(f"{SUMMARY_HEADING}\nthe summary")


async def test_a_failing_summarizer_ends_the_turn_in_error_and_the_agent_goes_on() -> None:
    """A summarizer error ends the turn in error with a readable message and the history as
    it was; the next turn compacts and answers."""
    model = Witness()
    failing = summarizer([Fail("overloaded")], "the summary")
    async with ag.open_runtime(
        model=model, compactor=ag.SummarizingCompactor(model=failing)
    ) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(7))
        full = list(agent._history.messages())
        agent.prompt(_prompt(7))
        await agent.when_idle()
        ended = [r for r in agent.session.records if isinstance(r, TurnEnded)][-1]
        assert ended.stop_reason is StopReason.ERROR
        assert ended.error == (
            "compaction failed: the summarizer model 'summarizer' failed: overloaded; "
            "the history is unchanged"
        )
        assert list(agent._history.messages()) == [*full, UserText(_prompt(7))]
        assert not any(isinstance(r, Compacted) for r in agent.session.records)
        agent.prompt(_prompt(8))
        await agent.when_idle()
        ended = [r for r in agent.session.records if isinstance(r, TurnEnded)][-1]
        assert ended.stop_reason is StopReason.COMPLETED
        assert model.seen[-1][0] == SystemText(f"{SUMMARY_HEADING}\nthe summary")


@attrs.define
class KeepLast:
    """A policy that drops every turn but the current one, once there are three."""

    asked: list[ag.CompactionRequest] = attrs.field(factory=list)

    def due(self, context: ag.ContextUsage) -> bool:
        return True

    async def compact(self, request: ag.CompactionRequest) -> ag.Compaction | None:
        self.asked.append(request)
        if len(request.turns) < 3:
            return None
        return ag.Compaction(summary="", kept_from_seq=request.turns[-1].seq)


async def test_a_replaced_policy_is_used() -> None:
    """open_runtime(compactor=...) provides the 'compaction' service the agents use."""
    policy = KeepLast()
    model = Witness(context_window=None)
    async with ag.open_runtime(model=model, compactor=policy) as root:
        assert root.get("compaction") is policy
        agent = (await root.agents.create()).agent
        await _turns(agent, range(4))
    assert [len(r.turns) for r in policy.asked] == [1, 2, 3, 2]
    assert policy.asked[0].turn_id == "t-1"
    assert model.seen[2] == [UserText(_prompt(2))]
    assert model.seen[3] == [UserText(_prompt(2)), AssistantText(_prompt(2)), UserText(_prompt(3))]


async def test_compact_on_demand_records_a_compaction_between_turns() -> None:
    """agent.compact() summarizes with the agent's own model by default; with nothing older
    than the kept turns it returns None."""
    model = Witness(context_window=None)
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(3))
        assert await agent.compact() is None  # three turns: all kept
        await _turns(agent, range(3, 4))
        record = await agent.compact()
        assert record is not None
        assert record.turn_id is None
        # The echo model answers the summary request with its last line: the instruction.
        assert record.summary == "Summarize the conversation above in at most 200 words."
        agent.prompt("next")
        await agent.when_idle()
    assert model.seen[-1] == [
        SystemText(f"{SUMMARY_HEADING}\n{record.summary}"),
        UserText(_prompt(1)),
        AssistantText(_prompt(1)),
        UserText(_prompt(2)),
        AssistantText(_prompt(2)),
        UserText(_prompt(3)),
        AssistantText(_prompt(3)),
        UserText("next"),
    ]


async def test_a_compaction_is_durable_when_compact_returns(tmp_path: Path) -> None:
    """compact() returns after its Compacted record is in the session file, though the store
    would otherwise write it only an hour later."""
    model = Witness(context_window=None)
    store = JsonlStore(tmp_path, flush_interval=3600)
    async with ag.open_runtime(store=store, model=model) as root:
        agent = (await root.agents.create(session_id="s")).agent
        await _turns(agent, range(4))
        record = await agent.compact()
        lines = (tmp_path / "s.jsonl").read_text(encoding="utf-8").splitlines()
        assert record is not None
        assert lines[-1].startswith('{"type":"compacted"')


async def test_cancel_aborts_an_on_demand_compaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """agent.cancel() aborts a running compact() with its cause; the history is unchanged."""
    slow = summarizer([Say("a b c", delay=1.0)])
    async with ag.open_runtime(
        model=Witness(), compactor=ag.SummarizingCompactor(model=slow)
    ) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(5))
        full = list(agent._history.messages())
        errors: list[ag.CompactionError] = []

        async def compact() -> None:
            with pytest.raises(ag.CompactionError) as caught:
                await agent.compact()
            errors.append(caught.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(compact)
            await trio.sleep(1.5)
            assert agent.cancel(UserCancel())
        [error] = errors
        assert error.cause == UserCancel()
        assert str(error) == "compaction cancelled by UserCancel()"
        assert list(agent._history.messages()) == full
        assert not any(isinstance(r, Compacted) for r in agent.session.records)


async def test_the_meter_measures_with_reported_usage_and_estimates_after_a_compaction() -> None:
    """After a request with reported usage the meter starts from that count; a compaction
    resets it to an estimate of the compacted history, calibrated by that count."""
    model = ScriptedModel(["one two three", "four five"], context_window=1000)
    policy = ag.SummarizingCompactor(keep_turns=1, model=summarizer())
    async with ag.open_runtime(model=model, compactor=policy) as root:
        agent = (await root.agents.create()).agent
        assert agent.context == ag.ContextUsage(tokens=0, window=1000, measured=False)
        agent.prompt("a b")
        await agent.when_idle()
        # ScriptedModel reports words: 2 in, 3 out.
        assert agent.context == ag.ContextUsage(tokens=5, window=1000, measured=True)
        agent.prompt("c")
        await agent.when_idle()
        assert agent.context.tokens == 1 + 2 + 3 + 2  # the second request's in and out
        assert agent.context.share == pytest.approx(8 / 1000)
        ratio = 8 / _tokens(agent._history.messages())
        record = await agent.compact()
        assert record is not None
        assert record.tokens_before == 8
        # After the compaction: an estimate again, scaled by the last measurement.
        expected = round(_tokens(agent._history.messages()) * ratio)
        assert agent.context == ag.ContextUsage(tokens=expected, window=1000, measured=False)
        assert record.tokens_after == expected


def test_a_compaction_cut_between_turns_keeps_from_the_next_turn() -> None:
    """A kept_from_seq that is not a turn start cuts at the next one; earlier views of the
    history stay as they were."""
    history = History("sys")
    records = [
        TurnStarted(seq=0, turn_id="t-1"),
        UserMessage(seq=1, message_id="m-1", content="one", turn_id="t-1"),
        AssistantMessage(seq=2, turn_id="t-1", content="1"),
        TurnEnded(seq=3, turn_id="t-1", stop_reason=StopReason.COMPLETED),
        TurnStarted(seq=4, turn_id="t-2"),
        UserMessage(seq=5, message_id="m-2", content="two", turn_id="t-2"),
    ]
    history.fold(records)
    view = history.messages()
    compaction = Compacted(seq=6, summary="s", kept_from_seq=2)
    expected_size = history.size_after(compaction)
    history.fold([compaction])
    assert list(history.messages()) == [
        SystemText("sys"),
        SystemText(f"{SUMMARY_HEADING}\ns"),
        UserText("two"),
    ]
    assert history.size() == expected_size
    assert list(view) == [SystemText("sys"), UserText("one"), AssistantText("1"), UserText("two")]
    assert [mark.index for mark in history.marks()] == [2]


async def test_a_policy_answer_that_is_not_a_turn_start_fails_the_turn() -> None:
    """A compactor answering a cut that is not a turn start is refused with a clear error."""

    @attrs.define
    class Bad:
        def due(self, context: ag.ContextUsage) -> bool:
            return True

        async def compact(self, request: ag.CompactionRequest) -> ag.Compaction:
            return ag.Compaction(summary="x", kept_from_seq=-7)

    async with ag.open_runtime(store=MemoryStore(), compactor=Bad()) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("hi")
        await agent.when_idle()
        ended = [r for r in agent.session.records if isinstance(r, TurnEnded)][-1]
    assert ended.stop_reason is StopReason.ERROR
    assert ended.error is not None
    assert ended.error.startswith("compaction failed: Bad kept from seq -7, which is not where")


def test_a_bad_policy_setting_is_refused() -> None:
    """SummarizingCompactor checks its threshold and counts; the plugin checks its policy."""
    with pytest.raises(ValueError, match=r"^threshold is a share of the window in \(0, 1\]"):
        ag.SummarizingCompactor(threshold=1.5)
    with pytest.raises(ValueError, match=r"^keep_turns is a whole number >= 1; got 0$"):
        ag.SummarizingCompactor(keep_turns=0)
    with pytest.raises(TypeError, match=r"^a compactor has due\(context\) and async compact"):
        CompactionPlugin(object())  # type: ignore[arg-type]
    assert ag.SummarizingCompactor(model="echo?context_window=50").model is not None


@attrs.define
class CancelsAt:
    """A policy with ``checkpoints`` checkpoints that cancels its agent just before the k-th."""

    k: int
    checkpoints: int = 3
    agent: ag.Agent | None = None

    def due(self, context: ag.ContextUsage) -> bool:
        return True

    async def compact(self, request: ag.CompactionRequest) -> ag.Compaction | None:
        for i in range(self.checkpoints):
            if i == self.k:
                assert self.agent is not None
                self.agent.cancel(UserCancel())
            await trio.lowlevel.checkpoint()
        return ag.Compaction(summary="s", kept_from_seq=request.turns[-1].seq)


@pytest.mark.parametrize("k", range(3))
async def test_a_cancel_before_any_checkpoint_of_a_policy_records_nothing(k: int) -> None:
    """Whichever checkpoint of the policy a cancel reaches, no Compacted is recorded and the
    turn ends cancelled with the cause; the model is not asked."""
    policy = CancelsAt(k)
    model = Witness()
    async with ag.open_runtime(model=model, compactor=policy) as root:
        agent = policy.agent = (await root.agents.create()).agent
        agent.prompt("hello")
        await agent.when_idle()
        records = agent.session.records
    assert not any(isinstance(r, Compacted) for r in records)
    ended = [r for r in records if isinstance(r, TurnEnded)][-1]
    assert (ended.stop_reason, ended.cause) == (StopReason.CANCELLED, UserCancel())
    assert model.seen == []


async def test_a_queued_compaction_waits_for_the_turn_and_a_cancelled_caller_withdraws_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """compact() during a turn waits for it; cancelling the caller before it starts
    withdraws it (nothing recorded), and one left queued at dispose fails with
    AgentClosedError."""
    model = Witness(inner=ScriptedModel.echo(delay=10.0), context_window=None)
    async with ag.open_runtime(model=model) as root:
        handle = await root.agents.create()
        agent = handle.agent
        await _turns(agent, range(4))
        agent.prompt("slow")
        await trio.sleep(1)
        with trio.move_on_after(2):
            await agent.compact()
        assert agent.statistics().running_turn == "t-5"
        await agent.when_idle()
        assert not any(isinstance(r, Compacted) for r in agent.session.records)
        agent.prompt("slow again")
        await trio.sleep(1)
        errors: list[BaseException] = []

        async def compact() -> None:
            try:
                await agent.compact()
            except ag.AgentClosedError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(compact)
            await trio.testing.wait_all_tasks_blocked()
            await handle.dispose()
        assert [str(e) for e in errors] == [f"agent {agent.id} closed before it compacted"]
        with pytest.raises(ag.AgentClosedError, match=r"it cannot compact any more$"):
            await agent.compact()


_records = conversations(["c1", "c2"], max_size=30)


@given(_records, _records, st.integers(0, 31), st.text(max_size=3), st.sampled_from([None, "sys"]))
def test_a_compacted_history_is_the_summary_and_the_fold_of_the_kept_records(
    before: list[Record], after: list[Record], cut: int, summary: str, instructions: str | None
) -> None:
    """Whatever the records and the cut, the history after a Compacted is the system text,
    the summary, and one fresh fold of the records from the first turn start at or after the
    cut (the Compacted itself excluded), also as records keep coming; its size is the size of
    those messages."""
    session = Session("s-1")
    for record in before:
        session.append(record)
    history = History(instructions).update(session)
    draft = Compacted(summary=summary, kept_from_seq=cut)
    predicted = history.size_after(draft)
    compacted = session.append(draft)
    history.update(session)
    assert history.size() == predicted
    for record in after:
        session.append(record)
    history.update(session)
    starts = [r.seq for r in session.records[: compacted.seq] if isinstance(r, TurnStarted)]
    first = next((seq for seq in starts if seq >= cut), compacted.seq)
    kept = [r for r in session.records[first:] if r.seq != compacted.seq]
    head = conversation([], instructions)
    if summary:
        head.append(SystemText(f"{SUMMARY_HEADING}\n{summary}"))
    fresh = History()
    fresh.fold(kept)
    expected = [*head, *fresh.messages()]
    assert list(history.messages()) == expected
    assert history.size() == (sum(message_chars(m) for m in expected), len(expected))


async def test_the_summary_requests_fit_the_summarizers_own_window() -> None:
    """A transcript too long for the summarizer's window is summarized in chunks: every
    request is under three quarters of that window, later ones carry the summary so far, and
    every older message reaches one of them."""
    small = Witness(name="small", context_window=800)
    policy = ag.SummarizingCompactor(model=small, keep_turns=1)
    async with ag.open_runtime(model=Witness(context_window=None), compactor=policy) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(16))
        assert await agent.compact() is not None
    assert len(small.seen) > 1
    assert all(_tokens(request) <= 600 for request in small.seen)
    ask = UserText("Summarize the conversation above in at most 200 words.")
    assert all(request[1] == ask for request in small.seen)
    assert all("The summary of the conversation so far:" in r[0].content for r in small.seen[1:])
    sent = "".join(request[0].content for request in small.seen)
    assert all(f"[user] {_prompt(i)}" in sent for i in range(15))


async def test_a_summarizer_window_too_small_for_any_request_is_a_clear_error() -> None:
    """A summarizer whose window cannot hold the instructions and some transcript is refused
    with one line naming the window, and nothing is sent to it."""
    small = Witness(name="small", context_window=40)
    policy = ag.SummarizingCompactor(model=small, keep_turns=1)
    async with ag.open_runtime(model=Witness(context_window=None), compactor=policy) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(3))
        with pytest.raises(
            ag.CompactionError,
            match=r"^compaction failed: the summarizer model 'small' has a context window of 40 "
            r"tokens, too small for a summary request \(it needs at least \d+\); give the "
            r"compactor a model with a larger window \(SummarizingCompactor\(model=\.\.\.\)\); "
            r"the history is unchanged$",
        ):
            await agent.compact()
    assert small.seen == []


class _OldModel:
    """A model written before Model.context_window: a name and a stream, nothing more."""

    name = "old"

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        async with aclosing(ScriptedModel.echo().stream(request)) as events:
            async for event in events:
                yield event


async def test_a_model_without_a_context_window_still_works_and_never_compacts() -> None:
    """An application's model object without ``context_window`` is a model of unknown window:
    the agent runs it, records its name, and the default policy never compacts."""
    async with ag.open_runtime() as root:
        agent = (await root.agents.create(model=_OldModel())).agent
        await _turns(agent, range(30))
        assert agent.context_window is None
        assert agent.context.window is None
        assert agent.config.model_name == "old"
        assert not any(isinstance(r, Compacted) for r in agent.session.records)


async def test_a_cancel_from_an_observer_of_the_compacted_record_does_nothing() -> None:
    """Once compact() appended its Compacted record there is nothing to abort: a cancel from
    an observer of that record returns False and emits nothing; compact() returns it."""
    model = Witness(context_window=None)
    async with ag.open_runtime(model=model) as root:
        agent = (await root.agents.create()).agent
        await _turns(agent, range(4))
        requested: list[ag.AgentCancelRequested] = []
        root.on(ag.AgentCancelRequested, requested.append)
        answers: list[bool] = []

        def on_append(event: SessionAppended) -> None:
            if isinstance(event.record, Compacted):
                answers.append(agent.cancel(UserCancel()))

        root.on(SessionAppended, on_append)
        record = await agent.compact()
        assert record is not None
        assert answers == [False]
        assert requested == []
        agent.prompt("next")
        await agent.when_idle()
        assert _user_texts(agent.session.records)[-1] == "next"
