"""The SQLite backend beyond the store contract (which tests/session/test_store.py runs on it):
group commit, cancellation, a real SIGKILL, format refusal, one writing process, damaged rows,
read-only use and failed batches."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.helpers.paths import HELPERS
from trio_agents.kernel import open_root
from trio_agents.session import (
    Session,
    SessionFormatError,
    SessionStore,
    SessionWriteError,
    SqliteStore,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
    dump_record,
)
from trio_agents.session import _sqlite_io as io

WORKER = HELPERS / "sqlite_worker.py"


@asynccontextmanager
async def running(store: SessionStore) -> AsyncIterator[SessionStore]:
    async with open_root() as root:
        await root.plugin(store)
        yield store


def message(n: int) -> UserMessage:
    return UserMessage(message_id=f"m{n}", content=f"message {n}", turn_id="t")


def stored_lines(path: Path, session_id: str) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT seq, line FROM records WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
    return [(int(seq), str(line)) for seq, line in rows]


def start_worker(db: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)  # and closes the pipes
    assert process.returncode == -signal.SIGKILL


# -- group commit ----------------------------------------------------------------------------------


async def test_concurrent_flushes_share_sync_batches(tmp_path: Path) -> None:
    """N sessions flushing at once are committed in fewer than N sync batches, each record
    exactly once."""
    n = 16
    async with running(SqliteStore(tmp_path / "s.db")) as store:
        sessions = [store.prepare(f"s{i}") for i in range(n)]
        for session in sessions:
            await store.enter(session)
        before = store.statistics().sync_batches

        async def flush_one(i: int) -> None:
            sessions[i].append(message(i))
            await store.flush(sessions[i])

        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(flush_one, i)
        used = store.statistics().sync_batches - before
        assert 1 <= used < n
        assert all(s.statistics().flushed_seq == 0 for s in sessions)
    for i in range(n):
        assert stored_lines(tmp_path / "s.db", f"s{i}") == [
            (0, dump_record(sessions[i].records[0]))
        ]


async def test_a_flush_during_a_commit_joins_the_next_batch(tmp_path: Path) -> None:
    """Flushes that arrive while a sync batch is committing share the next one."""
    async with running(SqliteStore(tmp_path / "s.db")) as store:
        sessions = [store.prepare(f"s{i}") for i in range(5)]
        for session in sessions:
            await store.enter(session)
        await store.flush(sessions[0])
        before = store.statistics().sync_batches
        async with trio.open_nursery() as nursery:
            sessions[0].append(message(0))
            nursery.start_soon(store.flush, sessions[0])
            # The first batch is in its thread now: the others wait for the next one.
            await trio.testing.wait_all_tasks_blocked()
            for session in sessions[1:]:
                session.append(message(1))
                nursery.start_soon(store.flush, session)
        assert store.statistics().sync_batches - before == 2


# -- cancellation ----------------------------------------------------------------------------------


class _CancelAfter(trio.abc.Instrument):
    """Cancel ``scope`` while ``task`` waits in its ``k``-th checkpoint after arming (0: the
    first)."""

    def __init__(self, task: trio.lowlevel.Task, scope: trio.CancelScope, k: int) -> None:
        self.task, self.scope, self.left = task, scope, k

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            if self.left == 0:
                self.scope.cancel()
            self.left -= 1


async def test_a_flush_cancelled_at_any_checkpoint_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    """Cancelling the flushing task at its k-th checkpoint, for every k until the flush
    completes uncancelled: every record is stored exactly once, in order."""
    path = tmp_path / "s.db"
    k = 0
    appended = []
    async with running(SqliteStore(path)) as store:
        session = store.prepare("c")
        await store.enter(session)
        while True:
            appended.append(session.append(message(k)))
            with trio.CancelScope() as scope:
                instrument = _CancelAfter(trio.lowlevel.current_task(), scope, k)
                trio.lowlevel.add_instrument(instrument)
                try:
                    await store.flush(session)
                finally:
                    trio.lowlevel.remove_instrument(instrument)
            if not scope.cancelled_caught:
                break
            k += 1
        assert k >= 1, "the flush should have had a checkpoint to cancel at"
        await store.flush(session)
        assert session.statistics().flushed_seq == len(appended) - 1
    assert stored_lines(path, "c") == [(r.seq, dump_record(r)) for r in appended]


# -- a real SIGKILL --------------------------------------------------------------------------------


async def test_flushed_turns_survive_a_sigkill_and_the_open_turn_is_closed(tmp_path: Path) -> None:
    """A child process with 3 agents is SIGKILLed in each one's 3rd turn: every turn it
    reported done is stored, and loading closes each open turn as interrupted."""
    db = tmp_path / "s.db"
    child = start_worker(db, "turns", "3", "3")
    assert child.stdout is not None
    started: set[str] = set()
    done: set[str] = set()
    try:
        while len(started) < 3:
            line = await trio.to_thread.run_sync(child.stdout.readline)
            assert line, f"the worker exited: {child.stderr.read() if child.stderr else ''}"
            kind, agent_id, _ = line.split()
            (started if kind == "started" else done).add(f"{agent_id} {line.split()[2]}")
    finally:
        kill(child)
    assert done == {f"a{i} {n}" for i in range(3) for n in (1, 2)}
    async with running(SqliteStore(db)) as store:
        for i in range(3):
            session = await store.load(f"a{i}")
            records = session.records
            contents = [r.content for r in records if isinstance(r, UserMessage)]
            assert contents[:2] == [f"a{i} 1", f"a{i} 2"]
            assert len(contents) == 3
            ends = [r.stop_reason for r in records if isinstance(r, TurnEnded)]
            assert ends == [StopReason.COMPLETED, StopReason.COMPLETED, StopReason.INTERRUPTED]


# -- one writing process ---------------------------------------------------------------------------


async def test_a_second_process_is_refused_until_the_first_dies(tmp_path: Path) -> None:
    """While a worker process holds the database, applying a store on it fails naming the
    worker's pid; once the worker is SIGKILLed (no clean-up at all), it works."""
    db = tmp_path / "s.db"
    child = start_worker(db, "hold")
    try:
        assert child.stdout is not None
        assert await trio.to_thread.run_sync(child.stdout.readline) == "ready\n"
        with pytest.raises(SessionWriteError, match=rf"in use by process {child.pid} "):
            async with running(SqliteStore(db)):
                pass  # pragma: no cover
        # Readers are not writers: a read-only store lists beside the owner.
        async with running(SqliteStore(db, read_only=True)) as reader:
            assert await reader.list() == []
    finally:
        kill(child)
    async with running(SqliteStore(db)) as store:
        session = store.prepare("after")
        await store.enter(session)
        await store.flush(session)


async def test_two_store_objects_of_one_process_are_refused(tmp_path: Path) -> None:
    """Two live tables on one database would break one-live-session-per-id: refused."""
    async with running(SqliteStore(tmp_path / "s.db")):
        with pytest.raises(SessionWriteError, match="another store object of this process"):
            async with running(SqliteStore(tmp_path / "s.db")):
                pass  # pragma: no cover


# -- format ----------------------------------------------------------------------------------------


async def test_a_newer_format_version_is_refused_naming_the_file(tmp_path: Path) -> None:
    """user_version 2 is refused, writable or read-only, with the path and what to do."""
    db = tmp_path / "s.db"
    async with running(SqliteStore(db)):
        pass
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 2")
    for read_only in (False, True):
        with pytest.raises(
            SessionFormatError,
            match=rf"^session database {re.escape(str(db))} has format version 2, newer than "
            r"version 1 .*upgrade",
        ):
            async with running(SqliteStore(db, read_only=read_only)):
                pass  # pragma: no cover


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            b"not a database at all" * 100,
            r"is not an SQLite database \(file is not a database\); if it",
        ),
        (None, r"is an SQLite database of another application"),
    ],
    ids=["text", "foreign"],
)
async def test_a_file_that_is_not_a_session_database_is_refused(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    """A text file, or another application's SQLite database, is refused and left as it was."""
    db = tmp_path / "s.db"
    if content is None:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE theirs (x)")
    else:
        db.write_bytes(content)
    before = db.read_bytes()
    with pytest.raises(SessionFormatError, match=problem):
        async with running(SqliteStore(db)):
            pass  # pragma: no cover
    assert db.read_bytes() == before


async def test_an_empty_file_becomes_a_database_but_is_refused_read_only(tmp_path: Path) -> None:
    """A zero-byte file (``touch``) is an empty SQLite database: a writable store makes it a
    session database; a read-only one refuses it, creating nothing."""
    db = tmp_path / "s.db"
    db.touch()
    with pytest.raises(SessionFormatError, match=r"is an empty database, not a trio-agents"):
        async with running(SqliteStore(db, read_only=True)):
            pass  # pragma: no cover
    assert db.stat().st_size == 0
    async with running(SqliteStore(db)) as store:
        assert await store.list() == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA application_id").fetchone()[0] == io.APPLICATION_ID


async def test_a_directory_is_refused_and_nothing_is_created_beside_it(tmp_path: Path) -> None:
    """``sqlite:DIR`` is a mistake for ``DIR`` or ``sqlite:DIR/FILE``: the error says so."""
    (tmp_path / "d").mkdir()
    for read_only in (False, True):
        with pytest.raises(SessionWriteError, match=r"is a directory; give the SQLite store a"):
            async with running(SqliteStore(tmp_path / "d", read_only=read_only)):
                pass  # pragma: no cover
    assert os.listdir(tmp_path) == ["d"]


# -- damaged rows, read-only -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("UPDATE records SET line = '{\"type\": 5' WHERE seq = 1", r"seq 1 is not valid JSON"),
        ("UPDATE records SET line = CAST('{}' AS BLOB) WHERE seq = 1", r"seq 1: the record is not"),
        ("DELETE FROM records WHERE seq = 0", r"seq 1: expected the record with seq 0"),
        ("UPDATE records SET seq = 7 WHERE seq = 1", r"seq 7: expected the record with seq 1"),
        (
            "UPDATE records SET line = (SELECT line FROM records r WHERE r.seq = 0 AND "
            "r.session_id = records.session_id) WHERE seq = 1",
            r"seq 1: the record says seq 0",
        ),
    ],
    ids=["json", "blob", "gap", "jump", "stamp"],
)
async def test_a_damaged_row_is_listed_with_its_reason_and_refused_on_load(
    tmp_path: Path, damage: str, problem: str
) -> None:
    """The other sessions list and load as usual."""
    db = tmp_path / "s.db"
    async with running(SqliteStore(db)) as store:
        for session_id in ("good", "bad"):
            session = store.prepare(session_id)
            await store.enter(session)
            session.append(message(0))
            session.append(message(1))
            await store.detach(session)
    with sqlite3.connect(db) as conn:
        conn.execute(damage + " AND session_id = 'bad'")
    async with running(SqliteStore(db)) as store:
        infos = {i.id: i for i in await store.list()}
        assert infos["good"].records == 2
        assert infos["good"].damaged is None
        assert infos["bad"].records == 0
        assert infos["bad"].damaged is not None
        assert re.search(rf"session 'bad', {problem}", infos["bad"].damaged)
        with pytest.raises(SessionFormatError, match=rf"session 'bad', {problem}"):
            await store.load("bad")
        assert len((await store.load("good")).records) == 2


async def test_read_only_creates_nothing_and_refuses_writes(tmp_path: Path) -> None:
    """A read-only store on a missing file lists nothing and creates no file; on a database
    it lists and loads, and refuses enter and delete."""
    db = tmp_path / "s.db"
    async with running(SqliteStore(db, read_only=True)) as store:
        assert await store.list() == []
        assert not await store.is_stored("x")
    assert os.listdir(tmp_path) == []
    async with running(SqliteStore(db)) as store:
        session = store.prepare("x")
        await store.enter(session)
        session.append(message(0))
        await store.detach(session)
    async with running(SqliteStore(db, read_only=True)) as store:
        assert [i.id for i in await store.list()] == ["x"]
        loaded = await store.load("x")
        with pytest.raises(SessionWriteError, match="open read-only, so it cannot enter"):
            await store.enter(loaded)
        with pytest.raises(SessionWriteError, match="open read-only, so it cannot delete"):
            await store.delete("x")


# -- failed batches --------------------------------------------------------------------------------


async def test_a_refused_batch_is_written_again_by_the_next_flush(tmp_path: Path) -> None:
    """A trigger that aborts one session's inserts (a real refusal by the database) fails that
    session's flush only; once it is gone, the next flush writes every record exactly once."""
    db = tmp_path / "s.db"
    async with running(SqliteStore(db)) as store:
        doomed, fine = store.prepare("doomed"), store.prepare("fine")
        for session in (doomed, fine):
            await store.enter(session)
            await store.flush(session)
        with sqlite3.connect(db) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.session_id = 'doomed' "
                "BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
            )
        records = [doomed.append(message(0)), doomed.append(message(1))]
        fine.append(message(0))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.flush, fine)
            with pytest.raises(SessionWriteError, match=r"'doomed' .*disk says no.*seq 0 on"):
                await store.flush(doomed)
        assert fine.statistics().flushed_seq == 0
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TRIGGER refuse")
        records.append(doomed.append(message(2)))
        await store.flush(doomed)
        assert doomed.statistics().flushed_seq == 2
    assert stored_lines(db, "doomed") == [(r.seq, dump_record(r)) for r in records]


async def test_a_failed_commit_fails_every_session_of_its_batch_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """A violation found only at COMMIT (a deferred foreign key) fails the whole transaction:
    both sessions' flushes raise, the same error again on a retry; once the cause is gone the
    next flushes write every record exactly once."""
    db = tmp_path / "s.db"
    async with running(SqliteStore(db)) as store:
        doomed, fine = store.prepare("doomed"), store.prepare("fine")
        for session in (doomed, fine):
            await store.enter(session)
            await store.flush(session)
        with sqlite3.connect(db) as conn:
            conn.executescript(
                "CREATE TABLE poison (ref TEXT REFERENCES sessions (id) DEFERRABLE INITIALLY "
                "DEFERRED); CREATE TRIGGER poisoned AFTER INSERT ON records WHEN "
                "NEW.session_id = 'doomed' BEGIN INSERT INTO poison VALUES ('nowhere'); END;"
            )
        records = {s.id: [s.append(message(0))] for s in (doomed, fine)}
        errors: list[BaseException] = []

        async def flush(session: Session) -> None:
            try:
                await store.flush(session)
            except SessionWriteError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for session in (doomed, fine):
                nursery.start_soon(flush, session)
        assert sorted(re.findall(r"'(\w+)' to", " ".join(map(str, errors)))) == ["doomed", "fine"]
        assert all("FOREIGN KEY constraint failed" in str(e) for e in errors)
        with pytest.raises(SessionWriteError) as again:
            await store.flush(doomed)
        assert any(again.value is e for e in errors)
        with sqlite3.connect(db) as conn:
            conn.execute("DROP TRIGGER poisoned")
        for session in (doomed, fine):
            records[session.id].append(session.append(message(1)))
            await store.flush(session)
    for session_id, appended in records.items():
        assert stored_lines(db, session_id) == [(r.seq, dump_record(r)) for r in appended]


async def test_records_are_committed_without_a_flush_and_synced_by_the_next(
    tmp_path: Path,
) -> None:
    """Within ``flush_interval`` the writer commits an appended record in a write batch (no
    sync batch); the next flush makes it durable with one sync batch."""
    db = tmp_path / "s.db"
    async with running(SqliteStore(db, flush_interval=0.01)) as store:
        session = store.prepare("w")
        await store.enter(session)
        await store.flush(session)
        before = store.statistics()
        record = session.append(message(0))
        with trio.fail_after(30):
            # The database itself is what is observed (no event says a write batch ended).
            while not await trio.to_thread.run_sync(stored_lines, db, "w"):  # noqa: ASYNC110
                await trio.sleep(0.01)
        after = store.statistics()
        assert after.sync_batches == before.sync_batches
        assert after.write_batches > before.write_batches
        assert session.statistics().flushed_seq == -1
        await store.flush(session)
        assert session.statistics().flushed_seq == 0
        assert store.statistics().sync_batches == before.sync_batches + 1
    assert stored_lines(db, "w") == [(0, dump_record(record))]


def test_the_database_rules_in_one_transaction(tmp_path: Path) -> None:
    """The thread side alone: a new session replaces a stored one in the same transaction;
    a job refused by its savepoint does not stop the others."""
    db = io.open_database(tmp_path / "s.db", read_only=False)
    assert db is not None
    try:
        lines = [dump_record(TurnStarted(turn_id="t", seq=seq)) for seq in (0, 1)]
        assert db.write_batch([io.WriteJob("a", True, 0, lines, 1.0)], sync=True) == [None]
        results = db.write_batch(
            [io.WriteJob("a", True, 0, lines[:1], 2.0), io.WriteJob("ghost", False, 0, lines, 2.0)],
            sync=False,
        )
        assert results[0] is None
        assert isinstance(results[1], sqlite3.IntegrityError)  # no session row: refused
        assert [r.records for r in db.scan()] == [1]
        assert not db.exists("ghost")
    finally:
        db.close()
