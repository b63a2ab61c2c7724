"""A damaged SQLite session database, or a full disk, through the command: one line that
names the file and the cause, how to check it, never a traceback, never advice to move good
data away, and never "no stored session" for a session the database holds (issue 34, item 7).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.helpers.cli_support import run_cli
from trio_agents.session import _sqlite_io

pytestmark = pytest.mark.usefixtures("cli_environment")

PAGE = 4096


def stored(capsys: pytest.CaptureFixture[str], db: Path, *ids: str) -> None:
    for session_id in ids:
        status, _, err = run_cli(
            capsys, "run", f"hello {session_id}", "--session", session_id, "--store", f"sqlite:{db}"
        )
        assert status == 0, err


def damaged_line(db: Path, cause: str) -> str:
    return (
        rf"trio-agents: error: the session database {re.escape(str(db))} is damaged \({cause}\); "
        rf"check it with: sqlite3 {re.escape(str(db))} 'PRAGMA integrity_check', then restore "
        rf"it from a backup \(sqlite3's \.recover saves what it can\)\n"
    )


def test_garbage_in_the_b_tree_pages_is_one_line_naming_the_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Every page after the first overwritten with garbage: ``list``, ``show`` and a resume
    each end with one line, status 1, saying the file is damaged and how to check it."""
    db = tmp_path / "s.db"
    stored(capsys, db, "s1", "s2")
    data = bytearray(db.read_bytes())
    data[PAGE:] = (b"\xde\xad\xbe\xef" * (len(data) // 4))[: len(data) - PAGE]
    db.write_bytes(bytes(data))
    for args in (
        ("sessions", "list"),
        ("sessions", "show", "s1"),
        ("run", "again", "--session", "s1"),
    ):
        status, out, err = run_cli(capsys, *args, "--store", f"sqlite:{db}")
        assert (status, out) == (1, ""), args
        assert re.fullmatch(damaged_line(db, "database disk image is malformed"), err), err


def test_a_full_disk_says_so_and_the_stored_data_stays_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own "database or disk is full" (a page limit on the connections): one line
    that says the disk is full and the data is intact, not "not a session database ... move
    it away"; once there is room, what was stored before reads back."""
    db = tmp_path / "s.db"
    stored(capsys, db, "s1")
    connect = _sqlite_io._connect

    def small_disk(path: Path, mode: str) -> sqlite3.Connection:
        conn = connect(path, mode)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
        return conn

    monkeypatch.setattr(_sqlite_io, "_connect", small_disk)
    status, _, err = run_cli(
        capsys, "run", "x" * 100_000, "--session", "big", "--store", f"sqlite:{db}"
    )
    assert status == 1
    assert re.fullmatch(
        rf"trio-agents: error: writing session 'big' failed: the session database "
        rf"{re.escape(str(db))} cannot grow: the disk is full \(database or disk is full\); free "
        rf"some space and try again \(what it stores is intact\); its records from seq 0 on .*\n",
        err,
    ), err
    monkeypatch.undo()
    status, out, err = run_cli(capsys, "sessions", "show", "s1", "--store", f"sqlite:{db}")
    assert (status, out.splitlines()[0], err) == (0, "user: hello s1", "")


def test_a_lookup_that_misses_a_stored_id_is_damage_not_no_session(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two keys of the sessions b-tree swapped on disk: the keyed lookup of one misses it,
    though ``list`` shows it. ``show`` says the database is damaged, not "no stored session"."""
    db = tmp_path / "s.db"
    ids = [f"sa{n}" for n in range(1, 6)]
    stored(capsys, db, *ids)
    with sqlite3.connect(db) as conn:
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE name = 'sessions'"
        ).fetchone()
    conn.close()
    data = bytearray(db.read_bytes())
    page = slice((root - 1) * PAGE, root * PAGE)
    leaf = data[page]
    first, last = leaf.find(b"sa1"), leaf.find(b"sa5")
    assert first > 0
    assert last > 0
    leaf[first : first + 3], leaf[last : last + 3] = b"sa5", b"sa1"
    data[page] = leaf
    db.write_bytes(bytes(data))
    status, out, err = run_cli(capsys, "sessions", "list", "--store", f"sqlite:{db}")
    assert status == 0, err
    assert "sa1" in out
    status, out, err = run_cli(capsys, "sessions", "show", "sa1", "--store", f"sqlite:{db}")
    assert (status, out) == (1, "")
    assert re.fullmatch(damaged_line(db, "a lookup of a stored id misses it"), err), err
