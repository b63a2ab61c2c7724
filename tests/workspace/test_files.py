"""The file tools on the local disk: reading, writing, the one-match edit, the walks, and the
confinement of paths to the agent's working directory (symlinks and ``..`` resolved first)."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

import trio_agents.agent as ag
from trio_agents.agent import ToolResult
from trio_agents.session import MemoryStore
from trio_agents.workspace import FileChanged, LocalFiles, ToolFiles, tool_files


@attrs.define
class Files:
    """A runtime with the file tools, and an agent working in ``cwd``."""

    root: Any
    agent: ag.Agent
    changes: list[FileChanged]

    async def call(self, name: str, **arguments: object) -> ToolResult:
        result: ToolResult = await self.root.get("tools").invoke(
            name, arguments, self.agent, call_id=f"c-{name}"
        )
        return result


@asynccontextmanager
async def files(cwd: Path, config: ToolFiles.Config | None = None) -> AsyncIterator[Files]:
    async with ag.open_runtime(store=MemoryStore()) as root:
        await root.plugin(LocalFiles())
        await root.plugin(tool_files, config)
        changes: list[FileChanged] = []
        root.on(FileChanged, changes.append)
        handle = await root.agents.create(cwd=cwd)
        yield Files(root, handle.agent, changes)
        await handle.dispose()


async def test_write_then_read_relative_to_the_agents_cwd(tmp_path: Path) -> None:
    """write_file makes the file (and its directories) in the agent's cwd; read_file reads it."""
    async with files(tmp_path) as f:
        wrote = await f.call("write_file", path="src/a.txt", content="one\ntwo\n")
        assert (wrote.is_error, wrote.content) == (False, "wrote src/a.txt (2 lines)")
        assert (tmp_path / "src" / "a.txt").read_text() == "one\ntwo\n"
        read = await f.call("read_file", path="src/a.txt")
        assert (read.is_error, read.content) == (False, "one\ntwo\n")


async def test_read_file_takes_offset_and_limit_and_says_where_to_read_on(tmp_path: Path) -> None:
    """Lines offset..offset+limit-1, then one line saying how many are left and where."""
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    async with files(tmp_path) as f:
        read = await f.call("read_file", path="n.txt", offset=3, limit=2)
        assert read.content == "line 3\nline 4\n[... 6 more lines: read on with offset=5]"
        past = await f.call("read_file", path="n.txt", offset=20)
        assert past.content == "[the file has 10 lines; offset 20 is past its end]"


async def test_edit_replaces_the_one_occurrence_and_reports_the_change(tmp_path: Path) -> None:
    """edit_file changes exactly the text given, says the line, and emits FileChanged."""
    (tmp_path / "m.py").write_text("a = 1\nb = 2\n")
    async with files(tmp_path) as f:
        edited = await f.call("edit_file", path="m.py", old_text="b = 2", new_text="b = 3")
        assert (edited.is_error, edited.content) == (False, "edited m.py at line 2")
        assert (tmp_path / "m.py").read_text() == "a = 1\nb = 3\n"
        [change] = f.changes
        assert (change.agent_id, change.call_id) == (f.agent.id, "c-edit_file")
        assert (change.path, change.old_text, change.new_text) == (
            str(tmp_path / "m.py"),
            "a = 1\nb = 2\n",
            "a = 1\nb = 3\n",
        )


async def test_edit_with_no_match_or_several_is_an_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """Zero matches and two matches (overlapping ones counted) are errors the model reads."""
    (tmp_path / "m.txt").write_text("x x\naaa\n")
    async with files(tmp_path) as f:
        none = await f.call("edit_file", path="m.txt", old_text="y", new_text="z")
        assert none.is_error
        assert re.match(r"^old_text was not found in m\.txt; read the file", none.content)
        two = await f.call("edit_file", path="m.txt", old_text="x", new_text="z")
        assert two.is_error
        assert re.match(r"^old_text occurs 2 times in m\.txt; include more", two.content)
        overlapping = await f.call("edit_file", path="m.txt", old_text="aa", new_text="b")
        assert re.match(r"^old_text occurs 2 times", overlapping.content)
        assert (tmp_path / "m.txt").read_text() == "x x\naaa\n"
        assert f.changes == []


@pytest.mark.parametrize(
    "path", ["../outside.txt", "/etc/hostname", "inner/../../outside.txt", "link/secret.txt"]
)
async def test_paths_outside_the_cwd_are_refused_after_resolving(tmp_path: Path, path: str) -> None:
    """``..``, an absolute path elsewhere and a symlink that leads out are all refused."""
    work = tmp_path / "work"
    (work / "inner").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    os.symlink(tmp_path, work / "link")
    (tmp_path / "secret.txt").write_text("secret")
    async with files(work) as f:
        for name, arguments in (
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "x"}),
            ("edit_file", {"path": path, "old_text": "secret", "new_text": "x"}),
            ("grep", {"pattern": "secret", "path": path}),
        ):
            result = await f.call(name, **arguments)
            assert result.is_error, (name, result)
            assert re.match(
                rf"^{re.escape(path)} is outside the directories the file tools may reach",
                result.content,
            )
    assert (tmp_path / "outside.txt").read_text() == "secret"
    assert (tmp_path / "secret.txt").read_text() == "secret"


async def test_grep_does_not_follow_a_link_inside_that_leads_out(tmp_path: Path) -> None:
    """A directory walk skips a file symlink pointing outside the allowed directories."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret.txt").write_text("password\n")
    os.symlink(tmp_path / "secret.txt", work / "s.txt")
    (work / "ok.txt").write_text("password here\n")
    async with files(work) as f:
        found = await f.call("grep", pattern="password")
        assert found.content == "ok.txt:1:password here"


async def test_added_directories_and_unconfined_reach_further(tmp_path: Path) -> None:
    """add_dirs makes another directory reachable; confined=False, every path."""
    work, shared = tmp_path / "work", tmp_path / "shared"
    work.mkdir()
    shared.mkdir()
    (shared / "s.txt").write_text("shared\n")
    (tmp_path / "far.txt").write_text("far\n")
    async with files(work, ToolFiles.Config(add_dirs=[str(shared)])) as f:
        assert (await f.call("read_file", path="../shared/s.txt")).content == "shared\n"
        assert (await f.call("read_file", path="../far.txt")).is_error
    async with files(work, ToolFiles.Config(confined=False)) as f:
        assert (await f.call("read_file", path="../far.txt")).content == "far\n"


async def test_list_glob_and_grep_walk_the_tree_skipping_vcs_directories(
    tmp_path: Path,
) -> None:
    """list_files lists one directory; glob spans directories with **; grep answers
    path:line:text; .git is never entered."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.py").write_text("TODO in git\n")
    (tmp_path / "src" / "a.py").write_text("# TODO one\n")
    (tmp_path / "src" / "pkg" / "b.py").write_text("ok\n# TODO two\n")
    (tmp_path / "README").write_text("readme\n")
    async with files(tmp_path) as f:
        listed = await f.call("list_files")
        assert listed.content == ".git/\nREADME\nsrc/"
        only = await f.call("list_files", path="src", pattern="*.py")
        assert only.content == "a.py"
        globbed = await f.call("glob", pattern="**/*.py")
        assert globbed.content == "src/a.py\nsrc/pkg/b.py"
        top = await f.call("glob", pattern="*.py", path="src")
        assert top.content == "src/a.py"
        grepped = await f.call("grep", pattern=r"TODO \w+")
        assert grepped.content == "src/a.py:1:# TODO one\nsrc/pkg/b.py:2:# TODO two"
        bad = await f.call("grep", pattern="(")
        assert bad.is_error
        assert re.match(r"^pattern '\(' is not a regular expression", bad.content)
