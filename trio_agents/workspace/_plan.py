"""``tool_plan``: the ``plan`` tool, the model's own to-do list (as Claude Code's TodoWrite).

Rules:
- Each call sends the whole plan: its entries, each with ``content``, ``status`` (``pending``,
  ``in_progress``, ``completed``) and ``priority`` (``high``, ``medium``, ``low``). The latest
  call replaces the plan; an empty list clears it.
- The plan is kept in the session as the arguments of the ``plan`` calls: :func:`plan_of`
  reads the plan in force from the records (the latest ``plan`` call that succeeded), so a
  loaded or resumed session has it, and nothing else stores it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal, final

import attrs
import trio

from ..agent import TOOLS, Tool, ToolContext, ToolResult
from ..kernel import Context
from ..session import Record, ToolCall, ToolCallEnded


@attrs.frozen
class PlanEntry:
    """One entry of the plan."""

    content: str = attrs.field(metadata={"description": "what this step does, in a few words"})
    status: Literal["pending", "in_progress", "completed"] = attrs.field(
        default="pending", metadata={"description": "pending, in_progress or completed"}
    )
    priority: Literal["high", "medium", "low"] = attrs.field(
        default="medium", metadata={"description": "high, medium or low"}
    )


@attrs.frozen
class PlanArgs:
    """The arguments of ``plan``."""

    entries: list[PlanEntry] = attrs.field(
        metadata={"description": "the whole plan, in order; it replaces the previous one"}
    )


_MARKS: Final = {"completed": "✓", "in_progress": "▸", "pending": "○"}


def format_plan(entries: Iterable[PlanEntry]) -> str:
    """The plan as lines for a terminal: ``✓`` done, ``▸`` in progress, ``○`` to do (a high
    priority entry ends with ``!``)."""
    lines = [
        f"{_MARKS[e.status]} {e.content}{' !' if e.priority == 'high' else ''}" for e in entries
    ]
    return "\n".join(lines) if lines else "(plan cleared)"


def plan_summary(entries: Iterable[PlanEntry]) -> str:
    """One line: how many entries are in each status (``2 done, 1 in progress, 3 to do``)."""
    entries = tuple(entries)
    if not entries:
        return "plan cleared"
    done = sum(e.status == "completed" for e in entries)
    running = sum(e.status == "in_progress" for e in entries)
    return f"plan: {done} done, {running} in progress, {len(entries) - done - running} to do"


_STATUSES = frozenset({"pending", "in_progress", "completed"})
_PRIORITIES = frozenset({"high", "medium", "low"})


def _entry(item: object) -> PlanEntry | None:
    if not isinstance(item, Mapping) or not isinstance(item.get("content"), str):
        return None
    status, priority = item.get("status", "pending"), item.get("priority", "medium")
    if status not in _STATUSES or priority not in _PRIORITIES:
        return None
    return PlanEntry(item["content"], status, priority)


def plan_entries(arguments: Mapping[str, Any]) -> tuple[PlanEntry, ...] | None:
    """The entries of a ``plan`` call's arguments (as the tool validated them), or ``None``."""
    items = arguments.get("entries")
    if not isinstance(items, list):
        return None
    entries = [_entry(item) for item in items]
    return None if None in entries else tuple(e for e in entries if e is not None)


def plan_of(records: Iterable[Record]) -> tuple[PlanEntry, ...] | None:
    """The plan in force after ``records``: the entries of the latest ``plan`` call that
    succeeded, or ``None`` when there was none."""
    calls: dict[str, Mapping[str, Any]] = {}
    plan: tuple[PlanEntry, ...] | None = None
    for record in records:
        if isinstance(record, ToolCall) and record.name == "plan":
            calls[record.call_id] = record.arguments
        elif isinstance(record, ToolCallEnded) and record.name == "plan":
            arguments = calls.pop(record.call_id, None)
            entries = plan_entries(arguments) if arguments is not None else None
            if entries is not None and not record.is_error:
                plan = entries
    return plan


async def _plan(call: ToolContext, args: PlanArgs) -> ToolResult:
    await trio.lowlevel.checkpoint()
    return ToolResult(plan_summary(args.entries))


@final
class ToolPlan:
    """The plugin ``tool-plan``; apply it with ``await ctx.plugin(tool_plan)``."""

    name = "tool-plan"
    inject = (TOOLS,)

    async def apply(self, ctx: Context, config: None) -> None:
        """Register ``plan``, owned by this fiber."""
        ctx.service(TOOLS).register(
            Tool(
                "plan",
                "Keep a to-do list for a task of several steps: send the whole list each time "
                "(content, status pending/in_progress/completed, priority high/medium/low), "
                "one entry in_progress at a time, marked completed as soon as it is done.",
                PlanArgs,
                _plan,
            )
        )


tool_plan = ToolPlan()
