"""Child sessions under their parent on every backend: the parent in the listing, the tree,
and a delete that takes the sessions under a session with it (issue 37, item 2)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import psycopg
import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.children_support import FAMILY, store_a_family
from tests.helpers.store_backends import BACKENDS, Factory
from trio_agents.kernel import open_root
from trio_agents.model import ScriptedModel
from trio_agents.session import (
    AgentConfigured,
    JsonlStore,
    PostgresStore,
    SessionIdInUseError,
    SessionInfo,
    SessionInUseError,
    SessionNotFoundError,
    SessionStore,
    SessionTree,
    SqliteStore,
    dump_record,
)


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """A factory of stores of each backend on one set of data (tests/helpers/store_backends.py)."""
    return BACKENDS[request.param](request, tmp_path)


@asynccontextmanager
async def opened(store: SessionStore) -> AsyncIterator[SessionStore]:
    async with open_root() as root:
        await root.plugin(store)
        yield store


def parents(infos: list[SessionInfo]) -> dict[str, str | None]:
    return {info.id: info.parent_id for info in infos}


def assert_children_first(deleted: tuple[str, ...]) -> None:
    """``deleted`` is p's whole family, each session before its parent, p last."""
    assert sorted(deleted) == ["c1", "c2", "g", "p"]
    assert deleted[-1] == "p"
    assert deleted.index("g") < deleted.index("c1")


async def test_every_backend_lists_each_session_with_its_parent(make_store: Factory) -> None:
    """After the runtime is gone, a store opened again says whose child each session is."""
    await store_a_family(make_store())
    async with opened(make_store()) as store:
        infos = await store.list()
    assert parents(infos) == FAMILY


async def test_a_live_child_lists_its_parent(make_store: Factory) -> None:
    """A live session's summary knows its parent too (read from its records)."""
    async with ag.open_runtime(store=make_store(), model=ScriptedModel.echo()) as root:
        parent = (await root.agents.create(session_id="p")).agent
        await root.agents.create(session_id="c", parent=parent)
        infos = await root.get("sessions").list()
    assert parents(infos) == {"p": None, "c": "p"}
    assert all(info.live for info in infos)


async def test_the_tree_puts_children_under_their_parent(make_store: Factory) -> None:
    """Top-level: the parent and the unrelated session; under p: c1 (with g) and c2."""
    await store_a_family(make_store())
    async with opened(make_store()) as store:
        tree = SessionTree.of(await store.list())
    assert {info.id for info in tree.roots} == {"p", "s"}
    walked = [(depth, info.id) for depth, info in tree.walk("p")]
    assert sorted(walked) == [(1, "c1"), (1, "c2"), (2, "g")]
    assert walked.index((2, "g")) == walked.index((1, "c1")) + 1


async def test_deleting_a_parent_deletes_its_children_and_grandchildren(
    make_store: Factory,
) -> None:
    """delete(p) removes p, c1, g and c2, each child before its parent; s stays."""
    await store_a_family(make_store())
    async with opened(make_store()) as store:
        deleted = await store.delete("p")
        left = [info.id for info in await store.list()]
    assert_children_first(deleted)
    assert left == ["s"]
    async with opened(make_store()) as store:
        assert [info.id for info in await store.list()] == ["s"]
        for gone in deleted:
            assert not await store.is_stored(gone)


async def test_deleting_a_child_keeps_its_parent_and_siblings(make_store: Factory) -> None:
    """delete(c1) takes g with it, and nothing above or beside it."""
    await store_a_family(make_store())
    async with opened(make_store()) as store:
        assert await store.delete("c1") == ("g", "c1")
        assert parents(await store.list()) == {"p": None, "c2": "p", "s": None}


async def test_a_live_grandchild_refuses_the_whole_delete(make_store: Factory) -> None:
    """While g is live, delete(p) deletes nothing and names g; once g detaches it works."""
    await store_a_family(make_store())
    async with opened(make_store()) as store:
        g = await store.load("g")
        await store.enter(g)
        with pytest.raises(
            SessionInUseError,
            match=r"^session 'g', under 'p', is live; dispose the agent that uses it, then "
            r"delete 'p'$",
        ):
            await store.delete("p")
        assert len(await store.list()) == 5
        await store.detach(g)
        assert_children_first(await store.delete("p"))


async def test_a_delete_of_an_unknown_id_deletes_nothing(make_store: Factory) -> None:
    """An id that is not stored is SessionNotFoundError, as before, and touches no session."""
    await store_a_family(make_store())
    async with opened(make_store()) as store:
        with pytest.raises(SessionNotFoundError, match=r"^no stored session has the id 'x'"):
            await store.delete("x")
        assert len(await store.list()) == 5


def test_a_cycle_of_parents_still_lists_every_session_once() -> None:
    """Ids reused after deletes can make parents a cycle: its first session is top-level."""

    def info(session_id: str, parent_id: str | None) -> SessionInfo:
        return SessionInfo(
            id=session_id, records=0, updated=None, live=False, title=None, parent_id=parent_id
        )

    tree = SessionTree.of(
        [info("a", None), info("x", "y"), info("y", "x"), info("o", "gone"), info("k", "a")]
    )
    assert [(d, i.id) for d, i in tree.walk()] == [
        (0, "a"),
        (1, "k"),
        (0, "x"),
        (1, "y"),
        (0, "o"),
    ]
    assert [info.id for info in tree.children("a")] == ["k"]
    assert [info.id for info in tree.children("x")] == ["y"]
    assert tree.children("y") == tree.children("nothing") == ()
    assert tree.subtree("x") == ("y", "x")
    assert tree.subtree("a") == ("k", "a")
    assert tree.subtree("nothing") == ("nothing",)


async def test_a_session_whose_agent_configured_names_no_parent_is_top_level(
    make_store: Factory,
) -> None:
    """Sessions written without any AgentConfigured (or with parent_id None) are top-level."""
    async with opened(make_store()) as store:
        bare = store.prepare("bare")
        await store.enter(bare)
        plain = store.prepare("plain")
        plain.append(AgentConfigured())
        await store.enter(plain)
        await store.detach(bare)
        await store.detach(plain)
        tree = SessionTree.of(await store.list())
    assert sorted(info.id for info in tree.roots) == ["bare", "plain"]


async def test_a_child_live_in_another_jsonl_store_refuses_the_whole_delete(
    tmp_path: Path,
) -> None:
    """Every lock is taken before any file goes: c1 live elsewhere (its lock held by another
    store object) stops delete(p) before it removes anything, g (deleted before c1) too."""
    await store_a_family(JsonlStore(tmp_path))
    async with opened(JsonlStore(tmp_path)) as holder, opened(JsonlStore(tmp_path)) as store:
        c1 = await holder.load("c1")
        await holder.enter(c1)
        with pytest.raises(
            SessionInUseError,
            match=r"^session 'c1', under 'p', is live in another store object of this process; "
            r"end it there, then delete 'p'$",
        ):
            await store.delete("p")
        assert parents(await store.list()) == FAMILY
        locks = await trio.to_thread.run_sync(lambda: sorted(tmp_path.glob("*.lock")))
        assert [lock.name for lock in locks] == ["c1.jsonl.lock"]
        await holder.detach(c1)
        assert_children_first(await store.delete("p"))


async def test_a_child_live_in_another_postgres_worker_refuses_the_whole_delete(
    pg_dsn: str,
) -> None:
    """The database takes the tree and its row locks in the delete's one transaction: c1 held
    by another worker stops it, and nothing is deleted (not even g, under c1)."""
    await store_a_family(PostgresStore(pg_dsn))
    async with opened(PostgresStore(pg_dsn)) as holder, opened(PostgresStore(pg_dsn)) as store:
        c1 = await holder.load("c1")
        await holder.enter(c1)
        with pytest.raises(
            SessionInUseError,
            match=r"^session 'c1', under 'p', is in use by another worker \([^)]+\); end it "
            r"there, then delete 'p'$",
        ):
            await store.delete("p")
        assert parents(await store.list()) == FAMILY
        await holder.detach(c1)
        assert_children_first(await store.delete("p"))
        assert parents(await store.list()) == {"s": None}


#: The session table as format version 1 first made it, before ``parent_id``.
OLD_POSTGRES_SCHEMA = """
CREATE TABLE trio_agents_format (version integer NOT NULL);
INSERT INTO trio_agents_format (version) VALUES (1);
CREATE TABLE trio_agents_sessions (
    id text PRIMARY KEY, records integer NOT NULL DEFAULT 0, owner text,
    epoch bigint NOT NULL DEFAULT 0, expires timestamptz,
    updated timestamptz NOT NULL DEFAULT now(), title text, cwd text
);
CREATE TABLE trio_agents_records (
    session_id text NOT NULL REFERENCES trio_agents_sessions (id) ON DELETE CASCADE,
    seq integer NOT NULL, epoch bigint NOT NULL, line text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
"""


async def test_a_postgres_database_made_before_parents_learns_them_from_its_records(
    pg_dsn: str,
) -> None:
    """Applying the store adds ``parent_id`` to an older table and fills it from each
    session's latest AgentConfigured; the sessions read as before."""

    def old_database() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(OLD_POSTGRES_SCHEMA)
            sessions = {
                "p": [AgentConfigured()],
                "c": [AgentConfigured(parent_id="x"), AgentConfigured(parent_id="p")],
                "bare": [],
            }
            for session_id, records in sessions.items():
                conn.execute(
                    "INSERT INTO trio_agents_sessions (id, records, epoch) VALUES (%s, %s, 1)",
                    (session_id, len(records)),
                )
                for seq, record in enumerate(records):
                    conn.execute(
                        "INSERT INTO trio_agents_records VALUES (%s, %s, 1, %s)",
                        (session_id, seq, dump_record(attrs.evolve(record, seq=seq))),
                    )

    await trio.to_thread.run_sync(old_database)
    async with opened(PostgresStore(pg_dsn)) as store:
        assert parents(await store.list()) == {"p": None, "c": "p", "bare": None}
        assert len((await store.load("c")).records) == 2
        assert await store.delete("p") == ("c", "p")
    async with opened(PostgresStore(pg_dsn)) as store:
        assert parents(await store.list()) == {"bare": None}


async def test_the_latest_agent_configured_names_the_parent_for_list_and_delete(
    make_store: Factory,
) -> None:
    """A session re-configured without a parent is top-level, one re-configured under p is
    p's child: the listing and the delete agree, on every backend."""
    async with opened(make_store()) as store:
        for session_id, configured in {
            "p": [AgentConfigured()],
            "left": [AgentConfigured(parent_id="p"), AgentConfigured()],
            "taken": [AgentConfigured(), AgentConfigured(parent_id="p")],
        }.items():
            session = store.prepare(session_id)
            for record in configured:
                session.append(record)
            await store.enter(session)
            await store.detach(session)
    async with opened(make_store()) as store:
        assert parents(await store.list()) == {"p": None, "left": None, "taken": "p"}
        assert await store.delete("p") == ("taken", "p")
        assert parents(await store.list()) == {"left": None}


async def test_a_torn_last_agent_configured_does_not_count_for_a_jsonl_delete(
    tmp_path: Path,
) -> None:
    """A JSONL file whose last line (a newer AgentConfigured) is torn: the listing leaves it
    out, and the delete reads the parent the same way."""
    async with opened(JsonlStore(tmp_path)) as store:
        for session_id, parent in (("p", None), ("q", None), ("c", "p")):
            session = store.prepare(session_id)
            session.append(AgentConfigured(parent_id=parent))
            await store.enter(session)
            await store.detach(session)
    # Whole but without its newline: a write cut short; load leaves such a line out.
    torn = dump_record(AgentConfigured(parent_id="q", seq=1))
    with (tmp_path / "c.jsonl").open("a") as file:
        file.write(torn)
    async with opened(JsonlStore(tmp_path)) as store:
        assert parents(await store.list()) == {"p": None, "q": None, "c": "p"}
        assert await store.delete("q") == ("q",)
        assert await store.delete("p") == ("c", "p")


async def test_a_child_entered_and_not_written_yet_refuses_the_delete(tmp_path: Path) -> None:
    """A child whose records wait for the writer (SQLite, a long flush interval) is found
    through its live session: delete(p) is refused, nothing is deleted."""
    async with opened(SqliteStore(tmp_path / "s.db", flush_interval=3600)) as store:
        parent = store.prepare("p")
        await store.enter(parent)
        await store.detach(parent)
        child = store.prepare("c")
        child.append(AgentConfigured(parent_id="p"))
        await store.enter(child)
        assert not await store.is_stored("c")
        with pytest.raises(
            SessionInUseError,
            match=r"^session 'c', under 'p', is live; dispose the agent that uses it, then "
            r"delete 'p'$",
        ):
            await store.delete("p")
        assert await store.is_stored("p")
        await store.detach(child)
        assert await store.delete("p") == ("c", "p")


async def test_a_delete_takes_a_damaged_child_and_leaves_a_link(tmp_path: Path) -> None:
    """A damaged session is listed top-level (its parent unknown to a listing); a delete of
    p reads its AgentConfigured line alone, so takes it with p. A link named like a session
    is never read, so names no parent."""
    async with opened(JsonlStore(tmp_path)) as store:
        for session_id in ("p", "c"):
            session = store.prepare(session_id)
            session.append(AgentConfigured(parent_id=None if session_id == "p" else "p"))
            await store.enter(session)
            await store.detach(session)
    path = tmp_path / "c.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    # Damaged in the middle (a damaged last line would be a torn write, left out).
    path.write_text(lines[0] + lines[1].replace('"parent_id":"p"', '"parent_id":"p"]') + lines[1])
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "p.jsonl")
    async with opened(JsonlStore(tmp_path)) as store:
        infos = await store.list()
        assert {info.id: (info.parent_id, info.damaged is not None) for info in infos} == {
            "p": (None, False),
            "c": (None, True),
            "link": (None, True),
        }
        assert await store.delete("p") == ("c", "p")
        assert [info.id for info in await store.list()] == ["link"]


async def test_sessions_being_deleted_can_be_neither_loaded_nor_deleted_again(
    pg_dsn: str,
) -> None:
    """While delete(p) waits for a row lock another connection holds, loading g (under p) is
    refused, and so is a second delete(p); once the lock goes, the delete ends."""
    await store_a_family(PostgresStore(pg_dsn))

    def waiting_for_a_lock() -> bool:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE 'WITH RECURSIVE tree%'"
            ).fetchone()
        return row is not None and row[0] > 0

    async with opened(PostgresStore(pg_dsn)) as store, trio.open_nursery() as nursery:
        with psycopg.connect(pg_dsn) as blocker:
            blocker.execute("SELECT 1 FROM trio_agents_sessions WHERE id = 'g' FOR UPDATE")
            deleted: list[tuple[str, ...]] = []

            async def delete() -> None:
                deleted.append(await store.delete("p"))

            nursery.start_soon(delete)
            with trio.fail_after(10):
                # The delete waits in a worker thread, on the server: no event says so; poll.
                while not await trio.to_thread.run_sync(waiting_for_a_lock):  # noqa: ASYNC110
                    await trio.sleep(0.01)
            with pytest.raises(
                SessionIdInUseError,
                match=r"^session 'g' is being deleted; wait for the delete to end$",
            ):
                await store.load("g")
            with pytest.raises(SessionInUseError, match=r"^session 'p' is being deleted already$"):
                await store.delete("p")
            blocker.commit()
        with trio.fail_after(10):
            while not deleted:  # noqa: ASYNC110
                await trio.sleep(0.01)
    assert_children_first(deleted[0])
