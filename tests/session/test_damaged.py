"""Hostile and damaged session data (issue 18 items 3, 8, 9): what cannot be stored is refused
when appended; a bad file is listed as damaged without hiding the others; reading never
writes; a torn tail is repaired only on resume, its bytes kept in a side file; links are
never followed."""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.session_files import HEADER, good_line, write
from trio_agents.kernel import Context
from trio_agents.session import (
    InboxSpliced,
    InvalidSessionIdError,
    JsonlStore,
    MemoryStore,
    SessionExistsError,
    SessionFormatError,
    SessionIdInUseError,
    SessionState,
    SessionStore,
    SessionWriteError,
    TurnStarted,
    UserMessage,
    dump_record,
)
from trio_agents.session._errors import UnstorableRecordError


def state(path: Path) -> tuple[bytes, int, int, int]:
    """What "the file was not written" means, observably: bytes, size, mtime, inode."""
    info = path.lstat()
    return path.read_bytes(), info.st_size, info.st_mtime_ns, info.st_ino


def tree(directory: Path) -> dict[str, tuple[bytes, int, int, int] | None]:
    """The state of every entry of ``directory`` (``None`` for links and directories)."""
    return {
        p.name: state(p) if p.is_file() and not p.is_symlink() else None
        for p in sorted(directory.iterdir())
    }


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def chmod(path: Path, mode: int) -> None:
    path.chmod(mode)


@asynccontextmanager
async def runtime(store: SessionStore) -> AsyncIterator[Context]:
    async with ag.open_runtime(store=store) as root:
        yield root


def created_events(root: Context) -> list[ag.AgentCreated]:
    seen: list[ag.AgentCreated] = []
    root.on(ag.AgentCreated, seen.append)
    return seen


# -- item 3: text that cannot be stored is refused at append ------------------------------------


@pytest.mark.parametrize("make_store", [MemoryStore, JsonlStore], ids=["memory", "jsonl"])
async def test_a_lone_surrogate_in_a_prompt_is_refused_and_not_queued(
    make_store: Callable[..., SessionStore], tmp_path: Path
) -> None:
    """Every backend refuses the record when it is appended: nothing queued, nothing written,
    and the agent goes on taking prompts."""
    store = make_store(tmp_path) if make_store is JsonlStore else make_store()
    async with runtime(store) as root:
        handle = await root.agents.create(session_id="poisoned")
        agent = handle.agent
        before = agent.session.records
        with pytest.raises(UnstorableRecordError, match=r"lone surrogate U\+D800 at content"):
            agent.prompt("hi \ud800 there")
        with pytest.raises(UnstorableRecordError, match="lone surrogate"):
            agent.steer("\udcff")
        assert agent.queued() == ()
        assert agent.session.records == before
        agent.prompt("fine")
        await agent.when_idle()
        await handle.dispose()
    if isinstance(store, JsonlStore):
        text = (tmp_path / "poisoned.jsonl").read_bytes().decode("utf-8")  # strict: no surrogate
        assert "\\ud800" not in text
        assert '"content":"fine"' in text


async def test_a_session_append_of_a_surrogate_names_where_it_is(tmp_path: Path) -> None:
    """The error says which record, which field, and what to do."""
    async with runtime(JsonlStore(tmp_path)) as root:
        handle = await root.agents.create()
        session = handle.agent.session
        n = len(session.records)
        with pytest.raises(UnstorableRecordError) as caught:
            session.append(UserMessage(message_id="m", content="ok\udc80", turn_id="t"))
        assert f"UserMessage (seq {n})" in str(caught.value)
        assert "errors='replace'" in str(caught.value)
        assert len(session.records) == n
        await handle.dispose()


async def test_create_with_a_list_as_session_id_is_the_invalid_id_error(tmp_path: Path) -> None:
    """An id that is not a string is an invalid id (not a bare TypeError), for create and
    resume alike."""
    async with runtime(JsonlStore(tmp_path)) as root:
        bad: object = ["a"]
        with pytest.raises(InvalidSessionIdError, match=r"invalid session id \['a'\]"):
            await root.agents.create(session_id=bad)
        with pytest.raises(InvalidSessionIdError, match=r"invalid session id \['a'\]"):
            await root.agents.resume(bad)
        assert root.agents.list() == ()
    assert names(tmp_path) == []


# -- item 3 / 9: one bad file is listed as damaged, the others normally -------------------------

DAMAGED = [
    pytest.param(good_line().replace('"hello"', "NaN"), r":2 is not valid JSON: NaN", id="nan"),
    pytest.param(good_line().replace('"hello"', "1e999"), "too large for a float", id="infinity"),
    pytest.param("[" * 100_000 + "\n", r":2 is nested too deep", id="deep"),
    pytest.param('{"a":' * 150 + "1" + "}" * 150 + "\n", "nests deeper than 100", id="nested"),
    pytest.param(good_line().replace("hello", "\\ud800"), "a lone surrogate", id="surrogate"),
    pytest.param(
        good_line().encode().replace(b"hello", b"\xed\xa0\x80"), "is not UTF-8", id="utf8-surrogate"
    ),
    pytest.param(good_line().encode().replace(b"hello", b"\xff"), "is not UTF-8", id="bytes"),
    pytest.param(good_line().replace('"hello"', "5"), "expected a string, got int", id="type"),
    pytest.param('{"type":"user_message"}\n', "invalid session record", id="fields"),
]


@pytest.mark.parametrize(("line", "reason"), DAMAGED)
async def test_a_damaged_file_is_listed_with_its_reason_beside_the_others(
    tmp_path: Path, line: str | bytes, reason: str
) -> None:
    """The damaged line is followed by a good one (so it is corruption, not a torn tail)."""
    bad = line.encode() if isinstance(line, str) else line
    write(tmp_path / "bad.jsonl", (HEADER % "bad").encode() + bad + good_line(0).encode())
    write(tmp_path / "good.jsonl", HEADER % "good" + good_line())
    before = tree(tmp_path)
    async with runtime(JsonlStore(tmp_path)) as root:
        infos = {info.id: info for info in await root.sessions.list()}
        assert set(infos) == {"bad", "good"}
        assert infos["bad"].damaged is not None
        assert reason in infos["bad"].damaged
        assert "bad.jsonl" in infos["bad"].damaged
        assert (infos["bad"].records, infos["bad"].title) == (0, None)
        assert infos["bad"].updated is not None
        good = infos["good"]
        assert (good.damaged, good.records, good.title) == (None, 1, "hello")
        assert (await root.sessions.load("good")).records[0].seq == 0
        with pytest.raises(SessionFormatError, match=r"bad\.jsonl:2"):
            await root.sessions.load("bad")
    assert tree(tmp_path) == before


async def test_a_resume_of_a_damaged_session_publishes_nothing(tmp_path: Path) -> None:
    """No agent in the registry, no AgentCreated, the file untouched; the id stays usable
    for nothing else either (create refuses to replace it)."""
    write(tmp_path / "bad.jsonl", HEADER % "bad" + "[" * 5000 + "\n" + good_line())
    before = tree(tmp_path)
    async with runtime(JsonlStore(tmp_path)) as root:
        created = created_events(root)
        with pytest.raises(SessionFormatError, match="nested too deep"):
            await root.agents.resume("bad")
        assert root.agents.get("bad") is None
        assert root.agents.list() == ()
        assert created == []
        with pytest.raises(SessionExistsError):
            await root.agents.create(session_id="bad")
        assert root.agents.list() == ()
    assert tree(tmp_path) == before


async def test_list_validates_names_and_kinds_of_entries(tmp_path: Path) -> None:
    """What replaced "list summarizes without validating": counts and titles come from the
    validated records; names that are no session id are skipped; a directory, a FIFO or a
    file of junk named like a session is listed as damaged, saying why."""
    queued = InboxSpliced(op="add", lane="next_turn", message_id="q", content="queued only", seq=0)
    write(tmp_path / "queued.jsonl", HEADER % "queued" + dump_record(queued) + "\n")
    write(
        tmp_path / "claimed.jsonl",
        HEADER % "claimed" + dump_record(TurnStarted(turn_id="t", seq=0)) + "\n" + good_line(1),
    )
    write(tmp_path / "junk.jsonl", HEADER % "junk" + "not json\n" + good_line(0))
    write(tmp_path / ".hidden.jsonl", HEADER % ".hidden")
    write(tmp_path / "a b.jsonl", HEADER % "a b")
    write(tmp_path / "notes.txt", "not a session")
    (tmp_path / "dir.jsonl").mkdir()
    os.mkfifo(tmp_path / "fifo.jsonl")
    async with runtime(JsonlStore(tmp_path)) as root:
        infos = {info.id: info for info in await root.sessions.list()}
    assert set(infos) == {"claimed", "dir", "fifo", "junk", "queued"}
    assert (infos["claimed"].records, infos["claimed"].title) == (2, "hello")
    assert (infos["queued"].records, infos["queued"].title) == (1, "queued only")
    assert "is not a regular file" in (infos["dir"].damaged or "")
    assert "is not a regular file" in (infos["fifo"].damaged or "")
    assert "junk.jsonl:2 is not valid JSON" in (infos["junk"].damaged or "")


def refuse_opening(monkeypatch: pytest.MonkeyPatch, refused: Callable[[str], bool]) -> None:
    """``os.open`` of a path ``refused`` picks fails with EACCES, as a file of mode 000 does
    for anyone but root (CI runs as root, so chmod alone would prove nothing there)."""
    real_open = os.open

    def fake_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if refused(os.fspath(path)):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)


async def test_a_file_that_cannot_be_opened_is_listed_as_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replaces "list skips a file it cannot read": it is listed, with the OS's reason."""
    write(tmp_path / "locked.jsonl", HEADER % "locked")
    write(tmp_path / "fine.jsonl", HEADER % "fine" + good_line(0))
    async with runtime(JsonlStore(tmp_path)) as root:
        refuse_opening(monkeypatch, lambda path: path.endswith("locked.jsonl"))
        infos = {info.id: info for info in await root.sessions.list()}
        monkeypatch.undo()
    assert infos["locked"].damaged == "cannot be read (Permission denied)"
    assert (infos["fine"].damaged, infos["fine"].records) == (None, 1)


# -- item 8: reading never writes; repair happens on resume, with a side file ----------------------

TAILS = [
    pytest.param('{"type":"assistant_mess', "a torn last line", id="torn"),
    pytest.param("\x00\x00garbage\n", "a last line that cannot be read", id="garbage"),
    pytest.param(
        good_line(1).replace('"hello"', '"hel\x01lo"')[:-5] + "\n",
        "a last line that cannot be read",
        id="flipped",
    ),
]


@pytest.mark.parametrize(("tail", "reason"), TAILS)
async def test_a_tail_is_left_out_by_reading_and_repaired_by_resume(
    tmp_path: Path, tail: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Replaces "torn tail is truncated on load" and "unparsable last line is truncated":
    load and list leave the file as it is (bytes, size, mtime, inode) and warn; resume
    removes the tail, keeps exactly the removed bytes in <id>.jsonl.damaged-1, and says so."""
    path = tmp_path / "s.jsonl"
    kept = HEADER % "s" + good_line(0)
    write(path, kept + tail)
    before = state(path)
    caplog.set_level(logging.WARNING, logger="trio_agents")
    async with runtime(JsonlStore(tmp_path)) as root:
        (info,) = await root.sessions.list()
        assert (info.records, info.damaged) == (1, None)
        session = await root.sessions.load("s")
        assert [r.seq for r in session.records] == [0]
        assert state(path) == before
        assert any(
            reason in r.getMessage() and "is left out" in r.getMessage() for r in caplog.records
        )
        caplog.clear()
        handle = await root.agents.resume("s")
        await root.sessions.flush(handle.agent.session)
        side = tmp_path / "s.jsonl.damaged-1"
        assert side.read_bytes() == tail.encode()
        assert path.read_text().startswith(kept)
        assert tail not in path.read_text()
        (warning,) = [r for r in caplog.records if "removed" in r.getMessage()]
        assert warning.levelno == logging.WARNING
        assert f"kept in {side}" in warning.getMessage()
        assert reason in warning.getMessage()
        await handle.dispose()
    assert names(tmp_path) == ["s.jsonl", "s.jsonl.damaged-1"]


async def test_a_second_repair_keeps_the_first_side_file(tmp_path: Path) -> None:
    """Side files are numbered; none is ever overwritten."""
    path = tmp_path / "s.jsonl"
    write(path, HEADER % "s" + good_line(0) + "first torn")
    write(tmp_path / "s.jsonl.damaged-1", "older")
    async with runtime(JsonlStore(tmp_path)) as root:
        handle = await root.agents.resume("s")
        await root.sessions.flush(handle.agent.session)
        await handle.dispose()
    assert (tmp_path / "s.jsonl.damaged-1").read_text() == "older"
    assert (tmp_path / "s.jsonl.damaged-2").read_text() == "first torn"


@pytest.mark.parametrize(
    ("content", "side"),
    [
        pytest.param('{"format":"trio-ag', '{"format":"trio-ag', id="torn-header"),
        pytest.param("", None, id="empty"),
    ],
)
async def test_a_torn_header_loads_empty_and_is_rewritten_only_on_resume(
    tmp_path: Path, content: str, side: str | None
) -> None:
    """Replaces "a torn header is reset" and "an empty file loads as an empty session":
    loading changes nothing; resume writes a fresh header (keeping a torn one's bytes)."""
    path = tmp_path / "th.jsonl"
    write(path, content)
    before = state(path)
    async with runtime(JsonlStore(tmp_path)) as root:
        assert (await root.sessions.load("th")).records == ()
        assert state(path) == before
        handle = await root.agents.resume("th")
        await root.sessions.flush(handle.agent.session)
        await handle.dispose()
    assert path.read_text().startswith(HEADER % "th")
    kept = tmp_path / "th.jsonl.damaged-1"
    assert (kept.read_text() if kept.exists() else None) == side


async def test_a_file_that_grew_since_it_was_read_is_not_truncated(tmp_path: Path) -> None:
    """A resume refuses to enter when the file is not the size it was read at (another
    process wrote it since); the file keeps every byte."""
    path = tmp_path / "s.jsonl"
    write(path, HEADER % "s" + good_line(0) + "torn")
    async with runtime(JsonlStore(tmp_path)) as root:
        session = await root.sessions.load("s")
        with path.open("ab") as f:  # another writer appended meanwhile
            f.write(b" and more")
        with pytest.raises(
            SessionIdInUseError,
            match=r"^session 's' was written by another process since this one read it; load ",
        ):
            await root.sessions.enter(session)
        assert session.state is SessionState.PRIVATE
        await root.sessions.abandon(session)
    assert path.read_text() == HEADER % "s" + good_line(0) + "torn and more"
    assert not (tmp_path / "s.jsonl.damaged-1").exists()


# -- item 8: links are never followed ---------------------------------------------------------


async def test_a_symlinked_session_file_is_refused_and_nothing_outside_is_written(
    tmp_path: Path,
) -> None:
    """The red-team case: a link to an empty file outside the store. It is listed as
    damaged; load, resume and create refuse it; the target stays empty."""
    root_dir, outside = tmp_path / "store", tmp_path / "outside"
    root_dir.mkdir()
    outside.mkdir()
    (outside / "empty").touch()
    write(outside / "valid.jsonl", HEADER % "valid" + good_line())
    (root_dir / "empty.jsonl").symlink_to(outside / "empty")
    (root_dir / "valid.jsonl").symlink_to(outside / "valid.jsonl")
    before = tree(outside)
    async with runtime(JsonlStore(root_dir)) as root:
        infos = {info.id: info for info in await root.sessions.list()}
        assert set(infos) == {"empty", "valid"}
        for info in infos.values():
            assert "is a symbolic link" in (info.damaged or "")
            assert "does not follow links" in (info.damaged or "")
        for session_id in ("empty", "valid"):
            with pytest.raises(SessionFormatError, match="is a symbolic link"):
                await root.sessions.load(session_id)
            with pytest.raises(SessionFormatError, match="is a symbolic link"):
                await root.agents.resume(session_id)
            with pytest.raises(SessionExistsError):
                await root.agents.create(session_id=session_id)
        assert root.agents.list() == ()
    assert tree(outside) == before
    assert all(p.is_symlink() for p in root_dir.iterdir())


async def test_a_symlinked_subdirectory_is_ignored_or_refused(tmp_path: Path) -> None:
    """A link to a directory: under a session's name it is damaged (a link), under any other
    name it is not a session; nothing is read or written through either."""
    root_dir, outside = tmp_path / "store", tmp_path / "outside"
    root_dir.mkdir()
    outside.mkdir()
    write(outside / "inner.jsonl", HEADER % "inner" + good_line())
    (root_dir / "sub").symlink_to(outside)
    (root_dir / "linked.jsonl").symlink_to(outside)
    before = tree(outside)
    async with runtime(JsonlStore(root_dir)) as root:
        (info,) = await root.sessions.list()
        assert info.id == "linked"
        assert "is a symbolic link" in (info.damaged or "")
        with pytest.raises(SessionFormatError, match="is a symbolic link"):
            await root.agents.resume("linked")
        handle = await root.agents.create(session_id="sub")  # an ordinary new session
        handle.agent.prompt("x")
        await handle.agent.when_idle()
        await handle.dispose()
    assert tree(outside) == before
    assert (root_dir / "sub.jsonl").is_file()


# -- item 8: a read-only store --------------------------------------------------------------------


async def test_a_read_only_store_lists_and_loads_without_writing(tmp_path: Path) -> None:
    """JsonlStore(read_only=True) on a directory of mode 555, holding a session with a torn
    tail and one with an open turn (which a load closes in memory). As root, chmod does not
    stop writes, so "never opened for writing" is checked by the files' state: bytes, size,
    mtime and inode unchanged, no entry added or removed."""
    write(tmp_path / "torn.jsonl", HEADER % "torn" + good_line(0) + '{"type":"tu')
    write(
        tmp_path / "open.jsonl",
        HEADER % "open" + dump_record(TurnStarted(turn_id="t", seq=0)) + "\n",
    )
    before = tree(tmp_path)
    chmod(tmp_path, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        store = JsonlStore(tmp_path, read_only=True)
        async with runtime(store) as root:
            infos = {info.id: info.records for info in await root.sessions.list()}
            assert infos == {"open": 1, "torn": 1}
            opened = await root.sessions.load("open")
            assert [type(r).__name__ for r in opened.records] == ["TurnStarted", "TurnEnded"]
            with pytest.raises(SessionWriteError, match="open read-only, so it cannot enter"):
                await root.sessions.enter(opened)
            with pytest.raises(SessionWriteError, match="cannot delete"):
                await root.sessions.delete("torn")
            await root.sessions.load("torn")
        assert tree(tmp_path) == before
    finally:
        chmod(tmp_path, 0o755)


async def test_a_read_only_store_creates_no_directory(tmp_path: Path) -> None:
    """Listing a store that does not exist yet is empty and creates nothing."""
    async with runtime(JsonlStore(tmp_path / "nowhere", read_only=True)) as root:
        assert await root.sessions.list() == []
    assert names(tmp_path) == []


async def test_a_writable_store_on_a_read_only_directory_fails_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Applying the store probes the directory: the error names it and the fix."""
    refuse_opening(monkeypatch, lambda path: ".write-probe-" in path)
    with pytest.raises(
        SessionWriteError,
        match=rf"^the session directory {re.escape(str(tmp_path))} is not writable \(Permission "
        r"denied\); sessions could not be saved — free space or fix the permissions",
    ):
        async with runtime(JsonlStore(tmp_path)):
            pass  # pragma: no cover - the store does not start
    monkeypatch.undo()
    assert names(tmp_path) == []


async def test_a_store_path_that_is_a_file_says_so(tmp_path: Path) -> None:
    """Both modes: "... is a file, not a directory", not "File exists"."""
    write(tmp_path / "plain", "x")
    for read_only in (False, True):
        with pytest.raises(NotADirectoryError, match="is a file, not a directory"):
            async with runtime(JsonlStore(tmp_path / "plain", read_only=read_only)):
                pass  # pragma: no cover - the store does not start
    await trio.lowlevel.checkpoint()
