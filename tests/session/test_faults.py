"""Store faults: a write or fsync that fails damages nothing durable, says so, and the next
flush writes everything again."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.helpers.paths import HELPERS
from trio_agents.kernel import open_root
from trio_agents.session import JsonlStore, SessionWriteError, TurnEnded, TurnStarted
from trio_agents.session import _jsonl_io as io
from trio_agents.session._records import StopReason

WORKER = HELPERS / "fault_worker.py"


def _records(path: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in path.read_bytes().splitlines()]
    return rows[1:]  # after the header


def test_a_full_disk_loses_nothing_and_the_next_flush_after_it_writes_everything(
    tmp_path: Path,
) -> None:
    """A real EFBIG (the process's file-size limit, like a full disk): the flushes that meet it
    raise with a clear message and leave the file at its last durable end (whole lines, all
    of them flushed ones); once there is room, one flush writes every record, once."""
    done = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "flushed 10"
    failures = [line for line in out if line.startswith("failed: ")]
    assert len(failures) == 2
    for failure in failures:
        assert "File too large" in failure
        assert "its records from seq 10 on are not durable" in failure
        assert "the next flush writes them again" in failure
    sizes = [int(line.split()[1]) for line in out if line.startswith("size ")]
    first_size = sizes[0]
    assert sizes == [first_size, first_size]  # cut back to the durable end, both times
    assert out[-1] == "flushed 25"
    records = _records(tmp_path / "full.jsonl")
    assert [r["seq"] for r in records] == list(range(25))
    assert [r["message_id"] for r in records] == [f"m{n}" for n in range(1, 26)]


async def test_a_failed_fsync_rewrites_what_it_could_not_make_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync answers EIO once: the kernel may have dropped the pages, so retrying fsync would
    prove nothing. The file is cut back to its last durable end (dropping the lines written in
    the background since) and the next flush writes those lines again, then fsyncs."""
    failing = [True]
    real_sync = io._sync_fd

    def sync(fd: int) -> None:
        if failing and failing.pop():
            raise OSError(errno.EIO, "Input/output error")
        real_sync(fd)

    store = JsonlStore(tmp_path, flush_interval=0)
    path = tmp_path / "s.jsonl"
    async with open_root() as root:
        await root.plugin(store)
        session = store.prepare("s")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t1"))
        await store.flush(session)
        durable = path.read_bytes()
        monkeypatch.setattr(io, "_sync_fd", sync)
        session.append(TurnEnded(turn_id="t1", stop_reason=StopReason.COMPLETED))
        session.append(TurnStarted(turn_id="t2"))
        with pytest.raises(SessionWriteError, match=r"Input/output error.*from seq 1 on"):
            await store.flush(session)
        assert path.read_bytes() == durable
        assert session.statistics().flushed_seq == 0
        await store.flush(session)
        assert session.statistics().flushed_seq == 2
        assert [r["seq"] for r in _records(path)] == [0, 1, 2]
        await store.detach(session)


async def test_a_failed_fsync_writes_again_the_lines_the_background_writer_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """Lines the writer task wrote in the background (no fsync yet) are not durable: when the
    next flush's fsync fails, the file is cut back past them, and they are queued again with
    the rest, so the flush after writes every one of them (issue 45: the re-queue of written
    but unsynced lines)."""
    failing = [True]
    real_sync = io._sync_fd

    def sync(fd: int) -> None:
        if failing and failing.pop():
            raise OSError(errno.EIO, "Input/output error")
        real_sync(fd)

    store = JsonlStore(tmp_path, flush_interval=1.0)
    batches_done = trio.Semaphore(0)
    run_sync = store._run_sync

    async def counted(fn: Callable[[], Any]) -> Any:
        try:
            return await run_sync(fn)
        finally:
            batches_done.release()

    store._run_sync = counted
    path = tmp_path / "s.jsonl"
    async with open_root() as root:
        await root.plugin(store)
        session = store.prepare("s")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t1"))
        await store.flush(session)
        durable = path.read_bytes()
        while batches_done.value:
            await batches_done.acquire()
        session.append(TurnEnded(turn_id="t1", stop_reason=StopReason.COMPLETED))
        session.append(TurnStarted(turn_id="t2"))
        await batches_done.acquire()  # the writer task's own batch, after flush_interval
        assert store.statistics().sync_batches == 1
        assert [r["seq"] for r in _records(path)] == [0, 1, 2]  # written, not fsynced
        assert session.statistics().flushed_seq == 0
        monkeypatch.setattr(io, "_sync_fd", sync)
        session.append(TurnEnded(turn_id="t2", stop_reason=StopReason.COMPLETED))
        with pytest.raises(SessionWriteError, match=r"Input/output error.*from seq 1 on"):
            await store.flush(session)
        assert path.read_bytes() == durable  # cut back past the background-written lines
        await store.flush(session)
        assert session.statistics().flushed_seq == 3
        assert [r["seq"] for r in _records(path)] == [0, 1, 2, 3]
        await store.detach(session)


async def test_an_agent_lives_through_a_write_failure_and_its_next_turn_writes_it_all(
    tmp_path: Path,
) -> None:
    """A turn whose flush fails still ends (the store reports the failure once); the agent
    takes the next prompt, and once the disk is back its next flush writes every record."""
    import trio_agents as ta
    from trio_agents.session import SessionWriteFailed

    store = JsonlStore(tmp_path)
    failures: list[SessionWriteFailed] = []
    async with ta.open_runtime(store=store) as root:
        root.on(SessionWriteFailed, failures.append)
        agent = (await root.agents.create(session_id="a")).agent
        assert await agent.ask("one") == "one"
        path = tmp_path / "a.jsonl"
        kept = path.read_bytes()
        path.unlink()
        path.mkdir()  # the file can no longer be opened: as good as a full disk here
        assert await agent.ask("two") == "two"
        assert await agent.ask("three") == "three"
        assert len(failures) == 1
        path.rmdir()
        path.write_bytes(kept)  # the disk is back, with what was durable
        assert await agent.ask("four") == "four"
        stored = [r for r in _records(path) if r["type"] == "user_message"]
        assert [r["content"] for r in stored] == ["one", "two", "three", "four"]
        assert [r["seq"] for r in _records(path)] == list(range(len(_records(path))))
