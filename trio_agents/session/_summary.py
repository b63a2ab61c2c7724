"""What ``SessionStore.list()`` says about a session: its title, working directory and parent.

Rules:
- The title is the first line of the first user message with any text, shortened to 60
  characters; with none, the first queued prompt's (``InboxSpliced`` add); else ``None``.
- The working directory is the latest ``AgentConfigured`` record's ``cwd``, and the parent
  that record's ``parent_id`` (the session of the agent that created this one as its child).
- A backend's scan of its storage (in a worker thread) gives each stored session's
  :class:`SessionInfo` (not live) with :func:`stored_info`.
- A :class:`Summary` is built record by record (a backend that stores the title, cwd and
  parent beside the records keeps one per session); ``Summary.of(records)`` reads a whole
  history. Both give the same answer for the same records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import attrs

from ._records import AgentConfigured, InboxSpliced, Record, UserMessage

_TITLE_LENGTH = 60


@attrs.frozen(kw_only=True)
class SessionInfo:
    """What ``SessionStore.list()`` says about one stored (or live) session.

    Attributes:
        id: the session id.
        records: how many records it holds.
        updated: when it last changed (UTC), if known.
        live: whether it is entered in the store right now.
        title: the first user message, shortened, or ``None``.
        damaged: why the stored session cannot be loaded (a damaged file, a symbolic link,
            ...), or ``None``; a damaged session has ``records == 0`` and no title.
        cwd: the working directory the latest ``AgentConfigured`` record gives the session's
            agent, or ``None`` (none recorded, or the process's own).
        parent_id: the session of the agent that created this session's agent as its child
            (``create(parent=...)``), from the latest ``AgentConfigured`` record; ``None`` for
            a top-level session, and when the store does not know (a damaged session).
    """

    id: str
    records: int
    updated: datetime | None
    live: bool
    title: str | None
    damaged: str | None = None
    cwd: str | None = None
    parent_id: str | None = None


def title_of(contents: Iterable[str]) -> str | None:
    """A one-line title from the first non-empty content, at most 60 characters."""
    for content in contents:
        line = content.strip().splitlines()[0] if content.strip() else ""
        if line:
            return line if len(line) <= _TITLE_LENGTH else line[: _TITLE_LENGTH - 1] + "…"
    return None


@attrs.define(eq=False)
class Summary:
    """The title, working directory and parent of a session, record by record (see the
    rules)."""

    claimed_title: str | None = None
    queued_title: str | None = None
    cwd: str | None = None
    parent_id: str | None = None

    @classmethod
    def of(cls, records: Sequence[Record]) -> Summary:
        """The summary of a whole history."""
        summary = cls()
        for record in records:
            summary.note(record)
        return summary

    @property
    def title(self) -> str | None:
        """The session's title, or ``None``."""
        return self.claimed_title or self.queued_title

    def note(self, record: Record) -> None:
        """Take the next record into account."""
        if isinstance(record, UserMessage):
            if self.claimed_title is None:
                self.claimed_title = title_of([record.content])
        elif isinstance(record, InboxSpliced):
            if self.queued_title is None and record.op == "add" and record.content is not None:
                self.queued_title = title_of([record.content])
        elif isinstance(record, AgentConfigured):
            self.cwd = record.cwd
            self.parent_id = record.parent_id


def stored_info(
    session_id: str, records: Sequence[Record], updated: float | None, damaged: str | None = None
) -> SessionInfo:
    """What ``list()`` says of a stored session that is not live, whose ``records`` a scan
    read (none when ``damaged`` says why it cannot be loaded); ``updated`` is a POSIX time."""
    summary = Summary.of(records)
    return SessionInfo(
        id=session_id,
        records=len(records),
        updated=None if updated is None else datetime.fromtimestamp(updated, UTC),
        live=False,
        title=summary.title,
        damaged=damaged,
        cwd=summary.cwd,
        parent_id=summary.parent_id,
    )
