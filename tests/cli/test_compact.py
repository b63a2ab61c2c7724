"""``/compact`` in ``chat`` and the compaction markers of ``sessions show``."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from trio_agents.cli import main
from trio_agents.cli._config import ConfigFileError, load_config


def test_chat_compact_records_a_compaction_that_sessions_show_marks(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
) -> None:
    """/compact compacts the chat's agent on demand; ``sessions show`` still prints every
    message, with a one-line marker where the compaction happened."""
    monkeypatch.setenv("COLUMNS", "200")
    os.write(stdin_pipe, b"one\ntwo\nthree\nfour\n/compact\nafter\n")
    os.close(stdin_pipe)
    assert main(["chat", "--store", str(store), "--session", "talk"]) == 0
    capsys.readouterr()
    assert main(["sessions", "show", "talk", "--store", str(store)]) == 0
    shown = capsys.readouterr().out.splitlines()
    users = [line for line in shown if line.startswith("user: ")]
    assert users == [f"user: {w}" for w in ("one", "two", "three", "four", "after")]
    [marker] = [line for line in shown if "compacted" in line]
    assert re.fullmatch(
        r"-- compacted \(\d+ -> \d+ tokens\): the model sees a summary, then the records "
        r"from seq \d+ on --",
        marker,
    ), marker


def test_chat_says_when_the_history_was_compacted_to_fit_the_window(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
) -> None:
    """An automatic compaction (the window filled up during a turn) is announced once, on
    its own line, with the sizes; the turns before it are answered as usual."""
    monkeypatch.setenv("COLUMNS", "200")
    words = " ".join(f"word{i}" for i in range(60))
    os.write(stdin_pipe, "".join(f"{words} {n}\n" for n in range(8)).encode())
    os.close(stdin_pipe)
    code = main(
        ["chat", "--store", str(store), "--session", "full", "--model", "echo?context_window=400"]
    )
    out = capsys.readouterr().out
    assert code == 0
    notices = [line for line in out.splitlines() if "compacted the older turns" in line]
    assert notices, out
    assert all(
        re.fullmatch(
            r"compacted the older turns to fit the context window: [\d,]+ -> [\d,]+ tokens "
            r"\(the session file keeps them\)",
            line.strip(),
        )
        for line in notices
    ), notices


def test_help_lists_compact(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """/help names /compact."""
    os.write(stdin_pipe, b"/help\n")
    os.close(stdin_pipe)
    assert main(["chat", "--store", str(store), "--session", "h"]) == 0
    assert "/compact      summarize the older turns now" in capsys.readouterr().out


def test_a_config_file_gives_the_window_in_the_model_spec(tmp_path: Path) -> None:
    """[[agents]] and the default model take ?context_window= in their spec strings; a bad
    value is reported with where it is."""
    good = tmp_path / "good.toml"
    good.write_text(
        'model = "echo?context_window=4000"\n'
        '[[agents]]\nid = "a"\nmodel = "openai:m?context_window=128000"\n'
    )
    config = load_config(good)
    assert config.model == "echo?context_window=4000"
    assert config.agents[0].model == "openai:m?context_window=128000"
    bad = tmp_path / "bad.toml"
    bad.write_text('[[agents]]\nmodel = "echo?context_window=0"\n')
    with pytest.raises(ConfigFileError) as caught:
        load_config(bad)
    [problem] = caught.value.problems
    assert problem.startswith("agents[0].model: ")
    assert "context_window must be a whole number >= 1, got '0'" in problem
