"""One writing process per JSONL session: the lock beside the session file, what it refuses
and what it never blocks (reading), its take-over after a SIGKILL, and the repair of a file
two writers corrupted before the lock existed (issue 34, item 1)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.cli_support import run_cli
from tests.helpers.support import TRIO_AGENTS
from trio_agents.kernel import open_root
from trio_agents.session import (
    JsonlStore,
    SessionFormatError,
    SessionIdInUseError,
    SessionInUseError,
    SessionRepair,
    UserMessage,
    dump_record,
)

HEADER = '{"format":"trio-agents-session","version":1,"session_id":"%s"}\n'
# Safety net only: every wait below ends on an event (a byte on a pipe, a process exit).
LIMIT = 60


def line(seq: int, content: str = "hello") -> str:
    return (
        dump_record(UserMessage(message_id=f"m{seq}", content=content, turn_id="t", seq=seq)) + "\n"
    )


# -- in one process: two store objects on one directory ----------------------------------------


async def test_a_second_store_object_cannot_enter_a_live_session(tmp_path: Path) -> None:
    """The lock is per open file, so another store object of this process is refused too,
    naming itself; once the first detaches, the session is free."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as first:
        held = (await first.agents.create(session_id="s")).agent
        held.prompt("kept")
        await held.when_idle()
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as second:
            with pytest.raises(
                ag.AgentIdInUseError,
                match=r"^agent id 's' cannot be used here: session 's' is in use by another "
                r"store object of this process, which writes it \(one process writes a "
                r"session at a time; its lock is .*s\.jsonl\.lock\); end it there",
            ):
                await second.agents.resume("s")
            fresh = second.sessions.prepare("s2")
            await second.sessions.enter(fresh)  # another id is not held
            await second.sessions.detach(fresh)
        await first.sessions.flush(held.session)
    assert not (tmp_path / "s.jsonl.lock").exists()  # released, and removed
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as again:
        resumed = (await again.agents.resume("s")).agent
        assert [r.content for r in resumed.session.records if isinstance(r, UserMessage)] == [
            "kept"
        ]


async def test_a_new_session_live_elsewhere_and_not_yet_written_is_refused(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Creating a session whose id another store object has live but has not written yet (its
    writer waits ``flush_interval``): the id is not stored, and the lock refuses it."""
    first, second = JsonlStore(tmp_path, flush_interval=60), JsonlStore(tmp_path)
    async with open_root() as one, open_root() as two:
        await one.plugin(first)
        await two.plugin(second)
        held = first.prepare("n")
        await first.enter(held)
        assert not (tmp_path / "n.jsonl").exists()
        clash = second.prepare("n")
        with pytest.raises(SessionIdInUseError, match=r"^session 'n' is in use by another store"):
            await second.enter(clash)
        await second.abandon(clash)
        await first.detach(held)
        again = second.prepare("n2")
        await second.enter(again)
        await second.detach(again)


async def test_reading_a_live_session_needs_no_lock(tmp_path: Path) -> None:
    """``list`` and ``load`` of a session another store holds work at once; ``delete`` and
    ``repair`` are refused, naming the holder."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as first:
        held = (await first.agents.create(session_id="s")).agent
        held.prompt("kept")
        await held.when_idle()
        await first.sessions.flush(held.session)
        reader = JsonlStore(tmp_path, read_only=True)
        async with ag.open_runtime(store=reader) as second:
            assert [i.id for i in await second.sessions.list()] == ["s"]
            assert len((await second.sessions.load("s")).records) == len(held.session.records)
        async with ag.open_runtime(store=JsonlStore(tmp_path)) as third:
            store = third.sessions
            assert isinstance(store, JsonlStore)
            holder = "another store object of this process"
            with pytest.raises(SessionInUseError, match=rf"^session 's' is live in {holder}; end"):
                await store.delete("s")
            with pytest.raises(SessionInUseError, match=rf"^session 's' is live in {holder}; end"):
                await store.repair("s")
    assert (tmp_path / "s.jsonl").exists()


async def test_a_new_session_whose_id_another_process_stored_meanwhile_is_refused(
    tmp_path: Path,
) -> None:
    """Between the store's check of the id and its lock, another process may have written the
    file: the lock is taken, the file seen, and the new session refused (not replacing it)."""
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        session = root.sessions.prepare("s")
        real = JsonlStore.is_stored

        async def not_yet(store: JsonlStore, session_id: str) -> bool:
            stored = await real(store, session_id)
            (tmp_path / "s.jsonl").write_text(HEADER % "s" + line(0, "theirs"))
            return stored

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(JsonlStore, "is_stored", not_yet)
            with pytest.raises(
                SessionIdInUseError,
                match=r"^session 's' was written by another process since this one checked "
                r"its id; resume it instead$",
            ):
                await root.sessions.enter(session)
        await root.sessions.abandon(session)
    assert (tmp_path / "s.jsonl").read_text() == HEADER % "s" + line(0, "theirs")
    assert not (tmp_path / "s.jsonl.lock").exists()


# -- repair --------------------------------------------------------------------------------------


def corrupt(path: Path) -> str:
    """A file as two writers leave it: seq 0..2, then seq 1 again. Returns the bad part."""
    bad = line(1, "second writer") + line(2, "second writer")
    path.write_text(HEADER % "s" + line(0) + line(1) + line(2) + bad)
    return bad


async def test_repair_keeps_the_longest_valid_start_and_moves_the_rest_aside(
    tmp_path: Path,
) -> None:
    """The corrupt file is refused on load, naming the repair command; the repair keeps seq
    0..2, puts the rest byte for byte in the side file, and says so; a second repair finds
    nothing to do."""
    bad = corrupt(tmp_path / "s.jsonl")
    async with ag.open_runtime(store=JsonlStore(tmp_path)) as root:
        store = root.sessions
        assert isinstance(store, JsonlStore)
        with pytest.raises(
            SessionFormatError,
            match=r"^.*s\.jsonl:5: expected the record with seq 3, found seq 1; the file is "
            r"corrupt: 'trio-agents sessions repair s' keeps its valid start and moves the "
            r"rest to a side file$",
        ):
            await store.load("s")
        done = await store.repair("s")
        side = tmp_path / "s.jsonl.damaged-1"
        assert done == SessionRepair(
            "s",
            3,
            len(bad),
            side,
            f"from line 5 on: {tmp_path / 's.jsonl'}:5: expected the "
            "record with seq 3, found seq 1",
        )
        assert str(done).startswith(f"session 's' keeps its first 3 records; the {len(bad)} ")
        assert side.read_text() == bad
        assert len((await store.load("s")).records) == 3
        assert await store.repair("s") is None


def test_sessions_repair_on_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``trio-agents sessions repair ID``: one line of what it did, then ``show`` works."""
    corrupt(tmp_path / "s.jsonl")
    status, out, err = run_cli(capsys, "sessions", "show", "s", "--store", str(tmp_path))
    assert (status, out) == (1, "")
    assert re.fullmatch(
        r"trio-agents: error: .*s\.jsonl:5: expected .*; the file is corrupt: 'trio-agents "
        r"sessions repair s' keeps .*\n",
        err,
    )
    status, out, err = run_cli(capsys, "sessions", "repair", "s", "--store", str(tmp_path))
    assert (status, err) == (0, "")
    assert re.fullmatch(
        r"repaired: session 's' keeps its first 3 records; the \d+ bytes after it are in "
        r".*s\.jsonl\.damaged-1 \(what was wrong: from line 5 on: .*\)\n",
        out,
    )
    status, out, err = run_cli(capsys, "sessions", "show", "s", "--store", str(tmp_path))
    assert (status, out.count("user: hello"), err) == (0, 3, "")
    status, out, err = run_cli(capsys, "sessions", "repair", "s", "--store", "memory")
    assert (status, out) == (1, "")
    assert re.fullmatch(r"trio-agents: error: 'sessions repair' repairs the files of a .*\n", err)


# -- two real processes ------------------------------------------------------------------------


@contextmanager
def holding(store: Path, session_id: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``trio-agents run`` on ``session_id``, stopped mid-answer: it is streaming its
    first word when this yields (so its session is live and locked). Killed at the end."""
    words = " ".join(f"w{i}" for i in range(40))
    process = subprocess.Popen(
        [
            str(TRIO_AGENTS),
            "run",
            "--store",
            str(store),
            "--session",
            session_id,
            "--model",
            "echo?delay=1.5",
            words,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        assert process.stdout is not None
        assert process.stdout.read(2) == b"w0"  # the turn runs: the session is entered
        yield process
    finally:
        process.kill()
        process.wait(LIMIT)
        assert process.stdout is not None
        process.stdout.close()


def run_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=LIMIT,
    )


def test_a_second_run_on_a_live_session_is_refused_and_the_file_stays_whole(
    tmp_path: Path,
) -> None:
    """The issue's reproduction: ``run --session dup`` twice at once. The second exits 1 with
    one line naming the first's pid and host; reading works meanwhile; the file loads."""
    store = tmp_path / "dup"
    with holding(store, "dup") as first:
        second = run_command(
            "run", "--store", str(store), "--session", "dup", "--model", "echo", "second process"
        )
        assert (second.returncode, second.stdout) == (1, "")
        assert re.fullmatch(
            rf"trio-agents: error: agent id 'dup' cannot be used here: session 'dup' is in use "
            rf"by process {first.pid} on {re.escape(socket.gethostname())}, which writes it "
            rf"\(.*\); end it there, or resume it once that process has stopped\n",
            second.stderr,
        ), second.stderr
        listed = run_command("sessions", "list", "--store", str(store))
        assert listed.returncode == 0, listed.stderr
        assert "dup" in listed.stdout
        first.send_signal(signal.SIGTERM)
        first.wait(LIMIT)
    shown = run_command("sessions", "show", "dup", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert "second process" not in shown.stdout


def test_a_sigkilled_holder_is_taken_over_at_once(tmp_path: Path) -> None:
    """The kernel drops the lock of a killed process: the next ``run`` resumes the session
    straight away (its interrupted turn closed), with no stale lock to clear."""
    store = tmp_path / "s"
    with holding(store, "k") as first:
        first.kill()
        first.wait(LIMIT)
        assert (store / "k.jsonl.lock").exists()  # left behind, but not held
        again = run_command(
            "run", "--store", str(store), "--session", "k", "--model", "echo", "taken over"
        )
        assert (again.returncode, again.stdout) == (0, "taken over\n"), again.stderr
    shown = run_command("sessions", "show", "k", "--store", str(store))
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"interrupted.*\n(.*\n)*user: taken over\nagent: taken over\n", shown.stdout)


def test_acp_session_load_of_a_session_live_in_another_acp_is_refused(tmp_path: Path) -> None:
    """Two editor windows: ``trio-agents acp`` twice on one store. The second's
    ``session/list`` shows the first's session at once; its ``session/load`` is a JSON-RPC
    error naming the first process; the first keeps serving the session."""
    acp = pytest.importorskip("acp")
    from acp import RequestError, text_block

    class Client:
        async def request_permission(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("no tool runs here")

        async def session_update(self, *args: object, **kwargs: object) -> None:
            pass

    def spawn(store: Path) -> Any:
        return acp.spawn_agent_process(
            Client(),
            str(TRIO_AGENTS),
            "acp",
            "--store",
            str(store),
            transport_kwargs={"stderr": None},
            env=dict(os.environ),
        )

    async def main() -> None:
        store = tmp_path / "sessions"
        async with spawn(store) as (first, first_process):
            await first.initialize(protocol_version=1)
            session = await first.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            answer = await first.prompt(session_id=sid, prompt=[text_block("first window")])
            assert answer.stop_reason == "end_turn"
            async with spawn(store) as (second, _):
                await second.initialize(protocol_version=1)
                listed = await second.list_sessions(cwd=str(tmp_path))
                assert [s.session_id for s in listed.sessions] == [sid]
                with pytest.raises(RequestError) as refused:
                    await second.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
                assert re.fullmatch(
                    rf"session '{sid}' is live in another worker; it cannot be loaded \(agent "
                    rf"id '{sid}' cannot be used here: session '{sid}' is in use by process "
                    rf"{first_process.pid} on {re.escape(socket.gethostname())}, which writes "
                    rf"it .*\)",
                    str(refused.value),
                ), refused.value
            again = await first.prompt(session_id=sid, prompt=[text_block("still mine")])
            assert again.stop_reason == "end_turn"

    asyncio.run(asyncio.wait_for(main(), LIMIT))
