"""The JSONL backend: file format, bounded-delay writes, group commit, crash repair."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.helpers.paths import ROOT
from trio_agents.kernel import FiberFailed, open_root
from trio_agents.session import (
    AssistantMessage,
    JsonlStore,
    Session,
    SessionDisposed,
    SessionFlushed,
    SessionFormatError,
    SessionWriteError,
    SessionWriteFailed,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
    default_root,
    dump_record,
)
from trio_agents.session._errors import SessionStoreClosedError


async def inline(fn: Callable[[], Any]) -> Any:
    """A worker-thread stand-in that runs the batch in the trio thread (deterministic)."""
    await trio.lowlevel.checkpoint()
    return fn()


@asynccontextmanager
async def running(store: JsonlStore, *, threads: bool = True) -> AsyncIterator[JsonlStore]:
    if not threads:
        store._run_sync = inline
    async with open_root() as root:
        await root.plugin(store)
        yield store


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_file(path: Path, *parts: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(parts).encode())


HEADER = '{"format":"trio-agents-session","version":1,"session_id":"%s"}\n'


def leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """Every non-group exception in ``group``, depth first."""
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def test_default_root_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """$TRIO_AGENTS_HOME wins, then $XDG_STATE_HOME, then ~/.local/state."""
    monkeypatch.setenv("TRIO_AGENTS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "home" / "sessions"
    assert JsonlStore().root == tmp_path / "home" / "sessions"
    monkeypatch.delenv("TRIO_AGENTS_HOME")
    assert default_root() == tmp_path / "xdg" / "trio-agents" / "sessions"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_root() == tmp_path / ".local" / "state" / "trio-agents" / "sessions"


def test_flush_interval_must_be_a_finite_delay() -> None:
    """A negative or infinite flush_interval is refused."""
    with pytest.raises(ValueError, match=r"^flush_interval is a delay in seconds"):
        JsonlStore("x", flush_interval=-1)


async def test_flush_is_durable_and_the_file_has_a_header(tmp_path: Path) -> None:
    """After flush() the file holds the header and every record, one per line."""
    async with running(JsonlStore(tmp_path)) as store:
        session = store.prepare("f")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        session.append(UserMessage(message_id="m", content="hi\nthere", turn_id="t"))
        await store.flush(session)
        assert session.statistics().flushed_seq == 1
        got = lines(tmp_path / "f.jsonl")
    assert got[0] == {"format": "trio-agents-session", "version": 1, "session_id": "f"}
    assert [r["type"] for r in got[1:]] == ["turn_started", "user_message"]
    assert got[2]["content"] == "hi\nthere"


async def test_flushed_records_are_never_rewritten(tmp_path: Path) -> None:
    """Later writes only append: the flushed bytes stay a prefix of the file."""
    async with running(JsonlStore(tmp_path)) as store:
        session = store.prepare("p")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        await store.flush(session)
        before = (tmp_path / "p.jsonl").read_bytes()
        session.append(TurnEnded(turn_id="t", stop_reason=StopReason.COMPLETED))
        await store.flush(session)
        after = (tmp_path / "p.jsonl").read_bytes()
    assert after.startswith(before)
    assert len(after) > len(before)


async def test_background_write_happens_within_the_flush_interval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An appended record reaches the file after flush_interval without any flush call."""
    async with running(JsonlStore(tmp_path, flush_interval=0.05), threads=False) as store:
        session = store.prepare("bg")
        await store.enter(session)
        await trio.sleep(1)  # the header of the new file was written in the background
        start = trio.current_time()
        session.append(AssistantMessage(turn_id="t", content="later"))
        await trio.sleep(0.049)
        assert len(lines(tmp_path / "bg.jsonl")) == 1
        await trio.sleep(0.002)
        assert len(lines(tmp_path / "bg.jsonl")) == 2
        assert trio.current_time() - start < 0.06
        stats = store.statistics()
        assert stats.sync_batches == 0
        assert session.statistics().flushed_seq == -1  # written, but not fsynced


async def test_background_writes_batch_many_appends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Many appends within one interval are written by one background round trip."""
    async with running(JsonlStore(tmp_path), threads=False) as store:
        session = store.prepare("many")
        await store.enter(session)
        for i in range(100):
            session.append(AssistantMessage(turn_id="t", content=str(i)))
        await trio.sleep(1)
        assert store.statistics().write_batches == 1
        assert len(lines(tmp_path / "many.jsonl")) == 101


async def test_concurrent_flushes_share_group_commits(tmp_path: Path) -> None:
    """N concurrent flushers of N sessions need fewer than N worker round trips."""
    n = 8
    async with running(JsonlStore(tmp_path)) as store:
        group = [store.prepare(f"g{i}") for i in range(n)]
        for session in group:
            await store.enter(session)
            session.append(TurnStarted(turn_id="t"))

        before = store.statistics().sync_batches
        async with trio.open_nursery() as nursery:
            for session in group:
                nursery.start_soon(store.flush, session)
        used = store.statistics().sync_batches - before
        assert 1 <= used < n
        for i, session in enumerate(group):
            assert session.statistics().flushed_seq == 0
            assert lines(tmp_path / f"g{i}.jsonl")[1]["type"] == "turn_started"


async def test_flushes_arriving_during_a_batch_join_the_next_one(tmp_path: Path) -> None:
    """While one flush batch is in flight, every later flusher shares a single next batch."""
    gate = trio.Event()
    round_trips: list[int] = []

    async def held(fn: Callable[[], Any]) -> Any:
        round_trips.append(1)
        await gate.wait()
        return fn()

    store = JsonlStore(tmp_path)
    async with running(store, threads=False) as store:
        store._run_sync = held
        first = store.prepare("first")
        await store.enter(first)
        first.append(TurnStarted(turn_id="t"))
        gate.set()
        await store.flush(first)  # the new file exists
        gate = trio.Event()
        round_trips.clear()
        others = [store.prepare(f"o{i}") for i in range(5)]
        async with trio.open_nursery() as nursery:
            first.append(TurnStarted(turn_id="u"))
            nursery.start_soon(store.flush, first)
            await trio.testing.wait_all_tasks_blocked()
            assert len(round_trips) == 1  # batch 1 is in flight, held at the gate
            for session in others:
                await store.enter(session)
                session.append(TurnStarted(turn_id="t"))
                nursery.start_soon(store.flush, session)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
        assert len(round_trips) == 2
        assert all(s.statistics().flushed_seq == 0 for s in others)


async def test_corrupt_middle_line_is_refused_with_its_line_number(tmp_path: Path) -> None:
    """A bad complete line that is not the last one is corruption, reported with path:line."""
    good = dump_record(TurnStarted(turn_id="t", seq=1)) + "\n"
    write_file(tmp_path / "bad.jsonl", HEADER % "bad", "not json\n", good)
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(SessionFormatError, match=r"bad\.jsonl:2 is not valid JSON"):
            await store.load("bad")


async def test_a_bad_line_before_a_torn_tail_is_corruption(tmp_path: Path) -> None:
    """Only the very last line can be torn: a bad complete line before a torn tail is refused."""
    write_file(tmp_path / "two.jsonl", HEADER % "two", "not json\n", '{"type":"turn_sta')
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(SessionFormatError, match=r"two\.jsonl:2 is not valid JSON"):
            await store.load("two")


async def test_a_line_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are refused in the middle of a file, left out at its end."""
    good = dump_record(TurnStarted(turn_id="t", seq=0)).encode() + b"\n"
    header = (HEADER % "bytes").encode()
    (tmp_path / "bytes.jsonl").write_bytes(header + good + b'{"x":"\xff"}\n')
    (tmp_path / "mid.jsonl").write_bytes((HEADER % "mid").encode() + b'{"\xff"}\n' + good)
    async with running(JsonlStore(tmp_path)) as store:
        assert (await store.load("bytes")).records[:1] == (TurnStarted(turn_id="t", seq=0),)
        with pytest.raises(SessionFormatError, match=r"mid\.jsonl:2 is not UTF-8 text"):
            await store.load("mid")
    # Reading never writes: the bad last line stays until the session is resumed.
    assert (tmp_path / "bytes.jsonl").read_bytes() == header + good + b'{"x":"\xff"}\n'


async def test_interrupted_turn_is_repaired_and_persisted(tmp_path: Path) -> None:
    """A file whose turn never ended loads with TurnEnded(interrupted), written on enter."""
    started = dump_record(TurnStarted(turn_id="t9", seq=0)) + "\n"
    write_file(tmp_path / "int.jsonl", HEADER % "int", started)
    async with running(JsonlStore(tmp_path)) as store:
        session = await store.load("int")
        assert session.records[-1] == TurnEnded(
            turn_id="t9", stop_reason=StopReason.INTERRUPTED, seq=1
        )
        await store.enter(session)
        await store.flush(session)
    got = lines(tmp_path / "int.jsonl")
    assert got[-1]["type"] == "turn_ended"
    assert got[-1]["stop_reason"] == "interrupted"


async def test_newer_format_version_is_refused_naming_both_versions(tmp_path: Path) -> None:
    """A header of a newer version is refused with a message naming both versions."""
    header = '{"format":"trio-agents-session","version":7,"session_id":"new"}\n'
    write_file(tmp_path / "new.jsonl", header, "whatever\n")
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(
            SessionFormatError,
            match=r"^session file .*new\.jsonl has format version 7, newer than version 1 "
            r"that this trio-agents reads; upgrade trio-agents to load it$",
        ):
            await store.load("new")
    assert (tmp_path / "new.jsonl").read_text() == header + "whatever\n"  # untouched


async def test_foreign_file_is_refused(tmp_path: Path) -> None:
    """A .jsonl file without the session header is not taken for a session."""
    write_file(tmp_path / "other.jsonl", '{"hello": 1}\n')
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(SessionFormatError, match=r"is not a trio-agents session file"):
            await store.load("other")


async def test_abandon_leaves_no_file_for_a_new_session(tmp_path: Path) -> None:
    """A rolled-back creation removes the file it wrote."""
    async with running(JsonlStore(tmp_path)) as store:
        session = store.prepare("rb")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        await store.flush(session)
        assert (tmp_path / "rb.jsonl").exists()
        await store.abandon(session)
        assert not (tmp_path / "rb.jsonl").exists()
        assert not (tmp_path / "rb.jsonl.new").exists()


async def test_losing_duplicate_does_not_touch_the_winners_file(tmp_path: Path) -> None:
    """Abandoning the loser of a duplicate-id race keeps the winner's file."""
    async with running(JsonlStore(tmp_path)) as store:
        winner, loser = store.prepare("w"), store.prepare("w")
        loser.append(TurnStarted(turn_id="loser"))
        await store.enter(winner)
        winner.append(TurnStarted(turn_id="winner"))
        await store.flush(winner)
        with pytest.raises(ValueError, match="already live"):
            await store.enter(loser)
        await store.abandon(loser)
        assert lines(tmp_path / "w.jsonl")[1]["turn_id"] == "winner"


async def test_list_reads_the_session_files_of_the_directory(tmp_path: Path) -> None:
    """A store started on an existing directory lists its session files only."""
    started = dump_record(UserMessage(message_id="m", content="from disk", turn_id="t", seq=0))
    write_file(tmp_path / "disk.jsonl", HEADER % "disk", started + "\n")
    write_file(tmp_path / "notes.txt", "ignored")
    async with running(JsonlStore(tmp_path)) as store:
        [info] = await store.list()
        assert (info.id, info.records, info.live, info.title) == ("disk", 1, False, "from disk")


REPO = str(ROOT)
CHILD = textwrap.dedent(
    """
    import sys, trio
    from trio_agents.kernel import open_root
    from trio_agents.session import JsonlStore, AssistantMessage

    async def main(root):
        async with open_root() as ctx:
            await ctx.plugin(JsonlStore(root, flush_interval=0.001))
            store = ctx.get("sessions")
            session = store.prepare("killed")
            await store.enter(session)
            i = 0
            while True:
                for _ in range(7):
                    session.append(AssistantMessage(turn_id="t", content="x" * (i % 97)))
                    i += 1
                await store.flush(session)
                print("flushed", session.statistics().flushed_seq, flush=True)
                for _ in range(3):  # these are left to the background writer
                    session.append(AssistantMessage(turn_id="t", content="y" * 50))
                    i += 1
                await trio.lowlevel.checkpoint()

    trio.run(main, sys.argv[1])
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_sigkill_mid_stream_keeps_every_flushed_record(tmp_path: Path) -> None:
    """A process killed while writing leaves a file that loads with all flushed records."""
    root = tmp_path / "sessions"
    env = {**os.environ, "PYTHONPATH": REPO}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    flushed = -1
    buffer = b""
    with trio.fail_after(60):
        while flushed < 300:
            chunk = await proc.stdout.receive_some()
            assert chunk, "the child exited early"
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for line in complete:
                flushed = int(line.split()[1])
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    await proc.stdout.aclose()
    assert proc.returncode == -signal.SIGKILL
    async with running(JsonlStore(root)) as store:
        session = await store.load("killed")
    records = session.records
    assert len(records) > flushed
    assert [r.seq for r in records] == list(range(len(records)))
    for record in records[: flushed + 1]:
        assert isinstance(record, AssistantMessage)
        assert set(record.content) <= {"x", "y"}


# -- the store object ----------------------------------------------------------------------------


def test_the_store_names_its_root_and_files(tmp_path: Path) -> None:
    """repr shows the root; path_of is <root>/<id>.jsonl whether or not it exists."""
    store = JsonlStore(tmp_path)
    assert repr(store) == f"<JsonlStore {str(tmp_path)!r}>"
    assert store.path_of("s-1") == tmp_path / "s-1.jsonl"


# -- write failures ------------------------------------------------------------------------------


async def test_a_failed_write_is_reported_and_the_next_flush_writes_it_again(
    tmp_path: Path,
) -> None:
    """A flush whose write fails raises SessionWriteError and writes nothing of the session;
    the next flush tries again (and fails again while the cause lasts); once the cause is
    gone every record is written, once. The store serves other sessions all along."""
    events: list[object] = []
    obstacle = tmp_path / "wf.jsonl.new"  # where the new file would be created
    obstacle.mkdir()
    store = JsonlStore(tmp_path)
    async with open_root() as root:
        root.on(object, events.append)
        await root.plugin(store)
        session = store.prepare("wf")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        failed = (
            r"^writing session 'wf' to .*wf\.jsonl failed \(.*\); its records from seq 0 on "
            r"are not durable — the next flush writes them again$"
        )
        with pytest.raises(SessionWriteError, match=failed) as first:
            await store.flush(session)
        session.append(TurnEnded(turn_id="t", stop_reason=StopReason.COMPLETED))
        with pytest.raises(SessionWriteError, match=failed) as again:
            await store.flush(session)
        # A second attempt that failed the same way is the same problem, the same error.
        assert again.value is first.value
        assert not (tmp_path / "wf.jsonl").exists()
        other = store.prepare("ok")
        await store.enter(other)
        other.append(TurnStarted(turn_id="t"))
        await store.flush(other)
        assert lines(tmp_path / "ok.jsonl")[1]["turn_id"] == "t"
        obstacle.rmdir()
        await store.flush(session)
        assert session.statistics().flushed_seq == 1
        assert [r["type"] for r in lines(tmp_path / "wf.jsonl")[1:]] == [
            "turn_started",
            "turn_ended",
        ]
        await store.detach(session)
    failures = [e for e in events if isinstance(e, SessionWriteFailed) and e.session_id == "wf"]
    assert len(failures) == 1  # one failure, told once, however many retries met it
    ended = [
        type(e).__name__
        for e in events
        if isinstance(e, SessionFlushed | SessionDisposed) and e.session_id == "wf"
    ]
    assert ended[-1] == "SessionDisposed"
    assert "SessionFlushed" in ended


async def test_an_append_to_an_existing_file_that_fails_is_reported(tmp_path: Path) -> None:
    """The error names the first record that is not durable."""
    async with running(JsonlStore(tmp_path)) as store:
        session = store.prepare("gone")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        await store.flush(session)
        (tmp_path / "gone.jsonl").unlink()
        (tmp_path / "gone.jsonl").mkdir()  # the file can no longer be opened for appending
        session.append(TurnEnded(turn_id="t", stop_reason=StopReason.COMPLETED))
        with pytest.raises(SessionWriteError, match=r"its records from seq 1 on are not durable"):
            await store.flush(session)
        assert session.statistics().flushed_seq == 0
        with pytest.raises(SessionWriteError):
            await store.detach(session)


async def test_a_writer_that_dies_fails_every_waiting_flush(tmp_path: Path) -> None:
    """If the batch machinery itself fails, the flush in flight gets that error and a flush
    queued behind it is told the store closed; nobody waits forever."""
    gate = trio.Event()
    started = trio.Event()

    async def broken(fn: Callable[[], Any]) -> Any:
        started.set()
        await gate.wait()
        raise RuntimeError("the worker thread pool is gone")

    failures: list[FiberFailed] = []
    store = JsonlStore(tmp_path)
    store._run_sync = broken
    outcomes: dict[str, BaseException] = {}

    async def scenario() -> None:
        async with open_root() as root:
            root.on(FiberFailed, failures.append)
            await root.plugin(store)
            first, second = store.prepare("a"), store.prepare("b")
            await store.enter(first)

            async def flush(session: Session) -> None:
                try:
                    await store.flush(session)
                except Exception as exc:
                    outcomes[session.id] = exc

            with trio.fail_after(10):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(flush, first)
                    await started.wait()  # the batch of 'a' is in flight
                    await store.enter(second)
                    nursery.start_soon(flush, second)
                    await trio.testing.wait_all_tasks_blocked()
                    assert outcomes == {}
                    gate.set()

    with pytest.raises(BaseExceptionGroup) as teardown:
        await scenario()
    # The store's close could not make either session durable, and says so.
    errors = leaves(teardown.value)
    assert {type(e) for e in errors} == {SessionWriteError, SessionStoreClosedError}
    assert any("session 'b' cannot be flushed" in str(e) for e in errors)
    assert isinstance(outcomes["a"], RuntimeError)
    assert isinstance(outcomes["b"], SessionStoreClosedError)
    assert str(outcomes["b"]) == "the session store closed before this flush was written"
    assert [f.plugin for f in failures] == ["sessions"]
    assert not store.statistics().running


async def test_abandon_waits_for_the_batch_creating_the_file_then_removes_it(
    tmp_path: Path,
) -> None:
    """A creation rolled back while the writer is creating its file leaves no file."""
    gate = trio.Event()
    started = trio.Event()

    async def held(fn: Callable[[], Any]) -> Any:
        started.set()
        await gate.wait()
        return fn()

    store = JsonlStore(tmp_path, flush_interval=0)
    store._run_sync = held
    async with running(store) as store:
        session = store.prepare("late")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        abandoned = trio.Event()

        async def abandon() -> None:
            await store.abandon(session)
            abandoned.set()

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await started.wait()  # a background (unsynced) write is in flight
                nursery.start_soon(abandon)
                await trio.testing.wait_all_tasks_blocked()
                assert not abandoned.is_set()
                gate.set()
        assert not (tmp_path / "late.jsonl").exists()
        assert not (tmp_path / "late.jsonl.new").exists()
        assert store.statistics().sync_batches == 0


async def test_abandon_that_cannot_remove_the_file_raises_and_still_ends(tmp_path: Path) -> None:
    """The rollback's failure is raised (to joiners too); the session is out of the store."""
    async with running(JsonlStore(tmp_path)) as store:
        session = store.prepare("stuck")
        await store.enter(session)
        await store.flush(session)
        (tmp_path / "stuck.jsonl").unlink()
        (tmp_path / "stuck.jsonl").mkdir()  # unlink() of a directory fails
        with pytest.raises(OSError, match=r"stuck\.jsonl") as info:
            await store.abandon(session)
        with pytest.raises(OSError, match=r"stuck\.jsonl") as again:
            await store.abandon(session)
        assert again.value is info.value
        assert store.get("stuck") is None
        await store.enter(store.prepare("stuck-2"))


# -- reading and repairing -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"hello": 1}', r"is not a trio-agents session file"),
        (
            '{"format":"trio-agents-session","version":7,"session_id":"one"}',
            r"has format version 7, newer than version 1",
        ),
    ],
)
async def test_a_one_line_file_that_is_no_torn_header_is_refused_not_reset(
    tmp_path: Path, content: str, problem: str
) -> None:
    """Only a prefix of our own header counts as a torn header; anything else without a
    newline is refused, and the file keeps its content."""
    write_file(tmp_path / "one.jsonl", content)
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(SessionFormatError, match=problem):
            await store.load("one")
    assert (tmp_path / "one.jsonl").read_text() == content


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("garbage\n", r"is not a trio-agents session file \(its first line is not a"),
        (
            '{"format":"trio-agents-session","version":"1","session_id":"h"}\n',
            r"h\.jsonl: the header has no valid format version: '1'$",
        ),
        (
            '{"format":"trio-agents-session","version":true,"session_id":"h"}\n',
            r"the header has no valid format version: True$",
        ),
        (
            '{"format":"trio-agents-session","version":0,"session_id":"h"}\n',
            r"the header has no valid format version: 0$",
        ),
        (
            '{"format":"trio-agents-session","version":1,"session_id":"other"}\n',
            r"h\.jsonl: the header names session 'other', not 'h'; rename the file to match "
            r"its header$",
        ),
    ],
)
async def test_a_bad_header_is_refused(tmp_path: Path, header: str, problem: str) -> None:
    """Each header problem is refused with what is wrong, and the file is left alone."""
    write_file(tmp_path / "h.jsonl", header)
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(SessionFormatError, match=problem):
            await store.load("h")
    assert (tmp_path / "h.jsonl").read_text() == header


async def test_a_gap_in_seq_is_corruption(tmp_path: Path) -> None:
    """Records must be numbered 0, 1, 2, ... in file order."""
    write_file(
        tmp_path / "gap.jsonl",
        HEADER % "gap",
        dump_record(TurnStarted(turn_id="t", seq=0)) + "\n",
        dump_record(TurnStarted(turn_id="u", seq=5)) + "\n",
    )
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(
            SessionFormatError,
            match=r"gap\.jsonl:3: expected the record with seq 1, found seq 5; the file is "
            r"corrupt: .trio-agents sessions repair gap. keeps its valid start and moves the rest "
            r"to a side file$",
        ):
            await store.load("gap")


async def test_a_bad_record_line_names_its_place(tmp_path: Path) -> None:
    """A complete line that is JSON but not a valid record is refused with path:line."""
    write_file(tmp_path / "rec.jsonl", HEADER % "rec", '{"type":"turn_started"}\n', "\n")
    async with running(JsonlStore(tmp_path)) as store:
        with pytest.raises(SessionFormatError, match=r"required field missing @ .*rec\.jsonl:2"):
            await store.load("rec")


# -- listing -------------------------------------------------------------------------------------


async def test_list_of_a_removed_root_is_empty(tmp_path: Path) -> None:
    """If the directory disappears, there is simply nothing stored."""
    root = tmp_path / "sessions"
    async with running(JsonlStore(root)) as store:
        assert root.is_dir()
        root.rmdir()
        assert await store.list() == []
