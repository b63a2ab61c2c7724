"""Compaction when the history is already over the window, against a loopback
OpenAI-compatible server: the summary requests are built to fit (tool outputs cut first, older
turns summarized in chunks), none is sent over the window, and a provider's "context too long"
answer compacts the history and sends the step once more instead of ending the turn.

The history is written first by a scripted model that knows no window, then resumed on the
server's model: so it is over the window before the first request of that model.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.answer_streams import OPENAI_WIRE
from tests.helpers.support import FakeServer, Tools, serve
from trio_agents.agent._meter import estimate
from trio_agents.model import CallTool, FallbackModel, OpenAIChatModel, ScriptedModel
from trio_agents.session import Compacted, JsonlStore, StopReason, TurnEnded

SUMMARY = "the summary so far"


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeServer:
    return await serve(nursery, OPENAI_WIRE.prefix)


def tokens(body: dict[str, Any]) -> int:
    """The size of a request body as the agent meters it (4 characters a token, 4 a message)."""
    messages = body["messages"]
    return estimate(sum(len(m.get("content") or "") for m in messages), len(messages))


def window_reply(limit: int, sent: int) -> Any:
    """The refusal of an OpenAI endpoint whose window is ``limit`` tokens."""
    return OPENAI_WIRE.failure(
        400,
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {sent} tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    )


@attrs.frozen
class Size:
    n: int


async def dump(call: ag.ToolContext, params: Size) -> str:
    """A tool whose output is large: a head, ``8000`` characters, a tail naming ``n``."""
    return f"head{params.n}:" + "y" * 8000 + f":tail{params.n}"


async def write_history(store: Path, turns: list[tuple[str, list[Any]]]) -> None:
    """Run ``turns`` (prompt, replies of its steps) on a scripted model of no known window, in
    session ``long``."""
    model = ScriptedModel([reply for _, replies in turns for reply in replies])
    async with ag.open_runtime(store=JsonlStore(store), model=model) as root:
        await root.plugin(Tools(ag.Tool("dump", "Dump.", Size, dump)))
        agent = (await root.agents.create(session_id="long")).agent
        for prompt, _ in turns:
            await agent.ask(prompt)


def model_at(server: FakeServer, window: int | None) -> OpenAIChatModel:
    return OpenAIChatModel("small", base_url=server.url, context_window=window, max_retries=0)


async def test_a_history_three_times_the_window_is_compacted_in_chunks_and_answered(
    server: FakeServer, tmp_path: Path
) -> None:
    """40 turns of 600-character prompts and answers (3x a 4000-token window) are summarized
    in chunks, each request under the window and carrying the summary so far; every older
    turn reaches a summary request; the prompt is then answered."""
    window = 4000
    turns = [(f"#{i:02d} " + "w" * 596, [f"#{i:02d} " + "a" * 596]) for i in range(40)]
    await write_history(tmp_path, turns)
    server.script(*(OPENAI_WIRE.answer(SUMMARY) for _ in range(30)))
    with trio.fail_after(30):
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
            agent = (await root.agents.resume("long", model=model_at(server, window))).agent
            assert agent.context.tokens > 3 * window
            assert await agent.ask("what now?") == SUMMARY
            records = agent.session.records
    *summaries, answered = [seen.body for seen in server.seen]
    assert len(summaries) > 3
    assert all(tokens(body) <= 3 * window // 4 for body in summaries)
    assert tokens(answered) <= 0.8 * window
    # Every chunk after the first carries the summary so far.
    assert all(SUMMARY in body["messages"][0]["content"] for body in summaries[1:])
    # Every older turn reaches a summary request; the last few are kept as they are.
    sent = "".join(body["messages"][0]["content"] for body in summaries)
    kept = json.dumps(answered)
    summarized = [i for i in range(40) if f"#{i:02d} " in sent]
    assert summarized == [i for i in range(40) if f"#{i:02d} " not in kept]
    assert len(summarized) > 30
    [compacted] = [r for r in records if isinstance(r, Compacted)]
    assert compacted.summary == SUMMARY
    assert answered["messages"][-1] == {"role": "user", "content": "what now?"}
    assert [r.stop_reason for r in records if isinstance(r, TurnEnded)][-1] is StopReason.COMPLETED


async def test_tool_outputs_are_cut_first_so_one_summary_request_fits(
    server: FakeServer, tmp_path: Path
) -> None:
    """Three tool outputs of 8000 characters (3x a 2000-token window) are cut to their head
    and tail: one summary request holds every turn, under the window."""
    turns = [(f"task {i}", [[CallTool("dump", {"n": i})], f"done {i}"]) for i in range(3)]
    await write_history(tmp_path, turns)
    server.script(OPENAI_WIRE.answer(SUMMARY), OPENAI_WIRE.answer("carrying on"))
    with trio.fail_after(30):
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
            agent = (await root.agents.resume("long", model=model_at(server, 2000))).agent
            assert agent.context.tokens > 3 * 2000
            assert await agent.ask("what now?") == "carrying on"
    summary, answered = (seen.body for seen in server.seen)
    assert tokens(summary) <= 1500
    transcript = summary["messages"][0]["content"]
    for i in range(3):
        assert re.search(rf"head{i}:y+ \[\.\.\. \d+ characters cut \.\.\.\] y+:tail{i}", transcript)
        assert f"[user] task {i}" in transcript
        assert f"[agent] done {i}" in transcript
    assert tokens(answered) <= 0.8 * 2000


async def test_a_context_too_long_answer_compacts_and_retries_the_step_once(
    server: FakeServer, tmp_path: Path
) -> None:
    """A model that declares no window is refused with "maximum context length is 2000": the
    turn compacts to that reported window and sends the step again, which is answered."""
    turns = [(f"task {i}", [[CallTool("dump", {"n": i})], f"done {i}"]) for i in range(3)]
    await write_history(tmp_path, turns)
    server.script(
        window_reply(2000, 6200), OPENAI_WIRE.answer(SUMMARY), OPENAI_WIRE.answer("fits now")
    )
    with trio.fail_after(30):
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
            agent = (await root.agents.resume("long", model=model_at(server, None))).agent
            assert await agent.ask("what now?") == "fits now"
            records = agent.session.records
    refused, summary, retried = (seen.body for seen in server.seen)
    assert tokens(refused) > 2000
    assert tokens(summary) <= 1500
    assert tokens(retried) <= 2000
    assert (
        retried["messages"][-1]
        == refused["messages"][-1]
        == {
            "role": "user",
            "content": "what now?",
        }
    )
    assert any(SUMMARY in json.dumps(m) for m in retried["messages"])
    [compacted] = [r for r in records if isinstance(r, Compacted)]
    assert compacted.turn_id == "t-4"
    assert [r.stop_reason for r in records if isinstance(r, TurnEnded)][-1] is StopReason.COMPLETED


async def test_a_second_context_too_long_answer_ends_the_turn(
    server: FakeServer, tmp_path: Path
) -> None:
    """The step is retried once: refused again after the compaction, the turn ends in error
    with the provider's message."""
    turns = [(f"task {i}", [[CallTool("dump", {"n": i})], f"done {i}"]) for i in range(3)]
    await write_history(tmp_path, turns)
    server.script(window_reply(2000, 6200), OPENAI_WIRE.answer(SUMMARY), window_reply(2000, 2100))
    with trio.fail_after(30):
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
            agent = (await root.agents.resume("long", model=model_at(server, None))).agent
            with pytest.raises(ag.TurnFailedError):
                await agent.ask("what now?")
            records = agent.session.records
    assert len(server.seen) == 3
    ended = [r for r in records if isinstance(r, TurnEnded)][-1]
    assert ended.stop_reason is StopReason.ERROR
    assert re.fullmatch(
        r"the conversation is too long for model 'small' \(context_length_exceeded\): "
        r"This model's maximum context length is 2000 tokens\..*; start a new session or "
        r"shorten the input",
        ended.error or "",
    )


async def test_a_chain_too_long_everywhere_with_nothing_to_compact_ends_the_turn(
    server: FakeServer, nursery: trio.Nursery
) -> None:
    """A first prompt too long for both models of a chain leaves nothing to summarize: the
    turn ends with both refusals, and no summary request is sent."""
    other = await serve(nursery, OPENAI_WIRE.prefix)
    server.script(window_reply(10, 500))
    other.script(window_reply(20, 500))
    chain = FallbackModel([model_at(server, None), model_at(other, None)])
    with trio.fail_after(30):
        async with ag.open_runtime(model=chain) as root:
            agent = (await root.agents.create()).agent
            with pytest.raises(
                ag.TurnFailedError,
                match=r"every model of the chain failed: small: the conversation is too long "
                r".*; small: the conversation is too long",
            ):
                await agent.ask("x" * 2000)
    assert (len(server.seen), len(other.seen)) == (1, 1)


async def test_a_history_that_fits_one_summary_request_is_sent_whole(
    server: FakeServer, tmp_path: Path
) -> None:
    """A history a little over the threshold fits one summary request: nothing is cut, and
    the request is under three quarters of the window."""
    window = 4000
    small = [(f"#{i:02d} " + "w" * 596, [f"#{i:02d} " + "a" * 596]) for i in range(7)]
    large = [(f"#{i:02d} " + "W" * 1296, [f"#{i:02d} " + "A" * 1296]) for i in (7, 8)]
    await write_history(tmp_path, small + large)
    server.script(OPENAI_WIRE.answer(SUMMARY), OPENAI_WIRE.answer("done"))
    with trio.fail_after(30):
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
            agent = (await root.agents.resume("long", model=model_at(server, window))).agent
            assert agent.context.tokens > 0.8 * window
            assert await agent.ask("what now?") == "done"
    summary, _ = (seen.body for seen in server.seen)
    assert tokens(summary) <= 3 * window // 4
    transcript = summary["messages"][0]["content"]
    assert "characters cut" not in transcript
    assert "How it went on" not in transcript
    assert f"[user] #00 {'w' * 596}" in transcript


@attrs.define
class Recording:
    """A policy that is never due by itself, keeps only the turn being run, and records what
    it was shown."""

    shown: list[ag.CompactionRequest] = attrs.Factory(list)

    def due(self, context: ag.ContextUsage) -> bool:
        return False

    async def compact(self, request: ag.CompactionRequest) -> ag.Compaction | None:
        self.shown.append(request)
        return ag.Compaction(summary="", kept_from_seq=request.turns[-1].seq)


async def test_a_policy_is_shown_the_window_the_provider_reported(
    server: FakeServer, tmp_path: Path
) -> None:
    """The model declares 100000 tokens and the meter counts about 6100, so the request fits;
    the provider counts more and says 8000: the policy is shown a request over a window of
    8000, the record keeps the metered size, and the step is sent again."""
    turns = [(f"task {i}", [[CallTool("dump", {"n": i})], f"done {i}"]) for i in range(3)]
    await write_history(tmp_path, turns)
    server.script(window_reply(8000, 9000), OPENAI_WIRE.answer("fits now"))
    policy = Recording()
    with trio.fail_after(30):
        async with ag.open_runtime(store=JsonlStore(tmp_path), compactor=policy) as root:
            agent = (await root.agents.resume("long", model=model_at(server, 100_000))).agent
            metered = agent.context.tokens
            assert await agent.ask("what now?") == "fits now"
            records = agent.session.records
    [shown] = policy.shown
    assert (shown.context.window, shown.context.tokens) == (8000, 8001)
    assert shown.turn_id == "t-4"
    [compacted] = [r for r in records if isinstance(r, Compacted)]
    assert metered < compacted.tokens_before < 8000
    assert len(server.seen) == 2
