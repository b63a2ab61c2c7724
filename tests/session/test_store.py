"""The sessions service, on both backends: lifecycle, duplicates, rollback, events, list."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.helpers.store_backends import BACKENDS, Factory
from trio_agents._base import InvalidTransitionError
from trio_agents.kernel import Context, open_root
from trio_agents.session import (
    InboxSpliced,
    MemoryStore,
    Session,
    SessionAppended,
    SessionClosedError,
    SessionCreated,
    SessionDisposed,
    SessionExistsError,
    SessionFlushed,
    SessionIdInUseError,
    SessionInUseError,
    SessionNotFoundError,
    SessionState,
    SessionStore,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from trio_agents.session._errors import SessionStoreClosedError


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    """A factory of stores of each backend on one set of data (tests/helpers/store_backends.py)."""
    return BACKENDS[request.param](request, tmp_path)


@asynccontextmanager
async def running(
    store: SessionStore, events: list[object] | None = None
) -> AsyncIterator[tuple[Context, SessionStore]]:
    async with open_root() as root:
        if events is not None:
            root.on(object, events.append)
        await root.plugin(store)
        service = root.get("sessions")
        assert service is store
        yield root, store


def state_of(session: Session) -> SessionState:
    """The state now (a call, so the type checker does not keep an earlier narrowing)."""
    return session.state


def session_events(events: list[object]) -> list[tuple[str, str]]:
    kinds = (SessionCreated, SessionAppended, SessionFlushed, SessionDisposed)
    return [(type(e).__name__, e.session_id) for e in events if isinstance(e, kinds)]


async def test_lifecycle_emits_created_appended_flushed_disposed(make_store: Factory) -> None:
    """prepare → enter → announce → append → flush → detach emits each event once, in order."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("a")
        session.append(TurnStarted(turn_id="t0"))  # private: no event
        await store.enter(session)
        store.announce(session)
        store.announce(session)  # repeat ignored
        record = session.append(TurnStarted(turn_id="t1"))
        await store.flush(session)
        await store.detach(session)
    assert session_events(events) == [
        ("SessionCreated", "a"),
        ("SessionAppended", "a"),
        ("SessionFlushed", "a"),
        ("SessionFlushed", "a"),  # the final flush of detach
        ("SessionDisposed", "a"),
    ]
    appended = next(e for e in events if isinstance(e, SessionAppended))
    assert appended.record == record
    flushed = next(e for e in events if isinstance(e, SessionFlushed))
    assert flushed.seq == 1


async def test_prepare_generates_ids_and_keeps_the_session_private(make_store: Factory) -> None:
    """prepare() without an id makes a fresh s-… id; the session is not live until entered."""
    async with running(make_store()) as (_, store):
        session = store.prepare()
        assert session.id.startswith("s-")
        assert len(session.id) == 14
        assert store.get(session.id) is None
        assert not session.statistics().live
        await store.enter(session)
        assert store.get(session.id) is session
        assert store.live() == (session,)
        assert session.statistics().live


async def test_enter_refuses_a_duplicate_live_id(make_store: Factory) -> None:
    """Of two prepared sessions with one id only the first enters; the loser rolls back."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        winner = store.prepare("dup")
        loser = store.prepare("dup")
        await store.enter(winner)
        store.announce(winner)
        with pytest.raises(SessionIdInUseError, match=r"^session id 'dup' is already live"):
            await store.enter(loser)
        await store.abandon(loser)
        assert store.get("dup") is winner
        winner.append(TurnStarted(turn_id="t"))
        await store.flush(winner)
        reloaded_ids = [info.id for info in await store.list()]
        assert reloaded_ids == ["dup"]
    assert session_events(events).count(("SessionDisposed", "dup")) == 1


async def test_enter_twice_is_refused(make_store: Factory) -> None:
    """Entering the same session again is an error, not a silent no-op."""
    async with running(make_store()) as (_, store):
        session = store.prepare("x")
        await store.enter(session)
        with pytest.raises(SessionIdInUseError, match=r"^session 'x' is already entered$"):
            await store.enter(session)


async def test_a_new_session_never_replaces_a_stored_one(make_store: Factory) -> None:
    """After detach the id is free for load(); a new session under it is refused."""
    async with running(make_store()) as (_, store):
        first = store.prepare("again")
        await store.enter(first)
        first.append(TurnStarted(turn_id="old"))
        await store.detach(first)
        assert await store.is_stored("again")
        second = store.prepare("again")
        with pytest.raises(SessionExistsError, match=r"^session 'again' is already stored"):
            await store.enter(second)
        loaded = await store.load("again")
        await store.enter(loaded)
        assert [r.turn_id for r in loaded.records if isinstance(r, TurnStarted)] == ["old"]
        await store.detach(loaded)


async def test_abandon_rolls_back_an_entered_new_session(make_store: Factory) -> None:
    """abandon() undoes enter and removes what was stored; no SessionCreated, no Disposed."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("gone")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        await store.flush(session)
        await store.abandon(session)
        await store.abandon(session)  # memoized
        assert store.get("gone") is None
        assert await store.list() == []
        with pytest.raises(SessionNotFoundError):
            await store.load("gone")
        with pytest.raises(SessionClosedError, match=r"^session 'gone' is detached"):
            session.append(TurnStarted(turn_id="u"))
        await store.enter(store.prepare("gone"))  # the id is free again
    assert ("SessionCreated", "gone") not in session_events(events)
    assert session_events(events).count(("SessionDisposed", "gone")) == 1  # the second one


async def test_abandon_after_announce_emits_disposed(make_store: Factory) -> None:
    """An announced session that is rolled back still pairs SessionCreated with Disposed."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("ann")
        await store.enter(session)
        store.announce(session)
        await store.abandon(session)
    assert session_events(events) == [("SessionCreated", "ann"), ("SessionDisposed", "ann")]


async def test_abandon_of_a_loaded_session_keeps_its_stored_records(make_store: Factory) -> None:
    """Rolling back a resume leaves the stored session as it was."""
    async with running(make_store()) as (_, store):
        session = store.prepare("old")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        session.append(TurnEnded(turn_id="t", stop_reason=StopReason.COMPLETED))
        await store.detach(session)
        loaded = await store.load("old")
        await store.enter(loaded)
        await store.abandon(loaded)
        again = await store.load("old")
        assert len(again.records) == 2


async def test_detach_is_memoized_and_refuses_later_appends(make_store: Factory) -> None:
    """Concurrent detaches join one; SessionDisposed is emitted once; appends then fail."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("d")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(store.detach, session)
        await store.detach(session)
        assert session.statistics().flushed_seq == 0
        assert not session.statistics().live
        with pytest.raises(SessionClosedError):
            session.append(TurnStarted(turn_id="u"))
        await store.flush(session)  # a detached session's flush is already done
    assert session_events(events).count(("SessionDisposed", "d")) == 1


async def test_load_repairs_an_interrupted_turn(make_store: Factory) -> None:
    """A turn without TurnEnded is closed with TurnEnded(interrupted) on load."""
    async with running(make_store()) as (_, store):
        session = store.prepare("crash")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t1"))
        session.append(TurnEnded(turn_id="t1", stop_reason=StopReason.COMPLETED))
        session.append(TurnStarted(turn_id="t2"))
        await store.detach(session)
        loaded = await store.load("crash")
        assert loaded.records[-1] == TurnEnded(
            turn_id="t2", stop_reason=StopReason.INTERRUPTED, seq=3
        )
        assert [r.seq for r in loaded.records] == [0, 1, 2, 3]
        await store.enter(loaded)
        await store.detach(loaded)
        assert len((await store.load("crash")).records) == 4  # the repair is durable


async def test_load_refuses_live_and_unknown_ids(make_store: Factory) -> None:
    """load() of a live id or an unknown one raises the matching error."""
    async with running(make_store()) as (_, store):
        session = store.prepare("live")
        await store.enter(session)
        with pytest.raises(SessionIdInUseError, match=r"^session id 'live' is already live"):
            await store.load("live")
        with pytest.raises(SessionNotFoundError, match=r"^no stored session has the id 'nope'"):
            await store.load("nope")
        with pytest.raises(KeyError):
            await store.load("nope")


async def test_delete_is_refused_while_live(make_store: Factory) -> None:
    """delete() refuses a live session, works once it is detached, then reports not found."""
    async with running(make_store()) as (_, store):
        session = store.prepare("del")
        await store.enter(session)
        with pytest.raises(SessionInUseError, match=r"^session 'del' is live; dispose the agent"):
            await store.delete("del")
        await store.detach(session)
        await store.delete("del")
        with pytest.raises(SessionNotFoundError):
            await store.delete("del")
        assert await store.list() == []


async def test_list_reports_stored_and_live_sessions(make_store: Factory) -> None:
    """list() gives id, record count, live flag and a title from the first user message."""
    async with running(make_store()) as (_, store):
        old = store.prepare("old")
        await store.enter(old)
        old.append(InboxSpliced(op="add", lane="next_turn", message_id="m0", content="queued"))
        old.append(TurnStarted(turn_id="t"))
        old.append(UserMessage(message_id="m0", content="x" * 100 + "\nmore", turn_id="t"))
        await store.detach(old)
        new = store.prepare("new")
        await store.enter(new)
        new.append(InboxSpliced(op="add", lane="next_turn", message_id="m1", content="hello"))
        infos = {info.id: info for info in await store.list()}
    assert set(infos) == {"old", "new"}
    assert (infos["old"].records, infos["old"].live) == (3, False)
    assert infos["old"].title == "x" * 59 + "…"
    assert (infos["new"].records, infos["new"].live, infos["new"].title) == (1, True, "hello")


async def test_closing_the_store_detaches_live_sessions_and_refuses_work(
    make_store: Factory,
) -> None:
    """Unloading the store flushes every live session and then refuses new work."""
    store = make_store()
    events: list[object] = []
    async with running(store, events) as (_, store):
        session = store.prepare("c")
        await store.enter(session)
        store.announce(session)
        session.append(TurnStarted(turn_id="t"))
    assert session.statistics() == type(session.statistics())(records=1, flushed_seq=0, live=False)
    assert ("SessionDisposed", "c") in session_events(events)
    assert not store.statistics().running
    with pytest.raises(SessionStoreClosedError, match=r"^the session store is not running"):
        store.prepare()
    async with running(store) as (_, again):  # a store object can be applied again
        assert len((await again.load("c")).records) == 2  # with the repair


async def test_store_must_be_applied_before_use() -> None:
    """A store that was never applied says how to start it."""
    with pytest.raises(SessionStoreClosedError, match=r"apply it first with 'await ctx.plugin"):
        MemoryStore().prepare()


async def test_sessions_of_another_store_are_refused(make_store: Factory) -> None:
    """A store only manages the sessions it prepared or loaded."""
    async with running(make_store()) as (_, store), running(MemoryStore()) as (_, other):
        session = other.prepare("x")
        with pytest.raises(ValueError, match=r"^session 'x' belongs to another store"):
            await store.enter(session)


@pytest.mark.listener_failures
async def test_a_failing_listener_cannot_break_append(make_store: Factory) -> None:
    """A SessionAppended listener that raises is contained; the record is kept."""
    async with running(make_store()) as (root, store):

        def boom(event: SessionAppended) -> None:
            raise RuntimeError("listener bug")

        root.on(SessionAppended, boom)
        session = store.prepare("l")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        assert len(session.records) == 1


async def test_unserializable_record_is_refused_and_not_kept(make_store: Factory) -> None:
    """A record the store cannot serialize is refused by append and leaves no trace."""
    from trio_agents.session import ToolCall

    async with running(make_store()) as (_, store):
        session = store.prepare("bad")
        await store.enter(session)
        call = ToolCall(turn_id="t", call_id="c", name="n", arguments={"x": {1, 2}})
        with pytest.raises(ValueError, match=r"^ToolCall \(seq 0\) holds a value JSON"):
            session.append(call)
        assert len(session.records) == 0
        assert session.append(TurnStarted(turn_id="t")).seq == 0
        await trio.testing.wait_all_tasks_blocked()


async def test_session_repr_follows_its_lifecycle(make_store: Factory) -> None:
    """A session reads private, then live, then ended, with its record count."""
    async with running(make_store()) as (_, store):
        session = store.prepare("r")
        session.append(TurnStarted(turn_id="t"))
        assert repr(session) == "<Session r private records=1>"
        await store.enter(session)
        assert repr(session) == "<Session r live records=1>"
        await store.detach(session)
        assert repr(session) == "<Session r ended records=1>"


async def test_the_session_state_follows_the_store_through_its_life(make_store: Factory) -> None:
    """private -> entering (only while the backend publishes) -> live -> ending -> ended, and
    a loaded session says it is resumed."""
    seen: list[SessionState] = []
    async with running(make_store()) as (_, store):
        session = store.prepare("life")
        assert (state_of(session), session.resumed) == (SessionState.PRIVATE, False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.enter, session)
            await trio.testing.wait_all_tasks_blocked()
            seen.append(state_of(session))
        assert seen in ([SessionState.ENTERING], [SessionState.LIVE])
        assert state_of(session) is SessionState.LIVE
        session.append(TurnStarted(turn_id="t"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.detach, session)
            await trio.testing.wait_all_tasks_blocked()
            assert state_of(session) in (SessionState.ENDING, SessionState.ENDED)
        assert state_of(session) is SessionState.ENDED
        loaded = await store.load("life")
        assert (state_of(loaded), loaded.resumed) == (SessionState.PRIVATE, True)
        assert loaded.statistics().flushed_seq == 0  # a stored history is durable
        await store.abandon(loaded)
        assert state_of(loaded) is SessionState.ENDED


async def test_an_illegal_move_of_a_session_raises_and_changes_nothing() -> None:
    """The transition table is the one check: ended is final, live cannot go back."""
    session = Session("alone")
    with pytest.raises(InvalidTransitionError, match="a session cannot go from 'private' to"):
        session.advance(SessionState.LIVE)
    assert state_of(session) is SessionState.PRIVATE
    session.advance(SessionState.ENDING)
    session.advance(SessionState.ENDED)
    with pytest.raises(InvalidTransitionError, match="none \\(final\\)"):
        session.advance(SessionState.PRIVATE)
    assert state_of(session) is SessionState.ENDED


async def test_a_cancelled_enter_still_enters_and_a_failed_one_leaves_it_private(
    make_store: Factory,
) -> None:
    """Cancel the caller of enter() at every checkpoint k: enter has no cancellable point once
    begun, so the session is live (and detaches cleanly). An enter that fails (a stored id)
    leaves the session private again, abandoned cleanly; the id is never left taken."""
    for k in range(8):
        async with running(make_store()) as (_, store):
            session = store.prepare(f"k{k}")
            session.append(TurnStarted(turn_id="t"))
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(store.enter, session)
                    for _ in range(k):
                        await trio.lowlevel.checkpoint()
                    scope.cancel()
            assert state_of(session) is SessionState.LIVE
            assert store.get(session.id) is session
            await store.detach(session)
            loaded = await store.load(session.id)  # kept, and its open turn closed
            assert [type(r) for r in loaded.records] == [TurnStarted, TurnEnded]
            await store.abandon(loaded)
            clash = store.prepare(f"k{k}")
            clash.append(TurnStarted(turn_id="u"))
            with pytest.raises(SessionExistsError, match=rf"^session 'k{k}' is already stored"):
                await store.enter(clash)
            assert state_of(clash) is SessionState.PRIVATE
            assert store.get(clash.id) is None
            await store.abandon(clash)  # a resumed-or-new rollback removes nothing stored
            assert len((await store.load(f"k{k}")).records) == 2
            again = store.prepare(f"k{k}-again")
            await store.enter(again)  # the store still works
            await store.detach(again)


async def test_a_session_cannot_be_ended_while_it_is_being_entered(make_store: Factory) -> None:
    """detach/abandon during enter() refuse with a message; the enter completes."""
    async with running(make_store()) as (_, store):
        session = store.prepare("busy")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.enter, session)
            await trio.lowlevel.checkpoint()  # the enter runs up to its backend step
            if session.state is SessionState.ENTERING:
                with pytest.raises(SessionInUseError, match="is being entered"):
                    await store.abandon(session)
                with pytest.raises(SessionIdInUseError, match="already live"):
                    await store.enter(store.prepare("busy"))
        assert session.state is SessionState.LIVE
        await store.detach(session)


async def test_a_store_object_serves_one_fiber_at_a_time(make_store: Factory) -> None:
    """Applying a running store again is refused with the fix; the first keeps working."""
    store = make_store()
    async with running(store) as (root, store):
        with pytest.raises(RuntimeError, match=r"^this \w+Store is already applied; a store"):
            await root.plugin(store)
        assert store.statistics().running
        await store.enter(store.prepare("still"))


async def test_an_ended_session_cannot_be_entered(make_store: Factory) -> None:
    """A session rolled back (or detached) stays out: enter() says to prepare a new one."""
    async with running(make_store()) as (_, store):
        session = store.prepare("ended")
        await store.abandon(session)
        with pytest.raises(
            SessionClosedError, match=r"^session 'ended' was abandoned or detached; prepare a new"
        ):
            await store.enter(session)
        assert store.get("ended") is None


async def test_announce_requires_an_entered_session(make_store: Factory) -> None:
    """A private session cannot be announced, and no SessionCreated is emitted."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("quiet")
        with pytest.raises(RuntimeError, match=r"^session 'quiet' is not live; enter\(\) it"):
            store.announce(session)
    assert session_events(events) == []


async def test_a_private_session_is_not_written_and_detaches_silently(
    make_store: Factory,
) -> None:
    """Flushing a private session does nothing; detaching it just closes it, with no events."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("private")
        session.append(TurnStarted(turn_id="t"))
        await store.flush(session)
        assert session.statistics().flushed_seq == -1
        await store.detach(session)
        assert session.statistics() == type(session.statistics())(
            records=1, flushed_seq=-1, live=False
        )
        with pytest.raises(SessionClosedError):
            session.append(TurnStarted(turn_id="u"))
        with pytest.raises(SessionNotFoundError):
            await store.load("private")
    assert session_events(events) == []


async def test_the_store_checks_what_it_is_given(make_store: Factory) -> None:
    """Anything but a Session is a TypeError."""
    async with running(make_store()) as (_, store):
        with pytest.raises(TypeError, match=r"^expected a Session; got str$"):
            await store.flush("s-1")  # type: ignore[arg-type]


async def test_titles_skip_blank_messages(make_store: Factory) -> None:
    """The title is the first user message with visible text."""
    async with running(make_store()) as (_, store):
        session = store.prepare("blank")
        await store.enter(session)
        session.append(TurnStarted(turn_id="t"))
        session.append(UserMessage(message_id="m0", content="  \n ", turn_id="t"))
        session.append(UserMessage(message_id="m1", content="\n  second\nthird", turn_id="t"))
        [live] = await store.list()
        await store.detach(session)
        [stored] = await store.list()
    assert live.title == stored.title == "second"


async def test_only_the_owner_can_detach_or_abandon_an_owned_session(make_store: Factory) -> None:
    """``enter(owner=x)``: a detach or an abandon without ``x`` (none, or another object) is
    refused and changes nothing; the owner's own detach ends it (issue 45: the store's owner
    check, pinned at the store)."""
    owner, stranger = object(), object()
    async with running(make_store()) as (_, store):
        session = store.prepare("owned")
        await store.enter(session, owner=owner)
        session.append(TurnStarted(turn_id="t1"))
        refused = r"^session 'owned' belongs to a live agent; dispose the agent's handle "
        for end in (store.detach, store.abandon):
            for who in (None, stranger):
                with pytest.raises(SessionInUseError, match=refused):
                    await end(session, owner=who)
                assert state_of(session) is SessionState.LIVE
                assert store.get("owned") is session
        session.append(TurnEnded(turn_id="t1", stop_reason=StopReason.COMPLETED))
        await store.detach(session, owner=owner)
        assert state_of(session) is SessionState.ENDED
        assert store.get("owned") is None
        assert [type(r) for r in (await store.load("owned")).records] == [TurnStarted, TurnEnded]


async def test_flush_nowait_flushes_a_memory_session_and_refuses_where_it_must_wait(
    make_store: Factory,
) -> None:
    """flush_nowait does what flush does when the backend stores records as they come
    (MemoryStore: flushed, SessionFlushed); a backend that writes raises WouldBlock and
    leaves the records unflushed for flush(); a private session has nothing to flush."""
    events: list[object] = []
    async with running(make_store(), events) as (_, store):
        session = store.prepare("a")
        session.append(TurnStarted(turn_id="t0"))
        store.flush_nowait(session)  # private: nothing to do
        await store.enter(session)
        session.append(TurnStarted(turn_id="t1"))
        if isinstance(store, MemoryStore):
            store.flush_nowait(session)
            assert session.statistics().flushed_seq == 1
            assert session_events(events) == [("SessionAppended", "a"), ("SessionFlushed", "a")]
        else:
            with pytest.raises(trio.WouldBlock):
                store.flush_nowait(session)
            assert session.statistics().flushed_seq < 1
            assert session_events(events) == [("SessionAppended", "a")]
            await store.flush(session)
            assert session.statistics().flushed_seq == 1
        await store.detach(session)
