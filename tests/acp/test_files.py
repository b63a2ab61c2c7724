"""The file tools over ACP, driven by the real ACP client (the ``agent-client-protocol``
package) against the installed ``trio-agents acp``: a client that offers ``fs/*`` (reads and
writes go through its buffers, never the disk) and one that does not (the disk), with the
tool calls' kind, locations, diff content and status sequence, and approval of edits.

Each test is a sync function running its own ``asyncio.run``: the client is not trio code.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.helpers.support import TRIO_AGENTS

acp = pytest.importorskip("acp")

from acp import RequestError, text_block  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)

T = TypeVar("T")
# Safety net only: every wait below ends on an event, this bounds a broken run.
LIMIT = 30.0


class Editor:
    """The client: unsaved buffers by path (``fs/*`` answers from them), every update, and
    permission questions answered allow_once."""

    def __init__(self, buffers: dict[str, str] | None = None) -> None:
        self.buffers = dict(buffers or {})
        self.reads: list[str] = []
        self.updates: list[Any] = []
        self.permission_requests: list[Any] = []

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        chosen = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:  # fmt: skip
        self.reads.append(path)
        if path not in self.buffers:
            raise RequestError.resource_not_found(path)
        return ReadTextFileResponse(content=self.buffers[path])

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.buffers[path] = content
        return WriteTextFileResponse()

    def tool_updates(self) -> list[Any]:
        return [u for u in self.updates if u.session_update in ("tool_call", "tool_call_update")]


@asynccontextmanager
async def editor_session(editor: Editor, cwd: Path, *, fs: bool) -> AsyncIterator[tuple[Any, str]]:
    async with acp.spawn_agent_process(
        editor,
        str(TRIO_AGENTS),
        "acp",
        "--store",
        "memory",
        transport_kwargs={"stderr": None},
        env=dict(os.environ),
    ) as (conn, _):
        capabilities = ClientCapabilities(
            fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs)
        )
        await conn.initialize(protocol_version=1, client_capabilities=capabilities)
        session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
        yield conn, session.session_id


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), LIMIT)

    return asyncio.run(bounded())


def tool(name: str, **arguments: object) -> list[Any]:
    return [text_block(f"!tool {name} {json.dumps(arguments)}")]


def test_a_client_offering_fs_is_read_and_written_through_its_buffers(tmp_path: Path) -> None:
    """read_file sees the editor's unsaved buffer; edit_file lands in the buffer (asked
    first), and the disk is untouched; the call is an 'edit' with its location and diffs,
    pending, then in_progress, then completed."""
    path = tmp_path / "a.py"
    path.write_text("x = 1\n")  # the saved file; the buffer differs
    editor = Editor({str(path): "x = 2\n"})

    async def main() -> None:
        async with editor_session(editor, tmp_path, fs=True) as (conn, session_id):
            read = await conn.prompt(session_id=session_id, prompt=tool("read_file", path="a.py"))
            assert read.stop_reason == "end_turn"
            edit = tool("edit_file", path="a.py", old_text="x = 2", new_text="x = 3")
            edited = await conn.prompt(session_id=session_id, prompt=edit)
            assert edited.stop_reason == "end_turn"

    run(main)
    assert editor.buffers[str(path)] == "x = 3\n"
    assert path.read_text() == "x = 1\n"
    assert editor.reads == [str(path), str(path)]
    texts = [
        c.content.text
        for u in editor.tool_updates()
        for c in (u.content or [])
        if c.type == "content"
    ]
    assert texts[0] == "x = 2\n"  # what read_file answered: the buffer
    announced = [u for u in editor.tool_updates() if u.session_update == "tool_call"]
    assert [u.kind for u in announced] == ["read", "edit"]
    assert announced[1].locations[0].path == str(path)
    assert (announced[1].content[0].old_text, announced[1].content[0].new_text) == (
        "x = 2",
        "x = 3",
    )
    [asked] = editor.permission_requests
    assert (asked.kind, asked.title) == ("edit", "edit_file: a.py")
    call_id = announced[1].tool_call_id
    statuses = [u.status for u in editor.tool_updates() if u.tool_call_id == call_id]
    assert statuses == ["pending", "in_progress", "completed"]
    [done] = [
        u for u in editor.tool_updates() if u.tool_call_id == call_id and u.status == "completed"
    ]
    diff = done.content[0]
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff",
        str(path),
        "x = 2\n",
        "x = 3\n",
    )


def test_a_client_without_fs_gets_the_disk_and_a_write_outside_is_refused(
    tmp_path: Path,
) -> None:
    """Without fs/*, write_file writes the disk (asked, then a diff of a new file); a path
    outside the session's cwd is a failed call that wrote nothing."""
    work = tmp_path / "work"
    work.mkdir()
    editor = Editor()

    async def main() -> None:
        async with editor_session(editor, work, fs=False) as (conn, session_id):
            write = tool("write_file", path="new.txt", content="hello\n")
            assert (await conn.prompt(session_id=session_id, prompt=write)).stop_reason == (
                "end_turn"
            )
            escape = tool("write_file", path="../escaped.txt", content="no\n")
            assert (await conn.prompt(session_id=session_id, prompt=escape)).stop_reason == (
                "end_turn"
            )

    run(main)
    assert (work / "new.txt").read_text() == "hello\n"
    assert not (tmp_path / "escaped.txt").exists()
    assert editor.reads == []
    ended = [u for u in editor.tool_updates() if u.status in ("completed", "failed")]
    assert [u.status for u in ended] == ["completed", "failed"]
    diff = ended[0].content[0]
    assert (diff.type, diff.path, diff.old_text, diff.new_text) == (
        "diff",
        str(work / "new.txt"),
        None,
        "hello\n",
    )
    assert "is outside the directories the file tools may reach" in ended[1].content[0].content.text
