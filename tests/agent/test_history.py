"""The model-visible history, folded in incrementally, equals the history rebuilt at once."""

from __future__ import annotations

from collections.abc import AsyncGenerator
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
from tests.helpers.support import Tools, conversation
from trio_agents.agent._history import History, Messages
from trio_agents.model import (
    AssistantText,
    CallTool,
    ModelEvent,
    ModelRequest,
    Say,
    ScriptedModel,
    SystemText,
    ToolOutput,
    UserText,
    Wait,
)
from trio_agents.model._messages import ChatMessage
from trio_agents.session import (
    InboxSpliced,
    JsonlStore,
    Record,
    Session,
    StopReason,
    ToolCall,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

records = conversations(
    ["c1", "c2", "c3"],
    st.builds(
        InboxSpliced,
        op=st.just("add"),
        lane=st.just("next_turn"),
        message_id=st.just("m"),
        content=st.just("q"),
    ),
    max_size=40,
)


@given(records, st.lists(st.integers(0, 40), max_size=6), st.sampled_from([None, "sys"]))
def test_incremental_history_equals_the_full_rebuild(
    recorded: list[Record], cuts: list[int], instructions: str | None
) -> None:
    """Catching up with a growing session at any cut points gives, at every cut, the messages
    of one fold of all its records; the views taken earlier stay as they were."""
    session = Session("s-1")
    history = History(instructions)
    taken: list[tuple[Messages, tuple[ChatMessage, ...]]] = []
    done = 0
    for cut in [*sorted(cuts), len(recorded)]:
        for record in recorded[done:cut]:
            session.append(record)
        done = max(done, cut)
        view = history.update(session).messages()
        assert list(view) == conversation(session.records, instructions)
        taken.append((view, tuple(view)))
    for view, copy in taken:
        assert tuple(view) == copy


@given(records, st.integers(-50, 50), st.integers(-50, 50), st.sampled_from([None, 1, 2, -1]))
def test_the_messages_view_behaves_as_the_tuple_of_its_messages(
    recorded: list[Record], start: int, stop: int, step: int | None
) -> None:
    """Indexing, slicing, reversing, equality and hash of a view match its tuple."""
    history = History("sys")
    history.fold(recorded)
    view = history.messages()
    copy = tuple(view)
    assert len(view) == len(copy)
    assert view == copy
    assert copy == view
    assert view == list(copy)
    assert view != (*copy, UserText("more"))
    assert hash(view) == hash(copy)
    assert view[start:stop:step] == copy[start:stop:step]
    assert list(reversed(view)) == list(reversed(copy))
    for i in range(-len(copy), len(copy)):
        assert view[i] == copy[i]
    with pytest.raises(IndexError, match=r"^message index \d+ out of range"):
        view[len(copy)]


def test_a_view_is_not_equal_to_text() -> None:
    """A view compares with sequences of messages, not with a string."""
    assert Messages([], 0) != ""
    assert Messages([], 0) == ()
    assert repr(Messages([UserText("hi")], 1)) == "Messages([UserText(content='hi', images=())])"


def test_a_call_cut_off_by_the_next_user_message_is_answered_as_interrupted() -> None:
    """A tool call with no result before the next user message gets a synthetic error."""
    messages = conversation(
        [
            UserMessage(message_id="m1", content="hi", turn_id="t1"),
            ToolCall(turn_id="t1", call_id="c1", name="bash", arguments={}),
            TurnEnded(turn_id="t1", stop_reason=StopReason.INTERRUPTED),
            UserMessage(message_id="m2", content="again", turn_id="t2"),
        ]
    )
    assert messages[0] == UserText("hi")
    assert isinstance(messages[1], AssistantText)
    assert messages[2] == ToolOutput("c1", "bash", "interrupted: no result was recorded", True)
    assert messages[3] == UserText("again")


def test_records_since_holds_the_new_records_only() -> None:
    """records_since(seq) is the tail of the records from seq on; a negative seq is refused."""
    session = Session("s-1")
    for n in range(4):
        session.append(TurnStarted(turn_id=f"t-{n}"))
    assert session.records_since(0) == session.records
    assert [r.seq for r in session.records_since(2)] == [2, 3]
    assert session.records_since(4) == ()
    assert session.records_since(9) == ()
    with pytest.raises(ValueError, match=r"^records_since\(\) takes a seq >= 0; got -1$"):
        session.records_since(-1)


# -- what a live agent sends -------------------------------------------------------------------


@attrs.define(eq=False)
class Witness:
    """A model that keeps each request with the session's records at that moment."""

    inner: ScriptedModel
    name: str = "witness"
    context_window: int | None = None
    session: Session | None = None
    seen: list[tuple[ModelRequest, tuple[Record, ...]]] = attrs.field(factory=list)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        assert self.session is not None
        self.seen.append((request, self.session.records))
        async with aclosing(self.inner.stream(request)) as events:
            async for event in events:
                yield event


@attrs.frozen
class Text:
    text: str


@ag.tool(params=Text)
async def shout(ctx: ag.ToolContext, params: Text) -> str:
    """Say it louder."""
    await trio.sleep(1)
    return params.text.upper()


def _script() -> ScriptedModel:
    return ScriptedModel(
        [
            [Say("calling"), CallTool("shout", {"text": "a"}), CallTool("shout", {"text": "b"})],
            [Say("both done")],
            [Wait(5), Say("too late")],
            [CallTool("shout", {"text": "slow"})],
            [Say("after steer")],
            [Say("resumed")],
        ]
    )


async def _drive(agent: ag.Agent) -> None:
    agent.prompt("first")
    await agent.when_idle()
    agent.prompt("to be cancelled")
    await trio.testing.wait_all_tasks_blocked()
    agent.cancel()
    await agent.when_idle()
    agent.prompt("tool then steer")
    await trio.testing.wait_all_tasks_blocked()
    agent.steer("and this")
    await agent.when_idle()


async def test_every_request_holds_the_full_fold_of_the_records_before_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Across tool calls, a cancelled turn, a steer and a resume, each request's messages are
    exactly the conversation folded at once from the records recorded before it."""
    witness = Witness(_script())
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=witness) as root:
        await root.plugin(Tools(shout))
        handle = await root.agents.create(session_id="h1", instructions="be loud")
        witness.session = handle.agent.session
        await _drive(handle.agent)
        before = conversation(handle.agent.session.records, "be loud")
        await handle.dispose()
        resumed = await root.agents.resume("h1", model=witness)
        witness.session = resumed.agent.session
        resumed.agent.prompt("again")
        await resumed.agent.when_idle()
    assert len(witness.seen) == 6
    for request, recorded in witness.seen:
        assert list(request.messages) == conversation(recorded, "be loud")
    assert [type(r).__name__ for r in witness.seen[2][1][-2:]] == ["TurnStarted", "UserMessage"]
    last = list(witness.seen[-1][0].messages)
    assert last[0] == SystemText("be loud")
    assert last == [*before, UserText("again")]


async def test_a_resumed_agent_in_a_new_runtime_sends_the_history_it_had(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Resumed from disk by a new store and runtime, the agent's first request is the history
    it had before, folded from the stored records, then the new prompt."""
    first = Witness(_script())
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=first) as root:
        await root.plugin(Tools(shout))
        handle = await root.agents.create(session_id="h2", instructions="be loud")
        first.session = handle.agent.session
        await _drive(handle.agent)
        before = conversation(handle.agent.session.records, "be loud")
    second = Witness(ScriptedModel([[Say("back")]]))
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=second) as root:
        resumed = (await root.agents.resume("h2", model=second)).agent
        second.session = resumed.session
        resumed.prompt("again")
        await resumed.when_idle()
    [(request, recorded)] = second.seen
    assert list(request.messages) == conversation(recorded, "be loud")
    assert list(request.messages) == [*before, UserText("again")]
    assert len(before) > 8  # tool calls, outputs, a cancelled turn and a steer are in it
