"""A file tool's edits in ``chat``: the diff shown when the call is asked about, and ``/undo``.

Rules:
- The question about ``edit_file`` shows the unified diff of its ``old_text`` and
  ``new_text``; about ``write_file``, the diff of the file as it is now (read from the disk,
  relative to the working directory) and the new content, or "a new file" when there is none.
  At most :data:`DIFF_LINES` lines are shown, then how many more there are.
- ``/undo`` puts back the latest change a file tool made in this session that is not undone
  yet, from its ``FileEdited`` record (the texts before and after): only when the file still
  holds what that change wrote (else it says so and changes nothing), and records the undo as
  a ``FileEdited`` of its own (``undo_of``), so the next ``/undo`` goes one change further back.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Final

import trio

from ..agent import Agent, ApprovalRequest
from ..session import FileEdited

#: The most diff lines a question shows.
DIFF_LINES: Final = 40
#: The largest file whose text a question reads to show a write's diff.
_READ_LIMIT: Final = 256 * 1024


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > _READ_LIMIT:
            return None
        with open(path, encoding="utf-8") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        return None


def _unified(path: str, old: str, new: str) -> list[str]:
    lines = difflib.unified_diff(
        old.splitlines(), new.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    return list(lines)


async def diff_lines(request: ApprovalRequest, cwd: str) -> list[str]:
    """The diff lines shown with a question about ``request`` (none for another tool)."""
    arguments: Mapping[str, object] = request.arguments
    path = arguments.get("path")
    if not isinstance(path, str):
        return []
    if request.tool == "edit_file":
        old, new = arguments.get("old_text"), arguments.get("new_text")
        if not isinstance(old, str) or not isinstance(new, str):
            return []
        lines = _unified(path, old, new)
    elif request.tool == "write_file":
        content = arguments.get("content")
        if not isinstance(content, str):
            return []
        current = await trio.to_thread.run_sync(_read, os.path.join(cwd, path))
        if current is None:
            count = content.count("\n") + (bool(content) and not content.endswith("\n"))
            return [f"+++ {path} (a new file, {count} lines)"]
        lines = _unified(path, current, content)
    else:
        return []
    if len(lines) > DIFF_LINES:
        more = len(lines) - DIFF_LINES
        lines = [*lines[:DIFF_LINES], f"... ({more} more diff lines)"]
    return lines


def _put(path: str, text: str | None) -> None:
    if text is None:
        os.remove(path)
        return
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)


async def undo_last(agent: Agent) -> str:
    """Undo the latest change not undone yet (see the module rules); what was done, in a line."""
    records = agent.session.records
    undone = {r.undo_of for r in records if isinstance(r, FileEdited) and r.undo_of is not None}
    last = next(
        (
            r
            for r in reversed(records)
            if isinstance(r, FileEdited) and r.undo_of is None and r.seq not in undone
        ),
        None,
    )
    if last is None:
        await trio.lowlevel.checkpoint()
        return "nothing to undo: no file tool changed a file in this session"
    now = await trio.to_thread.run_sync(_read, last.path)
    if now != last.new_text:
        return f"{last.path} changed since that edit; not undone (undo it by hand)"
    try:
        await trio.to_thread.run_sync(_put, last.path, last.old_text)
    except OSError as exc:
        return f"cannot undo the change to {last.path}: {exc.strerror or exc}"
    agent.session.append(
        FileEdited(path=last.path, old_text=last.new_text, new_text=last.old_text, undo_of=last.seq)
    )
    done = "removed" if last.old_text is None else "restored"
    return f"undid the last change to {last.path} ({done} it as it was before)"
