"""The ownership tree as the command shows it: chat's ``/tree`` and the SIGUSR1 dump.

Rules:
- It draws a :class:`FiberSnapshot` (``ctx.snapshot()``) as a rich ``Tree``: each fiber with
  its state and age, then its entries oldest first, as its stack holds them, so teardown
  runs each list from the bottom up. A child fiber stands where its entry stands.
- What agents, the shell and MCP servers describe of themselves is drawn under their fiber
  or service: the running turn and its tool calls, the queued messages, the running jobs.
- Runs of identical plain entries (an MCP server's fifteen tool registrations) are one line
  with a count. Message text is cut to one short line.
- Plain text when it is not a terminal (no colour codes), so it can go to stderr or a log.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from rich.console import Console
from rich.tree import Tree

from ..agent import AgentSnapshot, TurnSnapshot
from ..kernel import EntrySnapshot, FiberSnapshot
from ..mcp import McpServerSnapshot
from ..shell import ShellSnapshot

#: The line above the tree: how to read it.
HEADING = "ownership tree (entries oldest first; teardown runs each list from the bottom up)"

_TEXT = 48


def render_tree(snapshot: FiberSnapshot, *, width: int = 100) -> str:
    """The tree of ``snapshot`` as plain text, under :data:`HEADING` (no final newline)."""
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True, highlight=False, emoji=False)
    console.print(HEADING, markup=False)
    console.print(tree_of(snapshot))
    return out.getvalue().rstrip("\n")


def tree_of(snapshot: FiberSnapshot) -> Tree:
    """A rich ``Tree`` of ``snapshot`` (see the module rules)."""
    tree = Tree(_fiber_label(snapshot), highlight=False)
    _fill(tree, snapshot)
    return tree


def _fill(node: Tree, fiber: FiberSnapshot) -> None:
    _details(node, fiber.details)
    _entries(node, fiber.entries)


def _entries(node: Tree, entries: tuple[EntrySnapshot, ...]) -> None:
    for entry, count in _runs(entries):
        if entry.fiber is not None:
            _fill(node.add(_fiber_label(entry.fiber)), entry.fiber)
            continue
        label = entry.label if count == 1 else f"{entry.label} (x{count})"
        if entry.disposes is not None:
            label = f"{label} (disposes {entry.disposes}: a co-owner)"
        child = node.add(label)
        _details(child, entry.details)
        _entries(child, entry.entries)


def _runs(entries: tuple[EntrySnapshot, ...]) -> Iterator[tuple[EntrySnapshot, int]]:
    """Each entry with how many equal plain ones follow it, the run counted once."""
    run: EntrySnapshot | None = None
    count = 0
    for entry in entries:
        if run is not None and entry == run and _plain(entry):
            count += 1
            continue
        if run is not None:
            yield run, count
        run, count = entry, 1
    if run is not None:
        yield run, count


def _plain(entry: EntrySnapshot) -> bool:
    return entry.fiber is None and not entry.entries and entry.details is None


def _fiber_label(fiber: FiberSnapshot) -> str:
    label = f"{fiber.id} {fiber.state.value} {age(fiber.running_for)}"
    details = fiber.details
    if isinstance(details, AgentSnapshot):
        label += f" · agent {details.id} {details.status.value}"
        if details.parent_id is not None:
            label += f" (child of {details.parent_id})"
    elif isinstance(details, McpServerSnapshot):
        label += f" · MCP server {details.name} ({details.transport}: {_cut(details.target)})"
    elif details is not None and not isinstance(details, ShellSnapshot):
        label += f" · {_cut(str(details))}"
    return label


def _details(node: Tree, details: object) -> None:
    if isinstance(details, AgentSnapshot):
        if details.turn is not None:
            _turn(node, details.turn)
        for message in details.queued:
            lane = "turn" if message.lane == "next_turn" else "step"
            node.add(f"queued {message.id} (next {lane}): {_cut(message.content)}")
    elif isinstance(details, ShellSnapshot):
        for job in details.jobs:
            owner = f", owner {job.owner}" if job.owner is not None else ""
            node.add(
                f"job {job.id} running {age(job.running_for)} (pid {job.pid}{owner}): "
                f"{_cut(job.command)}"
            )
        if details.foreground:
            node.add(f"{details.foreground} foreground command(s) running")


def _turn(node: Tree, turn: TurnSnapshot) -> None:
    running = f" {age(turn.running_for)}" if turn.running_for is not None else ""
    branch = node.add(f"running {turn.id}{running}")
    for call in turn.tool_calls:
        when = f"running {age(call.running_for)}" if call.running_for is not None else "not started"
        branch.add(f"tool {call.name} ({call.call_id}) {when}")


def age(seconds: float) -> str:
    """A duration, short: ``0.4s``, ``12s``, ``3m05s``, ``2h07m``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _cut(text: str) -> str:
    first, *more = text.splitlines() or [""]
    if len(first) > _TEXT or more:
        return first[: _TEXT - 1] + "…"
    return first
