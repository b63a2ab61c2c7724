"""The tree of stored sessions: a child agent's session sits under its parent's.

Rules:
- A session's parent is the ``parent_id`` of its :class:`SessionInfo` (the latest
  ``AgentConfigured`` record's, see :mod:`._summary`). A session is *top-level* when it names
  no parent, or a parent that is not among the sessions of the tree: a store older than
  parents in its summary, a damaged session (its parent is unknown) and a child whose parent
  was deleted without it are all top-level, so no session is ever hidden.
- Ids are reused after a delete, so parents may form a cycle; the first session of a cycle,
  in the order given, is then top-level, and every session is in the tree exactly once.
- Top-level sessions and the children of one parent keep the order given (``list()``: most
  recently updated first).
- :meth:`SessionTree.subtree` is what a delete removes: every descendant, each after all of its
  own, then the session itself, so a delete cut short at any point leaves no child whose parent
  is gone (none becomes top-level).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

import attrs

from ._summary import SessionInfo

#: The children of each session, by its id; the top-level sessions under ``None``.
Children = Mapping[str | None, tuple[str, ...]]


@attrs.frozen
class SessionTree:
    """Sessions arranged under their parents (see the module's rules).

    Build it with :meth:`of` from what ``SessionStore.list()`` returns.

    Attributes:
        roots: the top-level sessions, in the order given.
    """

    roots: tuple[SessionInfo, ...]
    _children: Children = attrs.field(alias="children")
    _infos: Mapping[str, SessionInfo] = attrs.field(alias="infos")

    @classmethod
    def of(cls, infos: Iterable[SessionInfo]) -> SessionTree:
        """The tree of ``infos`` (the last one of an id counts)."""
        by_id = {info.id: info for info in infos}
        children = _arrange({info.id: info.parent_id for info in by_id.values()})
        roots = tuple(by_id[session_id] for session_id in children.get(None, ()))
        return cls(roots, children=children, infos=by_id)

    def children(self, session_id: str) -> tuple[SessionInfo, ...]:
        """The sessions whose parent is ``session_id`` (none for an unknown id)."""
        return tuple(self._infos[child] for child in self._children.get(session_id, ()))

    def walk(self, session_id: str | None = None) -> Iterator[tuple[int, SessionInfo]]:
        """Every session as ``(depth, info)``, each parent before its children.

        Args:
            session_id: walk only the descendants of this session (its children at depth 1);
                ``None`` walks the whole tree (top-level sessions at depth 0).
        """
        first = 0 if session_id is None else 1
        for depth, child in _walk(self._children.get(session_id, ()), self._children):
            yield depth + first, self._infos[child]

    def subtree(self, session_id: str) -> tuple[str, ...]:
        """The ids a delete of ``session_id`` removes, in the order it removes them: each
        descendant after all of its own descendants, ``session_id`` last."""
        return _subtree(self._children, session_id)


def subtree(parents: Mapping[str, str | None], session_id: str) -> tuple[str, ...]:
    """:meth:`SessionTree.subtree` of the sessions ``parents`` gives the parent of (what a
    delete needs, without the rest of a listing)."""
    return _subtree(_arrange(parents), session_id)


def _subtree(children: Children, session_id: str) -> tuple[str, ...]:
    # Invariant: a walk puts every session after its ancestors; reversed, before them.
    below = [child for _, child in _walk(children.get(session_id, ()), children)]
    return (*reversed(below), session_id)


def _arrange(parents: Mapping[str, str | None]) -> Children:
    """The children of each session (see the module's rules), in the order of ``parents``."""
    parent = {sid: p if p is not None and p in parents else None for sid, p in parents.items()}
    children = _group(parent)
    reached = {sid for _, sid in _walk(children.get(None, ()), children)}
    for session_id in parents:
        # Invariant: only the sessions of a cycle of parents (and those under them) are out
        # of reach of the top-level ones.
        if session_id not in reached:
            parent[session_id] = None
            reached.update(sid for _, sid in _walk((session_id,), children, reached))
    return _group(parent)


def _group(parent: Mapping[str, str | None]) -> dict[str | None, tuple[str, ...]]:
    grouped: dict[str | None, list[str]] = {}
    for session_id, of in parent.items():
        grouped.setdefault(of, []).append(session_id)
    return {of: tuple(ids) for of, ids in grouped.items()}


def _walk(
    start: Iterable[str], children: Children, seen: Iterable[str] = ()
) -> Iterator[tuple[int, str]]:
    """Pre-order from ``start`` (depth 0), skipping ``seen``; a stack, not recursion, so a
    deep chain of children cannot reach the recursion limit."""
    visited = set(seen)
    stack = [(0, session_id) for session_id in reversed(tuple(start))]
    while stack:
        depth, session_id = stack.pop()
        if session_id in visited:
            continue
        visited.add(session_id)
        yield depth, session_id
        stack.extend((depth + 1, child) for child in reversed(children.get(session_id, ())))
