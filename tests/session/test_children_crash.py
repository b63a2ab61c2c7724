"""A JSONL delete of a session with children, killed (SIGKILL) before each file it removes:
what is left never holds a child whose parent is gone, and a second delete finishes the
job (issue 37, item 2)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
import trio

from tests.helpers.children_support import FAMILY, store_a_family
from trio_agents.kernel import open_root
from trio_agents.session import JsonlStore, SessionInfo

#: ``python -c`` this, ROOT, K: delete ``p`` from the JSONL store ROOT, and kill the process
#: (SIGKILL, from an audit hook: no cleanup runs) just before it removes its K-th session file.
DELETE_AND_DIE = """
import os, signal, sys
import trio
from trio_agents.kernel import open_root
from trio_agents.session import JsonlStore

root, kill_before = sys.argv[1], int(sys.argv[2])
removed = 0

def hook(event, args):
    global removed
    if event == "os.remove" and str(args[0]).endswith(".jsonl"):
        if removed == kill_before:
            os.kill(os.getpid(), signal.SIGKILL)
        removed += 1

sys.addaudithook(hook)

async def main():
    async with open_root() as ctx:
        store = JsonlStore(root)
        await ctx.plugin(store)
        await store.delete("p")

trio.run(main)
"""


async def listed(root: Path) -> list[SessionInfo]:
    async with open_root() as ctx:
        store = JsonlStore(root)
        await ctx.plugin(store)
        return await store.list()


@pytest.mark.parametrize("kill_before", range(4))
async def test_a_delete_killed_midway_leaves_no_orphan(tmp_path: Path, kill_before: int) -> None:
    """Killed before its k-th removal, the delete leaves 5 - k sessions, each with its parent
    still stored (none of them turns top-level); deleting p again removes the rest."""
    await store_a_family(JsonlStore(tmp_path))
    done = await trio.run_process(
        [sys.executable, "-c", DELETE_AND_DIE, str(tmp_path), str(kill_before)],
        check=False,
        capture_stderr=True,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    left = {info.id: info.parent_id for info in await listed(tmp_path)}
    assert len(left) == len(FAMILY) - kill_before
    assert {"p", "s"} <= set(left)
    assert all(parent is None or parent in left for parent in left.values()), left
    assert all(FAMILY[session_id] == parent for session_id, parent in left.items())
    async with open_root() as ctx:
        store = JsonlStore(tmp_path)
        await ctx.plugin(store)
        await store.delete("p")
        assert [info.id for info in await store.list()] == ["s"]
