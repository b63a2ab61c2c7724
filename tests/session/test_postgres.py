"""The PostgreSQL backend on a real server: leases, take-over, fencing, group commit, faults,
and worker processes racing, killed and paused (``pg_worker.py``).

The store contract itself runs here too, through ``store_backends.BACKENDS``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
import trio

from tests.helpers.paths import HELPERS
from tests.helpers.pg_workers import Worker, workers
from trio_agents.kernel import open_root
from trio_agents.session import (
    PostgresStore,
    SessionExistsError,
    SessionFormatError,
    SessionIdInUseError,
    SessionInUseError,
    SessionLeaseLostError,
    SessionWriteError,
    SessionWriteFailed,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
    dump_record,
    load_record,
)
from trio_agents.session._summary import title_of

WORKER = HELPERS / "pg_worker.py"

IN_USE = r"^session 's' is in use by another worker \("
LOST = r"^session 's' is no longer this worker's: another worker took its lease over"


@asynccontextmanager
async def running(store: PostgresStore, events: list[object] | None = None) -> AsyncIterator[Any]:
    async with open_root() as root:
        if events is not None:
            root.on(object, events.append)
        await root.plugin(store)
        yield store


def sql(dsn: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    """Run one statement on the test database; its rows (none for a statement without)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, args)
        return cur.fetchall() if cur.description is not None else []


async def db(dsn: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    return await trio.to_thread.run_sync(lambda: sql(dsn, query, *args))


async def expire(dsn: str, session_id: str) -> None:
    """Make the lease of ``session_id`` expired, as if its worker had stopped renewing it for
    longer than the lease lasts (the database's clock is the only one leases read)."""
    await db(
        dsn,
        "UPDATE trio_agents_sessions SET expires = clock_timestamp() - interval '1 second' "
        "WHERE id = %s",
        session_id,
    )


async def terminate_connections(dsn: str) -> None:
    """Make the server drop every other connection (a restart, as the store sees it)."""
    await db(
        dsn,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE pid <> pg_backend_pid() AND datname = current_database()",
    )


async def stored_rows(dsn: str, session_id: str) -> list[tuple[int, int, str]]:
    """``(seq, epoch, line)`` of every stored record of the session, in seq order."""
    rows = await db(
        dsn,
        "SELECT seq, epoch, line FROM trio_agents_records WHERE session_id = %s ORDER BY seq",
        session_id,
    )
    return [(int(seq), int(epoch), str(line)) for seq, epoch, line in rows]


async def lease_of(dsn: str, session_id: str) -> tuple[str | None, int]:
    rows = await db(dsn, "SELECT owner, epoch FROM trio_agents_sessions WHERE id = %s", session_id)
    return rows[0][0], int(rows[0][1])


def assert_not_interleaved(rows: list[tuple[int, int, str]]) -> None:
    """Seqs are contiguous from 0 and epochs never go back: each lease wrote one stretch."""
    assert [seq for seq, _, _ in rows] == list(range(len(rows)))
    epochs = [epoch for _, epoch, _ in rows]
    assert epochs == sorted(epochs)


def msg(content: str) -> UserMessage:
    return UserMessage(message_id=f"m-{content}", content=content, turn_id="t0")


def content_of(line: str) -> str:
    record = load_record(line)
    assert isinstance(record, UserMessage)
    return record.content


def store(dsn: str, **kwargs: Any) -> PostgresStore:
    # Renewal is slow unless a test wants it: a test expires leases itself.
    kwargs.setdefault("lease_seconds", 60.0)
    return PostgresStore(dsn, **kwargs)


# -- leases in one process -------------------------------------------------------------------


async def test_a_held_lease_refuses_a_second_store_until_released(pg_dsn: str) -> None:
    """While one store has the session live, another's enter is refused "in use by another
    worker"; once the first detaches (releasing the lease), the second resumes it."""
    async with running(store(pg_dsn)) as a, running(store(pg_dsn)) as b:
        session = a.prepare("s")
        session.append(msg("hello"))
        await a.enter(session)
        await a.flush(session)
        other = await b.load("s")
        with pytest.raises(SessionIdInUseError, match=IN_USE):
            await b.enter(other)
        with pytest.raises(SessionExistsError):
            await b.enter(b.prepare("s"))
        with pytest.raises(SessionInUseError, match=r"^session 's' is in use by another worker"):
            await b.delete("s")
        await a.detach(session)
        assert await lease_of(pg_dsn, "s") == (None, 1)
        again = await b.load("s")
        await b.enter(again)
        assert [type(r) for r in again.records] == [UserMessage]
        assert await lease_of(pg_dsn, "s") == (b.owner, 2)
        await b.detach(again)


async def test_an_expired_lease_is_taken_over_with_a_new_epoch(pg_dsn: str) -> None:
    """A lease that expired (its worker stopped renewing) is taken by the next worker to
    enter, and the take-over increments the epoch."""
    async with running(store(pg_dsn)) as a, running(store(pg_dsn)) as b:
        session = a.prepare("s")
        await a.enter(session)
        assert await lease_of(pg_dsn, "s") == (a.owner, 1)
        await expire(pg_dsn, "s")
        taken = await b.load("s")
        await b.enter(taken)
        assert await lease_of(pg_dsn, "s") == (b.owner, 2)


async def test_two_new_sessions_with_one_id_race_and_exactly_one_enters(pg_dsn: str) -> None:
    """Two stores entering a new session of one id at once: the database lets one create
    the row; the other sees it held and is refused."""
    outcomes: list[str] = []
    async with running(store(pg_dsn)) as a, running(store(pg_dsn)) as b:

        async def enter(s: PostgresStore) -> None:
            try:
                await s.enter(s.prepare("s"))
            except (SessionIdInUseError, SessionExistsError) as exc:
                outcomes.append(type(exc).__name__)
            else:
                outcomes.append(s.owner)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(enter, a)
            nursery.start_soon(enter, b)
        owner, _ = await lease_of(pg_dsn, "s")
        assert owner in outcomes
        assert len(outcomes) == 2
        assert {o for o in outcomes if o != owner} <= {"SessionIdInUseError", "SessionExistsError"}


async def test_a_release_that_fails_does_not_raise(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A detach whose lease release cannot reach the server still ends the session (the
    lease then expires by itself), and says so in the log."""
    async with running(store(pg_dsn, connections=1)) as s:
        session = s.prepare("s")
        await s.enter(session)
        await s.flush(session)
        await terminate_connections(pg_dsn)
        await s.detach(session)
        assert s.get("s") is None
        assert await lease_of(pg_dsn, "s") == (s.owner, 1)
    assert "releasing the lease of session 's' failed" in caplog.text


def test_without_psycopg_the_package_imports_and_the_store_names_the_extra() -> None:
    """psycopg is optional: the package imports without it, and making a PostgresStore says
    which extra to install."""
    script = textwrap.dedent(
        """
        import sys

        class NoPsycopg:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "psycopg":
                    raise ImportError("no psycopg here")

        sys.meta_path.insert(0, NoPsycopg())
        import trio_agents.session as s
        try:
            s.PostgresStore("postgresql://db/agents")
        except ImportError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout == (
        "PostgresStore needs psycopg 3; install the 'postgres' extra: "
        "pip install 'trio-agents[postgres]'\n"
    )


def test_the_store_names_its_server() -> None:
    """repr() and the properties say which server and lease, never the password."""
    s = PostgresStore("postgresql://u:secret@db.example:6543/agents", lease_seconds=7)
    assert repr(s) == "<PostgresStore PostgreSQL at db.example:6543 (database agents)>"
    assert s.lease_seconds == 7


async def test_a_loaded_session_written_elsewhere_since_is_refused(pg_dsn: str) -> None:
    """A session loaded here, then written by another worker, cannot be entered here: its
    records would fork; load it again."""
    async with running(store(pg_dsn)) as a, running(store(pg_dsn)) as b:
        stale = await b.load((await _stored(a, "s", 1)).id)
        fresh = await a.load("s")
        await a.enter(fresh)
        fresh.append(msg("more"))
        await a.detach(fresh)
        with pytest.raises(SessionIdInUseError, match=r"^session 's' was written by another"):
            await b.enter(stale)


async def _stored(s: PostgresStore, session_id: str, n: int) -> Any:
    session = s.prepare(session_id)
    for i in range(n):
        session.append(msg(f"m{i}"))
    await s.enter(session)
    await s.detach(session)
    return session


# -- fencing ----------------------------------------------------------------------------------


async def test_a_store_whose_lease_was_taken_over_cannot_write(pg_dsn: str) -> None:
    """After a take-over, the old owner's flushes raise SessionLeaseLostError (announced once
    as SessionWriteFailed), nothing it appends is stored, and the rows hold the old owner's
    stretch, then the new owner's, never interleaved."""
    events: list[object] = []
    async with running(store(pg_dsn), events) as a, running(store(pg_dsn)) as b:
        old = a.prepare("s")
        old.append(msg("a0"))
        await a.enter(old)
        old.append(msg("a1"))
        await a.flush(old)
        await expire(pg_dsn, "s")
        new = await b.load("s")
        await b.enter(new)
        new.append(msg("b0"))
        await b.flush(new)
        old.append(msg("a2"))
        with pytest.raises(SessionLeaseLostError, match=LOST):
            await a.flush(old)
        with pytest.raises(SessionLeaseLostError, match=LOST):
            await a.flush(old)
        new.append(msg("b1"))
        await b.flush(new)
        with pytest.raises(SessionWriteError, match=LOST):
            await a.detach(old)  # the final flush fails; the release does not
        assert await lease_of(pg_dsn, "s") == (b.owner, 2)
        await b.detach(new)
        rows = await stored_rows(pg_dsn, "s")
        assert_not_interleaved(rows)
        assert [(epoch, content_of(line)) for _, epoch, line in rows] == [
            (1, "a0"),
            (1, "a1"),
            (2, "b0"),
            (2, "b1"),
        ]
        failed = [e for e in events if isinstance(e, SessionWriteFailed)]
        assert len(failed) == 1
        assert isinstance(failed[0].error, SessionLeaseLostError)


async def test_renewal_notices_a_lost_lease_without_a_write(pg_dsn: str) -> None:
    """The renewal task finds a lease taken over (here by a write of the lease row) and
    reports it before the session writes anything."""
    lost = trio.Event()
    async with open_root() as root:
        root.on(SessionWriteFailed, lambda event: lost.set())
        a = store(pg_dsn, lease_seconds=5.0, renew_every=0.05)
        await root.plugin(a)
        session = a.prepare("s")
        await a.enter(session)
        await db(
            pg_dsn,
            "UPDATE trio_agents_sessions SET owner = 'elsewhere', epoch = epoch + 1 WHERE id = 's'",
        )
        with trio.fail_after(10):
            await lost.wait()
        with pytest.raises(SessionLeaseLostError, match=LOST):
            await a.flush(session)
        with pytest.raises(SessionLeaseLostError, match=LOST):
            await a.detach(session)


async def test_renewal_keeps_a_lease_past_its_first_expiry(pg_dsn: str) -> None:
    """A live session's lease is renewed: once its first expiry has passed (the test moves it
    into the past), the renewal takes it a full lease ahead again and another worker is still
    refused."""
    async with running(store(pg_dsn, lease_seconds=60.0, renew_every=0.1)) as a:
        session = a.prepare("s")
        await a.enter(session)
        await expire(pg_dsn, "s")
        renewed = "SELECT expires > clock_timestamp() + interval '30s' FROM trio_agents_sessions"
        with trio.fail_after(30):
            # The renewal sends no event: poll the row until it holds a lease again. Once it
            # does, the lease lasts 60 s, a margin no load on the machine can use up.
            while not (await db(pg_dsn, renewed))[0][0]:  # noqa: ASYNC110
                await trio.sleep(0.05)
        async with running(store(pg_dsn)) as b:
            with pytest.raises(SessionIdInUseError, match=IN_USE):
                await b.enter(await b.load("s"))


def test_a_worker_stopped_mid_transaction_does_not_block_a_take_over(pg_dsn: str) -> None:
    """A connection of the store that idles inside a transaction (its process was stopped
    there, holding the session row's lock) is ended by the server after the lease's length,
    so another worker's take-over waits for it, then succeeds."""
    from trio_agents.session import _postgres_sql as psql

    with psql.connect(pg_dsn, 60) as setup:
        psql.prepare_schema(setup)
        assert psql.take_lease(setup, "s", "w1", 60, new=True, records=0) == 1
        setup.execute("UPDATE trio_agents_sessions SET expires = clock_timestamp() - interval '1s'")
    with psql.connect(pg_dsn, 0.5) as stalled:
        stalled.execute("BEGIN")
        stalled.execute("SELECT 1 FROM trio_agents_sessions WHERE id = 's' FOR UPDATE")
        with psql.connect(pg_dsn, 60) as heir:
            heir.execute("SET lock_timeout = '20s'")  # without the server's cut: error, no hang
            assert psql.take_lease(heir, "s", "w2", 60, new=False, records=0) == 2
        with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
            stalled.execute("SELECT 1")  # the server ended it


# -- writes ----------------------------------------------------------------------------------


async def test_concurrent_flushes_share_commits(pg_dsn: str) -> None:
    """32 sessions flushing at once are written in a couple of transactions, not 32."""
    async with running(store(pg_dsn)) as s:
        sessions = [s.prepare(f"s{i}") for i in range(32)]
        for session in sessions:
            await s.enter(session)
        await trio.testing.wait_all_tasks_blocked()
        before = s.statistics().write_batches
        for session in sessions:
            session.append(msg("x"))
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(s.flush, session)
        assert s.statistics().write_batches - before <= 3
        for session in sessions:
            assert session.statistics().flushed_seq == 0
            assert len(await stored_rows(pg_dsn, session.id)) == 1


AWKWARD = ['"quoted"', "back\\slash", "{braces}, commas", "NULL", "", "ünïcode ✓ 𝄞", "line\nbreak"]


async def test_any_text_is_stored_exactly_in_one_batch(pg_dsn: str) -> None:
    """The batch's array parameters (sent in binary) carry quotes, backslashes, braces,
    commas, the word NULL, empty and non-ASCII text byte for byte; sessions with and without
    a title (``None`` in the array) share the batch."""
    async with running(store(pg_dsn)) as s:
        sessions = [s.prepare(f"s{i}") for i in range(len(AWKWARD) + 1)]
        for session in sessions:
            await s.enter(session)
        expected = {}
        for session, content in zip(sessions, AWKWARD, strict=False):
            expected[session.id] = [session.append(msg(content)), session.append(msg(content))]
        untitled = sessions[-1]
        expected[untitled.id] = [untitled.append(TurnStarted(turn_id="t"))]
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(s.flush, session)
        for session in sessions:
            rows = await stored_rows(pg_dsn, session.id)
            assert [line for _, _, line in rows] == [dump_record(r) for r in expected[session.id]]
        titles = dict(await db(pg_dsn, "SELECT id, title FROM trio_agents_sessions"))
        assert titles == {
            **{one.id: title_of([c]) for one, c in zip(sessions, AWKWARD, strict=False)},
            untitled.id: None,
        }


async def test_a_failed_commit_writes_nothing_and_the_next_flush_writes_it(pg_dsn: str) -> None:
    """A batch whose connection the server dropped raises SessionWriteError and stores
    nothing; the next flush reconnects and stores every record once."""
    async with running(store(pg_dsn, connections=1)) as s:
        session = s.prepare("s")
        await s.enter(session)
        session.append(msg("one"))
        await s.flush(session)
        await terminate_connections(pg_dsn)
        session.append(msg("two"))
        with pytest.raises(SessionWriteError, match=r"^writing session\(s\) to PostgreSQL"):
            await s.flush(session)
        assert len(await stored_rows(pg_dsn, "s")) == 1
        await s.flush(session)
        rows = await stored_rows(pg_dsn, "s")
        assert [content_of(line) for _, _, line in rows] == ["one", "two"]


async def test_an_interrupted_turn_is_closed_on_resume(pg_dsn: str) -> None:
    """A session stored mid-turn (its worker died) resumes with the turn closed as
    interrupted, and the closing record is stored once the session is entered."""
    async with running(store(pg_dsn)) as s:
        session = s.prepare("s")
        session.append(TurnStarted(turn_id="t1"))
        await s.enter(session)
        await s.flush(session)
        await expire(pg_dsn, "s")
        await db(pg_dsn, "UPDATE trio_agents_sessions SET owner = 'dead-worker' WHERE id = 's'")
    async with running(store(pg_dsn)) as s:
        resumed = await s.load("s")
        await s.enter(resumed)
        await s.detach(resumed)
    rows = await stored_rows(pg_dsn, "s")
    last = load_record(rows[-1][2])
    assert isinstance(last, TurnEnded)
    assert (last.turn_id, last.stop_reason) == ("t1", StopReason.INTERRUPTED)


async def test_list_shows_counts_and_titles(pg_dsn: str) -> None:
    """list() reads the session rows: record counts and titles of stored sessions."""
    async with running(store(pg_dsn)) as s:
        await _stored(s, "s", 2)
        (info,) = await s.list()
        assert (info.id, info.records, info.title, info.live) == ("s", 2, "m0", False)


# -- refusals ---------------------------------------------------------------------------------


async def test_a_newer_format_version_is_refused(pg_dsn: str) -> None:
    """A database written by a newer trio_agents is refused, naming both versions."""
    async with running(store(pg_dsn)):
        pass
    await db(pg_dsn, "UPDATE trio_agents_format SET version = 99")
    with pytest.raises(SessionFormatError, match=r"^the session database is format version 99"):
        async with running(store(pg_dsn)):
            pass  # pragma: no cover


async def test_a_damaged_record_is_refused_with_where_it_is(pg_dsn: str) -> None:
    """A stored line that is not a record makes load raise SessionFormatError naming it."""
    async with running(store(pg_dsn)) as s:
        await _stored(s, "s", 2)
        await db(pg_dsn, "UPDATE trio_agents_records SET line = '{' WHERE seq = 1")
        with pytest.raises(SessionFormatError, match=r"session 's' record 1"):
            await s.load("s")
        await db(pg_dsn, "DELETE FROM trio_agents_records WHERE seq = 1")
        with pytest.raises(SessionFormatError, match=r"^session 's' in the database is damaged"):
            await s.load("s")


async def test_an_unreachable_server_is_a_clear_error() -> None:
    """Applying a store whose server does not answer says where it tried and what to check."""
    with pytest.raises(ConnectionError, match=r"^cannot reach the session database, "):
        async with running(PostgresStore("postgresql://postgres@127.0.0.1:1/postgres")):
            pass  # pragma: no cover


def test_the_durations_are_checked() -> None:
    """Leases that would expire between renewals, and durations that are not durations, are
    refused when the store is made."""
    with pytest.raises(ValueError, match=r"^renew_every \(5\.0\) must be less than"):
        PostgresStore("", lease_seconds=5.0, renew_every=5.0)
    with pytest.raises(ValueError, match=r"^lease_seconds is a duration"):
        PostgresStore("", lease_seconds=float("nan"))
    with pytest.raises(ValueError, match=r"^flush_interval is a delay"):
        PostgresStore("", flush_interval=-1)
    with pytest.raises(ValueError, match=r"^connections must be at least 1"):
        PostgresStore("", connections=0)
    with pytest.raises(ValueError, match=r"^'nonsense' is not a PostgreSQL connection string"):
        PostgresStore("nonsense")


# -- worker processes -------------------------------------------------------------------------


async def _stored_for_workers(dsn: str) -> None:
    async with running(store(dsn)) as s:
        await _stored(s, "s", 1)


async def test_two_worker_processes_race_and_exactly_one_enters(pg_dsn: str) -> None:
    """Two processes told to resume one session at once: one enters, the other is refused
    "in use by another worker"."""
    await _stored_for_workers(pg_dsn)
    async with workers() as started:
        for _ in range(2):
            started.append(await Worker.start(WORKER, pg_dsn, "hold", 5.0))
        for worker in started:
            assert await worker.line() == "ready"
        for worker in started:
            await worker.send("go")
        answers = sorted([await w.line() for w in started])
        assert answers[0] == "entered"
        assert answers[1].startswith("refused ")
        assert "is in use by another worker" in answers[1]
        codes = [await w.end() for w in started]
        assert codes == [0, 0]


async def test_a_killed_workers_session_is_resumed_after_expiry_with_the_turn_closed(
    pg_dsn: str,
) -> None:
    """SIGKILL a worker mid-turn: its lease holds until it expires (another store is refused
    meanwhile), then another worker resumes the session with the turn closed as
    interrupted."""
    await _stored_for_workers(pg_dsn)
    async with workers() as started:
        victim = await Worker.start(WORKER, pg_dsn, "hold", 4.0)
        started.append(victim)
        assert await victim.line() == "ready"
        await victim.send("go")
        assert await victim.line() == "entered"
        assert await victim.line() == "turn"
        victim.process.kill()
        await victim.process.wait()
        async with running(store(pg_dsn)) as s:
            with pytest.raises(SessionIdInUseError, match=IN_USE):
                await s.enter(await s.load("s"))
        heir = await Worker.start(WORKER, pg_dsn, "takeover", 4.0)
        started.append(heir)
        assert await heir.line() == "ready"
        assert (await heir.line()).startswith("resumed ")
        rows = await stored_rows(pg_dsn, "s")
        assert_not_interleaved(rows)
        records = [load_record(line) for _, _, line in rows]
        (turn,) = [r for r in records if isinstance(r, TurnStarted)]
        closing = [r for r in records if isinstance(r, TurnEnded) and r.turn_id == turn.turn_id]
        assert [r.stop_reason for r in closing] == [StopReason.INTERRUPTED]
        owner, epoch = await lease_of(pg_dsn, "s")
        assert owner is not None
        assert owner.split(":")[1] == str(heir.process.pid)
        assert epoch == 3  # stored (1), the killed worker (2), the heir (3)
        assert await heir.end() == 0


async def test_a_paused_worker_past_expiry_cannot_write_after_it_resumes(pg_dsn: str) -> None:
    """SIGSTOP a worker past its lease; another takes the session over and writes; SIGCONT:
    the paused one's write is refused (it reports the lost lease, and its agent stops), the
    stored rows are the first worker's stretch then the second's, and the second keeps
    writing."""
    await _stored_for_workers(pg_dsn)
    async with workers() as started:
        paused = await Worker.start(WORKER, pg_dsn, "hold", 1.0)
        started.append(paused)
        assert await paused.line() == "ready"
        await paused.send("go")
        assert await paused.line() == "entered"
        assert await paused.line() == "turn"
        paused.process.send_signal(signal.SIGSTOP)
        heir = await Worker.start(WORKER, pg_dsn, "takeover", 1.0)
        started.append(heir)
        assert await heir.line() == "ready"
        assert (await heir.line()).startswith("resumed ")
        await heir.send("write")
        assert await heir.line() == "flushed"
        # The paused worker's lease was epoch 2 (the stored session 1, the heir 3).
        before = [row for row in await stored_rows(pg_dsn, "s") if row[1] == 2]
        paused.process.send_signal(signal.SIGCONT)
        await paused.send("write")
        seen: list[str] = []
        while not (seen and seen[-1].startswith("refused ")):
            seen.append(await paused.line())
        assert all(line.startswith(("lost ", "refused ")) for line in seen)
        # Refused by the store, or by the agent the lost lease stopped (whichever came first).
        assert all(
            "is no longer this worker's" in line or "takes no more messages" in line
            for line in seen
        )
        assert [row for row in await stored_rows(pg_dsn, "s") if row[1] == 2] == before
        await heir.send("write")
        assert await heir.line() == "flushed"
        rows = await stored_rows(pg_dsn, "s")
        assert_not_interleaved(rows)
        assert {epoch for _, epoch, _ in rows} == {1, 2, 3}
        assert await heir.end() == 0
        # The lost session's agent was disposed when the loss was known: the runtime ends
        # without it.
        assert await paused.end() == 0


async def test_an_agent_held_by_another_worker_is_refused_saying_so(pg_dsn: str) -> None:
    """Two runtimes on one database: the second cannot resume the first's live agent, and
    the refusal says another worker holds it (not "a live agent of yours"); once the first
    ends, the second resumes it."""
    from trio_agents import open_runtime
    from trio_agents.agent import AgentIdInUseError

    async with open_runtime(store=PostgresStore(pg_dsn)) as first:
        mine = first.agents
        handle = await mine.create(session_id="shared")
        await handle.agent.ask("hello")
        async with open_runtime(store=PostgresStore(pg_dsn)) as second:
            with pytest.raises(AgentIdInUseError) as caught:
                await second.agents.resume("shared")
            assert caught.value.elsewhere
            assert re.match(
                r"^agent id 'shared' cannot be used here: session 'shared' is in use by "
                r"another worker \(",
                str(caught.value),
            ), str(caught.value)
            with pytest.raises(AgentIdInUseError) as here:
                await mine.resume("shared")
            assert not here.value.elsewhere
            await handle.dispose()
            again = await second.agents.resume("shared")
            assert await again.agent.ask("again") == "again"
