"""The model-visible history, folded in incrementally, equals the history rebuilt at once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_agents.agent._history import History, conversation
from trio_agents.model import AssistantText, ToolOutput, UserText
from trio_agents.session import (
    AssistantMessage,
    Record,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
)

ids = st.sampled_from(["c1", "c2", "c3"])
records = st.lists(
    st.one_of(
        st.builds(
            UserMessage, message_id=st.just("m"), content=st.text(max_size=3), turn_id=st.just("t")
        ),
        st.builds(AssistantMessage, turn_id=st.just("t"), content=st.text(max_size=3)),
        st.builds(
            ToolCall, turn_id=st.just("t"), call_id=ids, name=st.just("x"), arguments=st.just({})
        ),
        st.builds(
            ToolCallEnded,
            turn_id=st.just("t"),
            call_id=ids,
            name=st.just("x"),
            content=st.just("r"),
        ),
        st.builds(TurnEnded, turn_id=st.just("t"), stop_reason=st.just(StopReason.COMPLETED)),
    ),
    max_size=30,
)


@given(records, st.lists(st.integers(0, 30), max_size=5))
def test_incremental_history_equals_the_full_rebuild(
    recorded: list[Record], cuts: list[int]
) -> None:
    """Updating at any cut points gives the same messages as one rebuild from all records."""
    history = History("sys")
    snapshot = tuple(recorded)
    for cut in sorted(cuts):
        history.update(snapshot[:cut])
        assert list(history.messages()) == conversation(snapshot[:cut], "sys")
    assert list(history.update(snapshot).messages()) == conversation(snapshot, "sys")


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
