"""The JSONL store syncs the files of one batch concurrently, on threads it owns (issue #43: many
agents flushing at once share about one journal commit instead of one fsync after another)."""

from __future__ import annotations

import errno
import os
import re
import threading
from pathlib import Path

import pytest

from trio_agents.kernel import open_root
from trio_agents.session import JsonlStore, UserMessage
from trio_agents.session import _jsonl_io as io

#: Long enough that no batch runs but the ones a flush asks for.
NEVER = 3600.0


def _fsync_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("trio-agents-fsync")]


async def test_one_batch_syncs_its_files_at_once_and_a_failed_sync_costs_the_others_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three sessions in one sync batch: their three fsyncs wait for each other (a barrier that
    serial syncs would never pass), on the store's threads; the one that fails fails alone,
    and its next flush writes it; the threads are joined when the store's fiber ends."""
    real_sync = io._sync_fd
    barrier = threading.Barrier(3, timeout=10)
    failing = {"b"}
    names: set[str] = set()

    def sync(fd: int) -> None:
        session_id = Path(os.readlink(f"/proc/self/fd/{fd}")).name.split(".")[0]
        if failing:
            barrier.wait()
            names.add(threading.current_thread().name)
            if session_id in failing:
                failing.clear()
                raise OSError(errno.EIO, "Input/output error")
        real_sync(fd)

    store = JsonlStore(tmp_path, flush_interval=NEVER)
    async with open_root() as root:
        await root.plugin(store)
        sessions = {}
        for session_id in "abc":
            session = sessions[session_id] = store.prepare(session_id)
            await store.enter(session)
            session.append(UserMessage(message_id=f"m-{session_id}", content="hi", turn_id="t"))
        monkeypatch.setattr(io, "_sync_fd", sync)
        await store.flush(sessions["a"])  # the batch takes every dirty session
        flushed = {i: s.statistics().flushed_seq for i, s in sessions.items()}
        assert flushed == {"a": 0, "b": -1, "c": -1}
        await store.flush(sessions["c"])  # synced in a's batch: nothing left to do
        await store.flush(sessions["b"])  # the failed one: written again
        assert {s.statistics().flushed_seq for s in sessions.values()} == {0}
        assert len(names) == 3
        assert all(re.fullmatch(r"trio-agents-fsync_\d+", name) for name in names)
        for session in sessions.values():
            await store.detach(session)
    assert _fsync_threads() == []
    assert [len((tmp_path / f"{s}.jsonl").read_bytes().splitlines()) for s in "abc"] == [2, 2, 2]
