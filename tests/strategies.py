"""Hypothesis strategies shared by the stateful tests.

A plugin *shape* is what a generated plugin's ``apply`` does, in order: enter an effect, start a
background task, or apply a child plugin of its own shape.
"""

from __future__ import annotations

from typing import TypeAlias

from hypothesis import strategies as st

__all__ = ["EFFECT", "TASK", "Action", "Shape", "shapes"]

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
