"""``trio-agents sessions list|show ID|delete ID``.

Only the session store is started (no models, tools or agents). An unknown id, an invalid id
or an unreadable session file is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse

import attrs
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..agent import AgentUsage
from ..kernel import open_root
from ..session import (
    AssistantMessage,
    InboxSpliced,
    ModelUsage,
    SessionNotFoundError,
    SessionStore,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
)
from ._options import CliError, make_store, store_root

__all__ = ["sessions"]


async def sessions(args: argparse.Namespace) -> int:
    """Dispatch on ``args.action``."""
    out = Console(highlight=False)
    async with open_root() as root:
        await root.plugin(make_store(args.store))
        store: SessionStore = root.get("sessions")
        try:
            if args.action == "list":
                await _list(store, out)
            elif args.action == "show":
                await _show(store, args.id, out)
            else:
                await store.delete(args.id)
                out.print(f"deleted {args.id}")
        except SessionNotFoundError:
            where = store_root(args.store)
            place = f" in {where}" if where is not None else ""
            raise CliError(
                f"no stored session {args.id!r}{place}; 'trio-agents sessions list' shows the ids"
            ) from None
    return 0


async def _list(store: SessionStore, out: Console) -> None:
    infos = await store.list()
    if not infos:
        out.print("no stored sessions")
        return
    table = Table("id", "records", "updated", "title")
    for info in infos:
        updated = f"{info.updated:%Y-%m-%d %H:%M}" if info.updated is not None else ""
        table.add_row(info.id, str(info.records), updated, escape(info.title or ""))
    out.print(table)


async def _show(store: SessionStore, session_id: str, out: Console) -> None:
    session = await store.load(session_id)
    pending: dict[str, str] = {}
    turn = total = AgentUsage()
    for record in session.records:
        if isinstance(record, UserMessage):
            pending.pop(record.message_id, None)
            out.print(f"[bold cyan]user[/]: {escape(record.content)}")
        elif isinstance(record, AssistantMessage):
            cut = " [dim](interrupted)[/]" if record.interrupted else ""
            out.print(f"[bold green]agent[/]: {escape(record.content)}{cut}")
        elif isinstance(record, ToolCall):
            out.print(f"[yellow]tool call[/] {record.name} {escape(repr(record.arguments))}")
        elif isinstance(record, ToolCallEnded):
            style = "red" if record.is_error else "yellow"
            out.print(f"[{style}]tool result[/] {escape(record.content)}")
        elif isinstance(record, TurnEnded):
            cause = f" by {_describe(record.cause)}" if record.cause is not None else ""
            error = f": {escape(record.error)}" if record.error else ""
            tokens = f" · {_tokens(turn)}" if turn.requests else ""
            out.print(
                f"[dim]turn {record.turn_id}: {record.stop_reason.value}{cause}{error}{tokens}[/]"
            )
            turn = AgentUsage()
        elif isinstance(record, ModelUsage):
            turn, total = turn.plus(record), total.plus(record)
        elif isinstance(record, InboxSpliced):
            if record.op == "add" and record.wake:
                pending[record.message_id] = record.content or ""
            else:
                pending.pop(record.message_id, None)
    for message_id, content in pending.items():
        out.print(f"[dim]queued ({message_id}): {escape(content)}[/]")
    if total.requests:
        out.print(f"[dim]usage: {_tokens(total)}[/]")


def _tokens(usage: AgentUsage) -> str:
    """``11 in, 4 out tokens (1 request)``."""
    plural = "" if usage.requests == 1 else "s"
    return (
        f"{usage.input_tokens:,} in, {usage.output_tokens:,} out tokens "
        f"({usage.requests:,} request{plural})"
    )


def _describe(cause: object) -> str:
    """A cancel cause as ``UserCancel`` or ``ParentCancel(parent_id='a')``."""
    kind = type(cause)
    names = [f.name for f in attrs.fields(kind)] if attrs.has(kind) else []
    shown = ", ".join(f"{name}={getattr(cause, name)!r}" for name in names)
    return f"{type(cause).__name__}({escape(shown)})" if shown else type(cause).__name__
