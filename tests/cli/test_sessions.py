"""``sessions list|show`` and the store checks of ``run`` against damaged, long, read-only and
failing stores (issue 18 items 7, 8, 9), run in this process with captured output."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import stat
from collections.abc import AsyncGenerator
from contextlib import aclosing
from datetime import datetime
from pathlib import Path

import pytest
import trio

from tests.helpers.cli_support import run_cli, use_model
from trio_agents.cli import main
from trio_agents.cli._sessions import SHOWN
from trio_agents.model import ModelRequest, ScriptedModel
from trio_agents.model._stream import ModelEvent
from trio_agents.session import TurnEnded, TurnStarted, UserMessage, dump_record, load_record

pytestmark = pytest.mark.usefixtures("cli_environment")

HEADER = '{"format":"trio-agents-session","version":1,"session_id":"%s"}\n'
ON_LINUX_PROC = Path("/proc/self").is_dir()


def _session(store: Path, session_id: str, content: str, *, tail: str = "") -> Path:
    """A stored session of one completed turn whose prompt is ``content``."""
    records = [
        TurnStarted(turn_id="t", seq=0),
        UserMessage(message_id="m", content=content, turn_id="t", seq=1),
        TurnEnded(turn_id="t", stop_reason="completed", seq=2),  # type: ignore[arg-type]
    ]
    path = store / f"{session_id}.jsonl"
    path.write_text(HEADER % session_id + "".join(dump_record(r) + "\n" for r in records) + tail)
    return path


def _state(path: Path) -> tuple[bytes, int, int]:
    info = path.stat()
    return path.read_bytes(), info.st_mtime_ns, info.st_ino


def _tree(directory: Path) -> dict[str, tuple[bytes, int, int]]:
    return {p.name: _state(p) for p in sorted(directory.iterdir())}


# -- list ------------------------------------------------------------------------------------------


def test_list_shows_a_damaged_session_as_a_row_with_its_reason(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """The other sessions are listed as usual; show of another session works; show of the
    damaged one is one line naming the problem."""
    _session(store, "good", "a fine prompt")
    (store / "bad.jsonl").write_text(HEADER % "bad" + "[" * 50_000 + "\n" + "{}\n")
    status, out, err = run_cli(capsys, "sessions", "list", "--store", str(store))
    assert (status, err) == (0, "")
    bad = next(line for line in out.splitlines() if " bad " in f" {line} ")
    assert re.search(r"bad\W+-\W+\d{4}-\d\d-\d\d \d\d:\d\d\W+damaged: .*nested too deep", bad)
    assert re.search(r"good\W+3\W+\d{4}-\d\d-\d\d \d\d:\d\d\W+a fine prompt", out), out
    status, out, err = run_cli(capsys, "sessions", "show", "good", "--store", str(store))
    assert (status, out.splitlines()[0], err) == (0, "user: a fine prompt", "")
    status, out, err = run_cli(capsys, "sessions", "show", "bad", "--store", str(store))
    assert (status, out) == (1, "")
    assert re.fullmatch(r"trio-agents: error: .*bad\.jsonl:2 is nested too deep.*\n", err), err


def test_list_json_is_one_object_per_session(
    capsys: pytest.CaptureFixture[str], store: Path, tmp_path: Path
) -> None:
    """id, title, cwd, parent_id, records, updated (ISO 8601, UTC), damaged; nothing else on
    stdout."""
    os.chdir(tmp_path)
    assert main(["run", "a [title]", "--session", "one", "--store", str(store)]) == 0
    (store / "bad.jsonl").write_text(HEADER % "bad" + "NaN\n{}\n")
    capsys.readouterr()
    status, out, err = run_cli(capsys, "sessions", "list", "--json", "--store", str(store))
    assert (status, err) == (0, "")
    listed = [json.loads(line) for line in out.splitlines()]
    assert [set(item) for item in listed] == [
        {"id", "title", "cwd", "parent_id", "records", "updated", "damaged"}
    ] * 2
    bad, one = listed
    assert (one["id"], one["title"], one["cwd"], one["damaged"]) == (
        "one",
        "a [title]",
        str(tmp_path),
        None,
    )
    assert one["records"] > 3
    assert datetime.fromisoformat(one["updated"]).utcoffset() is not None
    assert (bad["id"], bad["title"], bad["records"]) == ("bad", None, 0)
    assert one["parent_id"] is bad["parent_id"] is None
    assert "bad.jsonl:2 is not valid JSON: NaN" in bad["damaged"]


def test_list_json_of_an_empty_store_prints_nothing(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    assert run_cli(capsys, "sessions", "list", "--json", "--store", str(store)) == (0, "", "")


# -- show: long messages ---------------------------------------------------------------------------


def test_show_shortens_a_long_message_with_a_note(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """The first SHOWN characters, then how many more and how to see them."""
    text = "word " * 2_000 + "END"
    _session(store, "long", text)
    status, out, _ = run_cli(capsys, "sessions", "show", "long", "--store", str(store))
    assert status == 0
    assert "END" not in out
    more = len(text) - SHOWN
    assert f"… {more:,} more characters; --full to see all\n" in out
    assert len(out) < SHOWN + 200
    shown = out.split("… ")[0].removeprefix("user: ").replace("\n", "")
    assert shown.replace(" ", "") == text[:SHOWN].replace(" ", "")


def test_show_full_prints_a_long_message_whole(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """--full: the text as stored, markup-like brackets included, and no note."""
    text = "[bold]x[/bold] " * 1_000 + "END"
    _session(store, "long", text)
    status, out, _ = run_cli(capsys, "sessions", "show", "long", "--full", "--store", str(store))
    assert status == 0
    assert f"user: {text}\n" in out
    assert "more characters" not in out
    assert out.endswith("turn t: completed\n")


def test_show_json_prints_the_records_as_stored(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """--json: one JSON line per record, the stored form (load_record reads each back)."""
    text = "x" * (SHOWN * 3)
    path = _session(store, "long", text)
    status, out, _ = run_cli(capsys, "sessions", "show", "long", "--json", "--store", str(store))
    assert status == 0
    assert out.splitlines() == path.read_text().splitlines()[1:]
    assert load_record(out.splitlines()[1]) == UserMessage(
        message_id="m", content=text, turn_id="t", seq=1
    )


def test_show_of_a_4_mb_message_prints_a_bounded_amount(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """What is laid out does not grow with the message (the renderer was quadratic in it)."""
    _session(store, "big", "lorem ipsum " * 350_000)
    status, out, _ = run_cli(capsys, "sessions", "show", "big", "--store", str(store))
    assert status == 0
    assert len(out) < SHOWN + 200
    assert "… 4,198,000 more characters; --full to see all" in out


# -- reading never writes ------------------------------------------------------------------------


def test_show_and_list_of_a_torn_session_write_nothing_and_warn(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """The store is opened read-only: the torn tail stays (bytes, mtime, inode unchanged),
    and the warning says resume will repair it."""
    path = _session(store, "torn", "hello", tail='{"type":"assistant_mes')
    before = _tree(store)
    status, out, err = run_cli(capsys, "sessions", "show", "torn", "--store", str(store))
    assert status == 0
    assert out.splitlines()[0] == "user: hello"
    assert re.fullmatch(
        r"trio-agents: warning: session 'torn': a torn last line .* is left out; resuming the "
        r"session removes it and keeps a copy beside the file\n",
        err,
    ), err
    assert run_cli(capsys, "sessions", "list", "--store", str(store))[0] == 0
    assert _tree(store) == before
    assert path.read_text().endswith('{"type":"assistant_mes')


def test_list_and_show_work_on_a_read_only_directory(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """Mode 555. As root chmod does not stop writes, so that the commands never wrote is
    checked by the directory's state (entries, bytes, mtimes, inodes) too."""
    _session(store, "kept", "hello", tail="a torn line")  # what a writing reader would cut
    before = _tree(store)
    store.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        status, out, err = run_cli(capsys, "sessions", "list", "--store", str(store))
        assert (status, err) == (0, "")
        assert "kept" in out
        status, out, err = run_cli(capsys, "sessions", "show", "kept", "--store", str(store))
        assert (status, out.splitlines()[0]) == (0, "user: hello")
        assert "is left out" in err
    finally:
        store.chmod(0o755)
    assert _tree(store) == before


def test_list_of_a_missing_store_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    where = tmp_path / "not-yet"
    assert run_cli(capsys, "sessions", "list", "--store", str(where)) == (
        0,
        "no stored sessions\n",
        "",
    )
    assert not where.exists()


# -- the store path and writability ----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("sessions", "list"), ("sessions", "show", "x"), ("run", "hi"), ("chat",)],
    ids=["list", "show", "run", "chat"],
)
def test_a_store_that_is_a_file_says_so_in_one_line(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: tuple[str, ...],
) -> None:
    """Not "File exists": what is wrong and what to do, exit 1, and no model call."""
    calls = _counting_model(monkeypatch)
    plain = tmp_path / "plain"
    plain.write_text("x")
    status, out, err = run_cli(capsys, *command, "--store", str(plain))
    assert (status, out) == (1, "")
    assert err == (
        f"trio-agents: error: {plain}: is a file, not a directory; give the session store a "
        f"directory (or move the file away)\n"
    )
    assert calls == []
    assert plain.read_text() == "x"


def _counting_model(monkeypatch: pytest.MonkeyPatch) -> list[ModelRequest]:
    calls: list[ModelRequest] = []
    echo = ScriptedModel.echo()

    class Counting:
        name = "counting"
        context_window: int | None = None

        async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
            calls.append(request)  # pragma: no cover - the tests check it is never called
            async with aclosing(echo.stream(request)) as events:  # pragma: no cover
                async for event in events:
                    yield event

    use_model(monkeypatch, Counting())
    return calls


@pytest.mark.skipif(not ON_LINUX_PROC, reason="needs /proc, a directory no one can write in")
@pytest.mark.parametrize("command", [("run", "hi"), ("chat",)], ids=["run", "chat"])
def test_run_and_chat_on_a_store_that_cannot_be_written_fail_before_the_model(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    """/proc cannot be written even by root: one line at start, exit 1, no model call."""
    calls = _counting_model(monkeypatch)
    status, out, err = run_cli(capsys, *command, "--store", "/proc")
    assert (status, out) == (1, "")
    assert re.fullmatch(
        r"trio-agents: error: the session directory /proc is not writable \(.+\); sessions "
        r"could not be saved — free space or fix the permissions, or choose another store "
        r"directory\n",
        err,
    ), err
    assert calls == []


def _replace_by_a_file(directory: Path) -> None:
    shutil.rmtree(directory)
    directory.write_text("now a file")


class _Seen(logging.Handler):
    """Sets ``event`` when the store logs that a session could not be written."""

    def __init__(self, event: trio.Event) -> None:
        super().__init__(logging.ERROR)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "could not be written" in record.getMessage():
            self.event.set()


def test_a_write_failure_mid_run_is_one_line_and_no_answer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    """The model replaces the store's directory with a file, waits until the writer failed,
    then answers: that answer is not printed, the error is printed once, status 1."""
    streamed: list[str] = []

    class Breaks:
        name = "breaks"
        context_window: int | None = None

        async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
            _replace_by_a_file(store)
            failed = trio.Event()
            seen = _Seen(failed)
            logging.getLogger("trio_agents").addHandler(seen)
            try:
                with trio.fail_after(30):  # only a safety net: the writer fails in ~50 ms
                    await failed.wait()
            finally:
                logging.getLogger("trio_agents").removeHandler(seen)
            streamed.append("after the failure")
            async with aclosing(ScriptedModel(["the answer"]).stream(request)) as events:
                async for event in events:
                    yield event

    use_model(monkeypatch, Breaks())
    status, out, err = run_cli(capsys, "run", "hi", "--session", "w", "--store", str(store))
    assert (status, out) == (1, "")
    assert re.fullmatch(
        rf"trio-agents: error: writing session 'w' to {re.escape(str(store))}/w\.jsonl failed "
        r"\(.*Not a directory.*\); its records from seq 0 on are not durable — the next flush "
        r"writes them again\n",
        err,
    ), err
    assert streamed == ["after the failure"]
