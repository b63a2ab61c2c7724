"""chat shows an edit's diff when it asks, and ``/undo`` puts back the session's last file
change from its recorded texts (issue 40, item 4)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from trio_agents.cli import main


def chat_lines(stdin_pipe: int, store: Path, *lines: str) -> None:
    """Run ``trio-agents chat`` in process on ``lines`` (a pipe, each echoed and acted on)."""
    os.write(stdin_pipe, "".join(f"{line}\n" for line in lines).encode())
    os.close(stdin_pipe)
    assert main(["chat", "--store", str(store), "--session", "u"]) == 0


def test_an_edit_shows_its_diff_and_undo_puts_the_file_back(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    tmp_path: Path,
    stdin_pipe: int,
) -> None:
    """edit_file's question shows -old/+new; /undo restores the text, a second /undo removes
    the file write_file created, a third says there is nothing left; each is recorded."""
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    write = json.dumps({"path": "notes.txt", "content": "one\ntwo\n"})
    edit = json.dumps({"path": "notes.txt", "old_text": "two", "new_text": "TWO"})
    chat_lines(
        stdin_pipe,
        store,
        f"!tool write_file {write}",
        "y",
        f"!tool edit_file {edit}",
        "y",
        "/undo",
        "/undo",
        "/undo",
    )
    out = capsys.readouterr().out
    notes = str(tmp_path / "notes.txt")
    expected = [
        r"\+\+\+ notes.txt \(a new file, 2 lines\)\nallow write_file",
        r"--- a/notes.txt\n\+\+\+ b/notes.txt\n@@ -1 \+1 @@\n-two\n\+TWO\nallow edit_file",
        rf"undid the last change to {re.escape(notes)} \(restored it",
        rf"undid the last change to {re.escape(notes)} \(removed it",
        r"nothing to undo: no file tool changed a file in this session",
    ]
    assert re.search(".*".join(expected), out, re.S), out
    assert not (tmp_path / "notes.txt").exists()
    records = [json.loads(line) for line in (store / "u.jsonl").read_text().splitlines()[1:]]
    kinds = [(r["old_text"], r["new_text"], r["undo_of"] is not None) for r in records
             if r["type"] == "file_edited"]  # fmt: skip
    assert kinds == [
        (None, "one\ntwo\n", False),
        ("one\ntwo\n", "one\nTWO\n", False),
        ("one\nTWO\n", "one\ntwo\n", True),
        ("one\ntwo\n", None, True),
    ]
