"""The workspace's plain functions: line slices, the one-match edit, glob patterns, path
resolution, and the plan read back from a session's records."""

from __future__ import annotations

import re

import pytest

from trio_agents.session import Record, ToolCall, ToolCallEnded
from trio_agents.workspace import FileAccessError, PlanEntry, plan_of
from trio_agents.workspace._paths import resolve_path
from trio_agents.workspace._plan import format_plan, plan_entries, plan_summary
from trio_agents.workspace._text import glob_regex, replace_once, select_lines


def test_select_lines_of_a_file_without_a_last_newline() -> None:
    """A slice that ends before the last line says where to read on, on a line of its own."""
    assert select_lines("a\nb\nc", 1, 2) == "a\nb\n[... 1 more lines: read on with offset=3]"
    assert select_lines("a\nb", 2, 5) == "b"
    assert select_lines("a", 1, 1) == "a"


def test_replace_once_refuses_an_empty_or_unchanged_text() -> None:
    """Empty old_text and old == new are errors; the match's line is counted from 1."""
    with pytest.raises(FileAccessError, match=r"^old_text is empty; to write a whole file"):
        replace_once("abc", "", "x", "f")
    with pytest.raises(FileAccessError, match=r"^old_text and new_text are the same"):
        replace_once("abc", "b", "b", "f")
    assert replace_once("a\nb\nc\n", "c", "d", "f") == ("a\nb\nd\n", 3)


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("*.py", ["a.py"], ["d/a.py", "a.pyc"]),
        ("**/*.py", ["a.py", "d/e/a.py"], ["a.txt"]),
        ("src/**", ["src/a", "src/d/e"], ["lib/a"]),
        ("?.txt", ["a.txt"], ["ab.txt", "/.txt"]),
        ("[ab].c", ["a.c", "b.c"], ["c.c"]),
        ("[!ab].c", ["c.c"], ["a.c"]),
        ("a+b(1).txt", ["a+b(1).txt"], ["aab1.txt"]),
        ("[", ["["], ["a"]),
    ],
)
def test_glob_patterns(pattern: str, matches: list[str], misses: list[str]) -> None:
    """* and ? stay in one part, ** spans parts, classes and negated classes, the rest literal."""
    regex = glob_regex(pattern)
    assert all(regex.fullmatch(m) for m in matches)
    assert not any(regex.fullmatch(m) for m in misses)


def test_resolve_path_refuses_an_empty_path_or_a_nul() -> None:
    """No file system takes an empty path or one with a NUL character."""
    for raw in ("", "a\0b"):
        with pytest.raises(FileAccessError, match=r"is not a usable path$"):
            resolve_path(raw, "/tmp", ())


def _call(call_id: str, arguments: dict[str, object]) -> ToolCall:
    return ToolCall(turn_id="t", call_id=call_id, name="plan", arguments=arguments)


def _ended(call_id: str, *, error: bool = False) -> ToolCallEnded:
    return ToolCallEnded(turn_id="t", call_id=call_id, name="plan", content="", is_error=error)


def test_plan_of_is_the_latest_plan_call_that_succeeded() -> None:
    """A failed call or malformed entries leave the plan as it was; an empty list clears it."""
    first: dict[str, object] = {"entries": [{"content": "a"}]}
    assert plan_of([]) is None
    records: list[Record] = [_call("1", first), _ended("1")]
    assert plan_of(records) == (PlanEntry("a"),)
    records += [_call("2", {"entries": [{"content": "b"}]}), _ended("2", error=True)]
    records += [_call("3", {"entries": [{"content": "c", "status": "done"}]}), _ended("3")]
    assert plan_of(records) == (PlanEntry("a"),)
    records += [_call("4", {"entries": []}), _ended("4")]
    assert plan_of(records) == ()
    assert plan_entries({"entries": "x"}) is None
    assert plan_entries({"entries": [{"content": 3}]}) is None


def test_a_plan_reads_compactly() -> None:
    """One line per entry with its mark; a cleared plan says so."""
    entries = [PlanEntry("a", "completed", "high"), PlanEntry("b", "in_progress")]
    assert format_plan(entries) == "✓ a !\n▸ b"
    assert format_plan([]) == "(plan cleared)"
    assert plan_summary([]) == "plan cleared"
    assert re.match(r"^plan: 1 done, 1 in progress, 0 to do$", plan_summary(entries))
