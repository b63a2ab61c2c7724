"""``trio-agents sessions list|show ID|delete ID|repair ID``.

Only the session store is started (no models, tools or agents). An unknown id, an invalid id,
an unreadable or damaged session file is one line on stderr and exit status 1.

Rules:
- ``list`` and ``show`` open the store read-only: they write nothing (a torn tail is left as
  it is, with a warning) and work on a read-only directory. Only ``delete`` and ``repair``
  write; neither touches a session another process has live.
- ``repair`` (JSONL only) keeps the longest valid start of a corrupt session file and moves
  the rest to a side file beside it (:meth:`JsonlStore.repair`), and says what it did.
- ``list`` shows a damaged session as a row with the reason, beside the others.
- Child sessions (of agents made with ``create(parent=...)``) are listed under their parent,
  indented two spaces a level (the first column of a piped table is still the id for ``awk``);
  a session whose parent is not stored is top-level (``SessionTree``). ``list --json`` prints
  the sessions in the same order, each with its ``parent_id``.
- ``show`` of a session with children ends with their tree: each child's id, how its last
  turn ended and that turn's prompt. ``delete`` deletes the sessions under the one named too,
  and names them.
- ``show`` prints at most :data:`SHOWN` characters of each message, then a note of how many
  more there are; the time is linear in the size of the session. ``--full`` prints messages
  whole (written as they are, not laid out, so that too is linear); ``--json`` prints every
  record as its stored JSON line. ``list --json`` prints one JSON object per session.
"""

from __future__ import annotations

import argparse
import json
import sys

import attrs
from rich import box
from rich.console import Console
from rich.control import strip_control_codes
from rich.markup import escape
from rich.table import Table

from ..agent import AgentUsage
from ..kernel import open_root
from ..session import (
    AssistantMessage,
    Compacted,
    InboxSpliced,
    JsonlStore,
    ModeChanged,
    ModelUsage,
    Record,
    SessionFormatError,
    SessionInfo,
    SessionNotFoundError,
    SessionRepair,
    SessionStore,
    SessionTree,
    SqliteStore,
    ToolApproval,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
    dump_record,
)
from ._options import CliError, make_store, store_place

#: How many characters of a message ``sessions show`` prints without ``--full``.
SHOWN = 2_000


async def sessions(args: argparse.Namespace) -> int:
    """Dispatch on ``args.action``."""
    out = Console(highlight=False)
    async with open_root() as root:
        writes = args.action in ("delete", "repair")
        await root.plugin(make_store(args.store, read_only=not writes))
        store: SessionStore = root.get("sessions")
        try:
            if args.action == "list":
                await _list(store, out, as_json=args.json)
            elif args.action == "show":
                await _show(store, args.id, _Shower(out, full=args.full), as_json=args.json)
            elif args.action == "repair":
                _repaired(await _repair(store, args.id), args.id)
            else:
                _deleted(await store.delete(args.id))
        except SessionNotFoundError:
            where = store_place(args.store)
            place = f" in {where}" if where is not None else ""
            raise CliError(
                f"no stored session {args.id!r}{place}; 'trio-agents sessions list' shows the ids"
            ) from None
    return 0


async def _repair(store: SessionStore, session_id: str) -> SessionRepair | None:
    if not isinstance(store, JsonlStore):
        check = (
            f" (check a SQLite database with: sqlite3 {store.path} 'PRAGMA integrity_check')"
            if isinstance(store, SqliteStore)
            else ""
        )
        raise CliError(
            f"'sessions repair' repairs the files of a JSONL store directory; this store is a "
            f"{type(store).__name__}{check}"
        )
    return await store.repair(session_id)


def _repaired(done: SessionRepair | None, session_id: str) -> None:
    # Plain print: the message holds paths, which are not rich markup.
    print(f"repaired: {done}" if done is not None else f"session {session_id!r} needs no repair")


def _deleted(ids: tuple[str, ...]) -> None:
    *under, asked = ids
    sessions = "session" if len(under) == 1 else "sessions"
    below = f" and {len(under)} {sessions} under it: {', '.join(under)}" if under else ""
    print(f"deleted {asked}{below}")


async def _list(store: SessionStore, out: Console, *, as_json: bool) -> None:
    shown = list(SessionTree.of(await store.list()).walk())
    if as_json:
        rows = (json.dumps(_info_json(i), ensure_ascii=False) + "\n" for _, i in shown)
        sys.stdout.writelines(rows)
        sys.stdout.flush()
        return
    if not shown:
        out.print("no stored sessions")
        return
    # Box drawing only on a terminal: piped, the rows are plain columns for grep and cut.
    table = Table(
        "id", "records", "updated", "title", box=box.HEAVY_HEAD if out.is_terminal else None
    )
    for depth, info in shown:
        updated = f"{info.updated:%Y-%m-%d %H:%M}" if info.updated is not None else ""
        name = "  " * depth + info.id
        if info.damaged is not None:
            table.add_row(name, "-", updated, f"[red]damaged: {escape(info.damaged)}[/]")
        else:
            table.add_row(name, str(info.records), updated, escape(info.title or ""))
    out.print(table)


def _info_json(info: SessionInfo) -> dict[str, object]:
    return {
        "id": info.id,
        "title": info.title,
        "cwd": info.cwd,
        "parent_id": info.parent_id,
        "records": info.records,
        "updated": info.updated.isoformat() if info.updated is not None else None,
        "damaged": info.damaged,
    }


@attrs.frozen
class _Shower:
    """Prints one line of ``show``: a styled label, then text shortened to :data:`SHOWN`."""

    out: Console
    full: bool

    def line(self, label: str, text: str = "", after: str = "", *, style: str = "") -> None:
        """``label`` and ``after`` are markup, ``text`` is printed as it is; ``style`` is the
        whole line's."""

        def styled(markup: str) -> str:
            return f"[{style}]{markup}[/]" if style and markup else markup

        if self.full and len(text) > SHOWN:
            # Written as it is: a layout of the whole text would cost far more than linear.
            self.out.print(styled(label), end="")
            sys.stdout.write(strip_control_codes(text))
            sys.stdout.flush()
            self.out.print(styled(after))
            return
        note = ""
        if len(text) > SHOWN:
            note = f"\n[dim]… {len(text) - SHOWN:,} more characters; --full to see all[/]"
            text = text[:SHOWN]
        self.out.print(styled(f"{label}{escape(text)}{after}") + note)


async def _show(store: SessionStore, session_id: str, say: _Shower, *, as_json: bool) -> None:
    session = await store.load(session_id)
    if as_json:
        sys.stdout.writelines(dump_record(record) + "\n" for record in session.records)
        sys.stdout.flush()
        return
    pending: dict[str, str] = {}
    turn = total = AgentUsage()
    for record in session.records:
        if isinstance(record, UserMessage):
            pending.pop(record.message_id, None)
            say.line("[bold cyan]user[/]: ", record.content)
        elif isinstance(record, AssistantMessage):
            cut = " [dim](interrupted)[/]" if record.interrupted else ""
            say.line("[bold green]agent[/]: ", record.content, cut)
        elif isinstance(record, ToolCall):
            say.line(f"[yellow]tool call[/] {escape(record.name)} ", repr(record.arguments))
        elif isinstance(record, ToolApproval):
            say.line(
                f"[magenta]approval[/] {escape(record.name)}: "
                f"{escape(str(record.decision))} by {escape(str(record.by))}"
            )
        elif isinstance(record, ToolCallEnded):
            style = "red" if record.is_error else "yellow"
            say.line(f"[{style}]tool result[/] ", record.content)
        elif isinstance(record, TurnEnded):
            cause = f" by {_describe(record.cause)}" if record.cause is not None else ""
            tokens = f" · {_tokens(turn)}" if turn.requests else ""
            label = f"turn {escape(record.turn_id)}: {record.stop_reason.value}{cause}"
            if record.error:
                say.line(f"{label}: ", record.error, tokens, style="dim")
            else:
                say.line(f"{label}{tokens}", style="dim")
            turn = AgentUsage()
        elif isinstance(record, ModelUsage):
            turn, total = turn.plus(record), total.plus(record)
        elif isinstance(record, Compacted):
            say.line(
                f"[magenta]-- compacted ({record.tokens_before:,} -> {record.tokens_after:,} "
                f"tokens): the model sees a summary, then the records from seq "
                f"{record.kept_from_seq} on --[/]"
            )
        elif isinstance(record, ModeChanged):
            say.line(f"[magenta]mode[/] {escape(record.mode)}")
        elif isinstance(record, InboxSpliced):
            if record.op == "add" and record.wake:
                pending[record.message_id] = record.content or ""
            else:
                pending.pop(record.message_id, None)
    for message_id, content in pending.items():
        say.line(f"queued ({escape(message_id)}): ", content, style="dim")
    if total.requests:
        say.line(f"usage: {_tokens(total)}", style="dim")
    await _show_children(store, session_id, say)


async def _show_children(store: SessionStore, session_id: str, say: _Shower) -> None:
    """The tree of the sessions under ``session_id``: id, how the last turn ended, its
    prompt."""
    below = list(SessionTree.of(await store.list()).walk(session_id))
    if not below:
        return
    say.line("[bold]child sessions[/]:")
    for depth, info in below:
        name = "  " * depth + escape(info.id)
        if info.damaged is not None:
            say.line(f"{name} · [red]damaged[/]: ", info.damaged)
            continue
        try:
            records = (await store.load(info.id)).records
        except (SessionNotFoundError, SessionFormatError, OSError) as exc:
            # Deleted or damaged since the listing: that is its status.
            say.line(f"{name} · [red]cannot be read[/]: ", str(exc))
            continue
        status, prompt = _last_turn(records)
        if prompt:
            say.line(f"{name} · {status} · last turn: ", prompt)
        else:
            say.line(f"{name} · {status}")


def _last_turn(records: tuple[Record, ...]) -> tuple[str, str]:
    """How the last turn of ``records`` ended (markup, or ``no turns``), and its prompt's
    first line."""
    turn: str | None = None
    prompt = ""
    ended: TurnEnded | None = None
    for record in records:
        if isinstance(record, TurnStarted):
            turn, prompt, ended = record.turn_id, "", None
        elif isinstance(record, UserMessage) and record.turn_id == turn and not prompt:
            prompt = _first_line(record.content)
        elif isinstance(record, TurnEnded) and record.turn_id == turn:
            ended = record
    if ended is None:
        return "no turns", ""
    cause = f" by {_describe(ended.cause)}" if ended.cause is not None else ""
    return f"{ended.stop_reason.value}{cause}", prompt


def _first_line(text: str, limit: int = 60) -> str:
    """The first line of ``text`` with any, at most ``limit`` characters (a tree is one line a
    session)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _tokens(usage: AgentUsage) -> str:
    """``11 in, 4 out tokens (1 request)``; with a prompt cache
    ``143 in (40 read from the cache, 100 written to it), 2 out tokens (1 request)``; with a
    price for the model, its cost after it: ``11 in, 4 out tokens (1 request), $0.0012``."""
    plural = "" if usage.requests == 1 else "s"
    cached = ""
    if usage.cache_read_tokens or usage.cache_creation_tokens:
        cached = (
            f" ({usage.cache_read_tokens:,} read from the cache, "
            f"{usage.cache_creation_tokens:,} written to it)"
        )
    cost = f", ${usage.cost:,.4f}" if usage.cost is not None else ""
    return (
        f"{usage.input_tokens:,} in{cached}, {usage.output_tokens:,} out tokens "
        f"({usage.requests:,} request{plural}){cost}"
    )


def _describe(cause: object) -> str:
    """A cancel cause as ``UserCancel`` or ``ParentCancel(parent_id='a')``."""
    kind = type(cause)
    names = [f.name for f in attrs.fields(kind)] if attrs.has(kind) else []
    shown = ", ".join(f"{name}={getattr(cause, name)!r}" for name in names)
    return f"{type(cause).__name__}({escape(shown)})" if shown else type(cause).__name__
