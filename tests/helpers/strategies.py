"""Hypothesis strategies shared by the tests.

A plugin *shape* is what a generated plugin's ``apply`` does, in order: enter an effect, start a
background task, or apply a child plugin of its own shape. A *conversation* is a list of the
records a turn writes, in any order, one turn id, for the history's fold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

from hypothesis import strategies as st

from trio_agents.session import (
    AssistantMessage,
    Record,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

__all__ = ["EFFECT", "TASK", "Action", "Shape", "conversations", "shapes"]

EFFECT = ("effect",)
TASK = ("task",)

Action: TypeAlias = tuple[object, ...]
Shape: TypeAlias = tuple[Action, ...]

_leaf: st.SearchStrategy[Action] = st.sampled_from([EFFECT, TASK])


def _extend(inner: st.SearchStrategy[Shape]) -> st.SearchStrategy[Shape]:
    child: st.SearchStrategy[Action] = inner.map(lambda shape: ("child", shape))
    return st.lists(st.one_of(_leaf, child), max_size=4).map(tuple)


#: Plugin shapes: up to four actions per plugin, children nested a few levels deep.
shapes: st.SearchStrategy[Shape] = st.recursive(
    st.lists(_leaf, max_size=3).map(tuple), _extend, max_leaves=8
)


def conversations(
    call_ids: Sequence[str], *more: st.SearchStrategy[Record], max_size: int
) -> st.SearchStrategy[list[Record]]:
    """Lists of a turn's records in any order (tool calls among ``call_ids``), and ``more``."""
    ids = st.sampled_from(list(call_ids))
    return st.lists(
        st.one_of(
            st.builds(
                UserMessage,
                message_id=st.just("m"),
                content=st.text(max_size=3),
                turn_id=st.just("t"),
            ),
            st.builds(AssistantMessage, turn_id=st.just("t"), content=st.text(max_size=3)),
            st.builds(
                ToolCall,
                turn_id=st.just("t"),
                call_id=ids,
                name=st.just("x"),
                arguments=st.just({}),
            ),
            st.builds(
                ToolCallEnded,
                turn_id=st.just("t"),
                call_id=ids,
                name=st.just("x"),
                content=st.just("r"),
            ),
            st.builds(TurnEnded, turn_id=st.just("t"), stop_reason=st.just(StopReason.COMPLETED)),
            st.builds(TurnStarted, turn_id=st.just("t")),
            *more,
        ),
        max_size=max_size,
    )
