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

__all__ = ["SessionTree"]


@attrs.frozen
class SessionTree:
    """Sessions arranged under their parents (see the module's rules).

    Build it with :meth:`of` from what ``SessionStore.list()`` returns.

    Attributes:
        roots: the top-level sessions, in the order given.
    """

    roots: tuple[SessionInfo, ...]
    _children: Mapping[str, tuple[SessionInfo, ...]] = attrs.field(alias="children")
    _infos: Mapping[str, SessionInfo] = attrs.field(alias="infos")

    @classmethod
    def of(cls, infos: Iterable[SessionInfo]) -> SessionTree:
        """The tree of ``infos`` (the last one of an id counts)."""
        by_id = {info.id: info for info in infos}
        parent = {
            info.id: info.parent_id if info.parent_id in by_id else None for info in by_id.values()
        }
        children = _group(by_id.values(), parent)
        roots = [info for info in by_id.values() if parent[info.id] is None]
        reached = {info.id for _, info in _walk(roots, children)}
        for info in by_id.values():
            # Invariant: only the sessions of a cycle of parents (and those under them) are
            # out of reach of the top-level ones.
            if info.id not in reached:
                parent[info.id] = None
                reached.update(i.id for _, i in _walk([info], children, reached))
        roots = [info for info in by_id.values() if parent[info.id] is None]
        return cls(tuple(roots), children=_group(by_id.values(), parent), infos=by_id)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._infos

    def __len__(self) -> int:
        return len(self._infos)

    def get(self, session_id: str) -> SessionInfo | None:
        """The session ``session_id`` of the tree, or ``None``."""
        return self._infos.get(session_id)

    def children(self, session_id: str) -> tuple[SessionInfo, ...]:
        """The sessions whose parent is ``session_id`` (none for an unknown id)."""
        return self._children.get(session_id, ())

    def walk(self, session_id: str | None = None) -> Iterator[tuple[int, SessionInfo]]:
        """Every session as ``(depth, info)``, each parent before its children.

        Args:
            session_id: walk only the descendants of this session (its children at depth 1);
                ``None`` walks the whole tree (top-level sessions at depth 0).
        """
        if session_id is None:
            return _walk(self.roots, self._children)
        below = _walk(self.children(session_id), self._children)
        return ((depth + 1, info) for depth, info in below)

    def subtree(self, session_id: str) -> tuple[str, ...]:
        """The ids a delete of ``session_id`` removes, in the order it removes them: each
        descendant after all of its own descendants, ``session_id`` last."""
        # Invariant: a walk puts every session after its ancestors; reversed, before them.
        below = [info.id for _, info in self.walk(session_id)]
        return (*reversed(below), session_id)


def _group(
    infos: Iterable[SessionInfo], parent: Mapping[str, str | None]
) -> dict[str, tuple[SessionInfo, ...]]:
    grouped: dict[str, list[SessionInfo]] = {}
    for info in infos:
        of = parent[info.id]
        if of is not None:
            grouped.setdefault(of, []).append(info)
    return {session_id: tuple(kids) for session_id, kids in grouped.items()}


def _walk(
    start: Iterable[SessionInfo],
    children: Mapping[str, tuple[SessionInfo, ...]],
    seen: Iterable[str] = (),
) -> Iterator[tuple[int, SessionInfo]]:
    """Pre-order from ``start`` (depth 0), skipping ``seen``; a stack, not recursion, so a
    deep chain of children cannot reach the recursion limit."""
    visited = set(seen)
    stack = [(0, info) for info in reversed(tuple(start))]
    while stack:
        depth, info = stack.pop()
        if info.id in visited:
            continue
        visited.add(info.id)
        yield depth, info
        stack.extend((depth + 1, child) for child in reversed(children.get(info.id, ())))
