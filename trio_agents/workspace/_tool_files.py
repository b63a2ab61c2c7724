"""``tool_files``: the Consumer plugin that gives agents ``read_file``, ``write_file``,
``edit_file``, ``list_files``, ``glob`` and ``grep`` on the service ``files``.

Rules:
- Every path goes through :func:`~._paths.resolve_path` first: relative to the calling agent's
  working directory, resolved, and inside it or a configured directory (``add_dirs``) unless
  the plugin is configured ``confined = false``. A path outside is an error result, unstarted
  in effect (nothing was read or written).
- ``read_file``, ``write_file`` and ``edit_file`` read and write through the file system that
  ``files.for_agent(agent)`` chooses (an editor's buffers over ACP); ``list_files``, ``glob``
  and ``grep`` walk the local disk (ACP has no listing).
- ``edit_file`` reads, replaces exactly one occurrence (:func:`~._text.replace_once`) and
  writes; a file changed between the read and the write by someone else is not detected.
- Every write or edit that changed a file is recorded in the calling agent's session
  (``FileEdited``: the texts before and after, for ``/undo``) and emits
  :class:`FileChanged` (with the text before and
  after), so a front end can show the diff (the ACP bridge sends it as ``diff`` content).
- The tools ask no one themselves: like ``bash``, the front ends ask before ``write_file`` and
  ``edit_file`` by default (the command's ``[approval]``, the ACP bridge's permission).
- The walks skip version-control and cache directories (:data:`SKIPPED`) and stop after
  :data:`MAX_ENTRIES` paths or :data:`MAX_MATCHES` matching lines, saying so.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Final, final

import attrs
import trio

from ..agent import TOOLS, Tool, ToolContext, ToolResult
from ..kernel import Context
from ..session import FileEdited, SessionClosedError
from ._access import FILES, FileAccess, FileAccessError
from ._paths import resolve_path
from ._text import glob_regex, replace_once, select_lines

#: Directories the walks of ``list_files``, ``glob`` and ``grep`` do not enter.
SKIPPED: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".nox", ".tox", ".venv",
     ".mypy_cache", ".ruff_cache", ".pytest_cache"}
)  # fmt: skip
#: The most paths ``list_files`` and ``glob`` answer with.
MAX_ENTRIES: Final = 1000
#: The most matching lines ``grep`` answers with.
MAX_MATCHES: Final = 500
#: The default and largest number of lines ``read_file`` answers with.
_READ_LINES: Final = 2000
#: Files larger than this (bytes) are not searched by ``grep``.
_GREP_SIZE: Final = 4 << 20
#: The longest line ``grep`` shows (longer ones are cut).
_LINE_WIDTH: Final = 300


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1; got {value}")


@attrs.frozen
class ReadArgs:
    """The arguments of ``read_file``."""

    path: str = attrs.field(
        metadata={"description": "the file (relative to the working directory)"}
    )
    offset: int = attrs.field(
        default=1, validator=_positive, metadata={"description": "the first line to read (from 1)"}
    )
    limit: int = attrs.field(
        default=_READ_LINES,
        validator=_positive,
        metadata={"description": f"how many lines to read (default and most {_READ_LINES})"},
    )


@attrs.frozen
class WriteArgs:
    """The arguments of ``write_file``."""

    path: str = attrs.field(metadata={"description": "the file to create or overwrite"})
    content: str = attrs.field(metadata={"description": "the whole new content of the file"})


@attrs.frozen
class EditArgs:
    """The arguments of ``edit_file``."""

    path: str = attrs.field(metadata={"description": "the file to edit"})
    old_text: str = attrs.field(
        metadata={"description": "the exact text to replace; it must occur exactly once"}
    )
    new_text: str = attrs.field(metadata={"description": "the text to put in its place"})


@attrs.frozen
class ListArgs:
    """The arguments of ``list_files``."""

    path: str = attrs.field(default=".", metadata={"description": "the directory to list"})
    pattern: str = attrs.field(
        default="*", metadata={"description": "only the names matching this glob (e.g. *.py)"}
    )


@attrs.frozen
class GlobArgs:
    """The arguments of ``glob``."""

    pattern: str = attrs.field(
        metadata={"description": "a glob relative to path: * and ? within a name, ** across "
                  "directories (e.g. src/**/*.py)"}
    )  # fmt: skip
    path: str = attrs.field(default=".", metadata={"description": "the directory to search"})


@attrs.frozen
class GrepArgs:
    """The arguments of ``grep``."""

    pattern: str = attrs.field(metadata={"description": "a regular expression (Python syntax)"})
    path: str = attrs.field(
        default=".", metadata={"description": "the file, or directory to search recursively"}
    )


@attrs.frozen
class FileChanged:
    """A file tool changed a file (an event, emitted after the write).

    Attributes:
        agent_id: the calling agent's id, or ``None``.
        call_id: the model's id of the call, or ``None``.
        path: the file's absolute path.
        old_text: its text before, or ``None`` for a new file.
        new_text: its text after.
    """

    agent_id: str | None
    call_id: str | None
    path: str
    old_text: str | None = attrs.field(repr=False)
    new_text: str = attrs.field(repr=False)


def _walk(base: str) -> Iterator[tuple[str, list[str], list[str]]]:
    for top, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        yield top, dirs, sorted(files)


def _shown(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when inside it, else absolute."""
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith("..") else relative


def _list(base: str, pattern: str, cwd: str) -> str:
    if not os.path.isdir(base):
        raise FileAccessError(f"{_shown(base, cwd)} is not a directory")
    regex = glob_regex(pattern)
    names = []
    with os.scandir(base) as entries:
        for entry in entries:
            if regex.fullmatch(entry.name):
                names.append(entry.name + ("/" if entry.is_dir() else ""))
    names.sort()
    return _capped(names, f"no entries matching {pattern!r} in {_shown(base, cwd)}")


def _capped(lines: list[str], empty: str) -> str:
    if not lines:
        return empty
    if len(lines) > MAX_ENTRIES:
        more = len(lines) - MAX_ENTRIES
        lines = [*lines[:MAX_ENTRIES], f"[... {more} more: narrow the pattern or the path]"]
    return "\n".join(lines)


def _glob(base: str, pattern: str, cwd: str) -> str:
    if not os.path.isdir(base):
        raise FileAccessError(f"{_shown(base, cwd)} is not a directory")
    regex = glob_regex(pattern.removeprefix("./"))
    found = []
    for top, dirs, files in _walk(base):
        for name in (*dirs, *files):
            relative = os.path.relpath(os.path.join(top, name), base).replace(os.sep, "/")
            if regex.fullmatch(relative):
                found.append(_shown(os.path.join(top, name), cwd))
    return _capped(found, f"no paths matching {pattern!r} in {_shown(base, cwd)}")


def _grep_file(path: str, regex: re.Pattern[str], cwd: str, out: list[str]) -> None:
    try:
        if os.path.getsize(path) > _GREP_SIZE:
            return
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return  # unreadable or not text: not searched
    if "\0" in text:
        return
    shown = _shown(path, cwd)
    for number, line in enumerate(text.splitlines(), 1):
        if regex.search(line):
            if len(line) > _LINE_WIDTH:
                line = line[: _LINE_WIDTH - 1] + "…"
            out.append(f"{shown}:{number}:{line}")
            if len(out) > MAX_MATCHES:
                return


def _grep(
    base: str, regex: re.Pattern[str], cwd: str, roots: Sequence[str] | None, pattern: str
) -> str:
    out: list[str] = []
    if os.path.isfile(base):
        _grep_file(base, regex, cwd, out)
    elif os.path.isdir(base):
        for top, _, files in _walk(base):
            for name in files:
                try:  # a link inside that leads out is not followed
                    path = resolve_path(os.path.join(top, name), cwd, roots)
                except FileAccessError:
                    continue
                _grep_file(path, regex, cwd, out)
                if len(out) > MAX_MATCHES:
                    break
            if len(out) > MAX_MATCHES:
                break
    else:
        raise FileAccessError(f"{_shown(base, cwd)} does not exist")
    if not out:
        return f"no lines match {pattern!r} in {_shown(base, cwd)}"
    if len(out) > MAX_MATCHES:
        out[MAX_MATCHES:] = ["[... more matches not shown: narrow the pattern or the path]"]
    return "\n".join(out)


@final
class _FileTools:
    """The tools of one application of the plugin."""

    def __init__(self, ctx: Context, files: FileAccess, roots: Sequence[str] | None) -> None:
        self._ctx = ctx
        self._files = files
        self._roots = roots

    def _cwd(self, call: ToolContext) -> str:
        cwd = call.agent.cwd if call.agent is not None else None
        return cwd if cwd is not None else os.getcwd()

    def _path(self, call: ToolContext, raw: str) -> str:
        return resolve_path(raw, self._cwd(call), self._roots)

    def tools(self) -> tuple[Tool, ...]:
        return (
            Tool(
                "read_file",
                f"Read a text file: its lines from offset (1) on, at most limit "
                f"({_READ_LINES}). Paths are relative to the working directory.",
                ReadArgs,
                self.read_file,
            ),
            Tool(
                "write_file",
                "Create a file, or overwrite one with new content (its parent directories "
                "are made). Prefer edit_file to change part of an existing file.",
                WriteArgs,
                self.write_file,
            ),
            Tool(
                "edit_file",
                "Replace old_text with new_text in a file. old_text must occur exactly once: "
                "copy it exactly from read_file, with enough lines around it to be unique.",
                EditArgs,
                self.edit_file,
            ),
            Tool(
                "list_files",
                "List a directory's entries (directories end with /), optionally only the "
                "names matching a glob.",
                ListArgs,
                self.list_files,
            ),
            Tool(
                "glob",
                "Find paths matching a glob pattern (** spans directories), under path.",
                GlobArgs,
                self.glob,
            ),
            Tool(
                "grep",
                "Search files for lines matching a regular expression; answers path:line:text.",
                GrepArgs,
                self.grep,
            ),
        )

    async def read_file(self, call: ToolContext, args: ReadArgs) -> ToolResult:
        try:
            path = self._path(call, args.path)
            text = await self._files.for_agent(call.agent).read_text(path)
        except FileAccessError as exc:
            return ToolResult(str(exc), is_error=True)
        if not text:
            return ToolResult(f"[{args.path} is empty]")
        return ToolResult(select_lines(text, args.offset, min(args.limit, _READ_LINES)))

    async def write_file(self, call: ToolContext, args: WriteArgs) -> ToolResult:
        try:
            path = self._path(call, args.path)
            fs = self._files.for_agent(call.agent)
            try:
                old: str | None = await fs.read_text(path)
            except FileAccessError:
                old = None  # new (or unreadable: the diff shows it as new)
            await fs.write_text(path, args.content)
        except FileAccessError as exc:
            return ToolResult(str(exc), is_error=True)
        self._changed(call, path, old, args.content)
        lines = args.content.count("\n") + (not args.content.endswith("\n") and bool(args.content))
        verb = "wrote" if old is None else "overwrote"
        return ToolResult(f"{verb} {args.path} ({lines} lines)")

    async def edit_file(self, call: ToolContext, args: EditArgs) -> ToolResult:
        try:
            path = self._path(call, args.path)
            fs = self._files.for_agent(call.agent)
            old = await fs.read_text(path)
            new, line = replace_once(old, args.old_text, args.new_text, args.path)
            await fs.write_text(path, new)
        except FileAccessError as exc:
            return ToolResult(str(exc), is_error=True)
        self._changed(call, path, old, new)
        return ToolResult(f"edited {args.path} at line {line}")

    def _changed(self, call: ToolContext, path: str, old: str | None, new: str) -> None:
        agent = call.agent
        if agent is not None:
            # Recorded in the agent's session: ``/undo`` (chat) and a load read it back.
            with contextlib.suppress(SessionClosedError):
                agent.session.append(
                    FileEdited(
                        turn_id=call.turn_id,
                        call_id=call.call_id,
                        path=path,
                        old_text=old,
                        new_text=new,
                    )
                )
        agent_id = agent.id if agent is not None else None
        self._ctx.emit(FileChanged(agent_id, call.call_id, path, old, new))

    async def list_files(self, call: ToolContext, args: ListArgs) -> ToolResult:
        return await self._search(call, args.path, lambda base, cwd: _list(base, args.pattern, cwd))

    async def glob(self, call: ToolContext, args: GlobArgs) -> ToolResult:
        return await self._search(call, args.path, lambda base, cwd: _glob(base, args.pattern, cwd))

    async def grep(self, call: ToolContext, args: GrepArgs) -> ToolResult:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            await trio.lowlevel.checkpoint()
            return ToolResult(
                f"pattern {args.pattern!r} is not a regular expression: {exc}", is_error=True
            )
        return await self._search(
            call, args.path, lambda base, cwd: _grep(base, regex, cwd, self._roots, args.pattern)
        )

    async def _search(
        self, call: ToolContext, path: str, search: Callable[[str, str], str]
    ) -> ToolResult:
        """``search(base, cwd)`` of the tree at ``path``, in a worker thread; a path the agent
        may not reach is the tool's error."""
        try:
            base, cwd = self._path(call, path), self._cwd(call)
            text = await trio.to_thread.run_sync(search, base, cwd)
        except FileAccessError as exc:
            return ToolResult(str(exc), is_error=True)
        return ToolResult(text)


@final
class ToolFiles:
    """The plugin ``tool-files``; apply it with ``await ctx.plugin(tool_files)`` (after a
    provider of ``files``, such as :class:`~._access.LocalFiles`)."""

    name = "tool-files"
    inject = (FILES, TOOLS)

    @attrs.frozen
    class Config:
        """Where the file tools may reach.

        Attributes:
            add_dirs: directories reachable besides the agent's working directory (relative
                ones: to that directory).
            confined: ``False`` lets the tools reach every path.
        """

        add_dirs: list[str] = attrs.Factory(list)
        confined: bool = True

    async def apply(self, ctx: Context, config: ToolFiles.Config | None) -> None:
        """Register the six tools, owned by this fiber."""
        config = config if config is not None else ToolFiles.Config()
        roots = tuple(config.add_dirs) if config.confined else None
        tools = _FileTools(ctx, ctx.service(FILES), roots)
        registry = ctx.service(TOOLS)
        for tool in tools.tools():
            registry.register(tool)


tool_files = ToolFiles()
