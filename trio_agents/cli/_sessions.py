"""``trio-agents sessions list|show ID|delete ID``."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from ..kernel import open_root
from ..session import (
    AssistantMessage,
    ToolCall,
    ToolResult,
    TurnEnded,
    UserMessage,
)
from ._options import make_store

__all__ = ["sessions"]


async def sessions(args: argparse.Namespace) -> int:
    """Dispatch on ``args.action``."""
    out = Console()
    async with open_root() as root:
        await root.plugin(make_store(args.store))
        store = root.get("sessions")
        if args.action == "list":
            infos = await store.list()
            table = Table("id", "records", "updated", "title")
            for info in infos:
                table.add_row(
                    info.id, str(info.records), f"{info.updated:%Y-%m-%d %H:%M}", info.title or ""
                )
            out.print(table if infos else "no stored sessions")
        elif args.action == "show":
            session = await store.load(args.id)
            for record in session.records:
                if isinstance(record, UserMessage):
                    out.print(f"[bold cyan]user[/]: {record.content}")
                elif isinstance(record, AssistantMessage):
                    out.print(f"[bold green]agent[/]: {record.content}")
                elif isinstance(record, ToolCall):
                    out.print(f"[yellow]tool call[/] {record.name} {record.arguments}")
                elif isinstance(record, ToolResult):
                    out.print(f"[yellow]tool result[/] {record.content}")
                elif isinstance(record, TurnEnded):
                    cause = f" ({record.cause!r})" if record.cause else ""
                    out.print(f"[dim]turn {record.turn_id}: {record.stop_reason.value}{cause}[/]")
        else:
            await store.delete(args.id)
            out.print(f"deleted {args.id}")
    return 0
