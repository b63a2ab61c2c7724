"""The chat's conveniences: /mode, Shift-Tab, /model, /clear, /resume, --continue, /cost,
@file mentions and the /compact progress line; from a pipe in process, Shift-Tab on a pty."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.support import TRIO_AGENTS
from trio_agents.cli import main
from trio_agents.cli._chat_modes import expand_mentions

ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def chat(capsys: pytest.CaptureFixture[str], lines: str, *args: str) -> str:
    """Run ``chat ARGS`` in process on ``lines`` (a pipe made fd 0; the ``stdin_pipe``
    fixture gives fd 0 back after the test); what it printed."""
    read, write = os.pipe()
    os.dup2(read, 0)
    os.close(read)
    os.write(write, lines.encode())
    os.close(write)
    assert main(["chat", *args]) == 0
    out: str = capsys.readouterr().out
    return out


def records(store: Path, session_id: str) -> list[dict[str, object]]:
    path = store / f"{session_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def test_mode_shows_switches_and_plan_refuses_a_command(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
    tmp_path: Path,
) -> None:
    """/mode names the mode; /mode plan switches (recorded) and bash is refused unasked;
    /mode yolo is one red line naming the modes."""
    monkeypatch.setenv("COLUMNS", "300")
    made = tmp_path / "made"
    lines = f"/mode\n/mode plan\n!bash touch {made}\n/mode yolo\n/quit\n"
    out = chat(capsys, lines, "--store", str(store), "--session", "m")
    assert re.search(r"/mode\nmode: ask \(asks before .*\); also edit, plan\n", out), out
    assert re.search(r"/mode plan\nmode: plan \(read-only: .*\)\n", out), out
    assert re.search(r"← tool 'bash' is not available in the 'plan' mode", out), out
    assert "allow bash" not in out
    assert re.search(r"unknown mode 'yolo'; the modes are ask, edit, plan\n", out), out
    assert not made.exists()
    modes = [r["mode"] for r in records(store, "m") if r["type"] == "mode_changed"]
    assert modes == ["plan"]
    assert main(["sessions", "show", "m", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert re.search(r"^mode plan\n(.*\n)*tool call bash ", shown, re.M), shown


def test_a_resumed_chat_is_in_the_mode_it_left(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """The mode is recorded: chatting with the session again, /mode says edit."""
    chat(capsys, "/mode edit\n/quit\n", "--store", str(store), "--session", "again")
    out = chat(capsys, "/mode\n/quit\n", "--store", str(store), "--session", "again")
    assert re.search(r"mode: edit \(edits files without asking", out), out


def test_model_lists_switches_and_refuses_a_bad_spec(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int, tmp_path: Path
) -> None:
    """/model names the model and the config file's models; /model SPEC switches (recorded
    as the agent's definition); a bad spec is one red line and nothing changes."""
    config = tmp_path / "agents.toml"
    config.write_text('models = ["echo?delay=0", "echo?context_window=900"]\n')
    lines = "/model\n/model echo?context_window=900\n/model nosuch:x\nhi\n/quit\n"
    out = chat(capsys, lines, "--store", str(store), "--session", "s", "--config", str(config))
    assert "model: echo; listed: echo?delay=0, echo?context_window=900\n" in out
    assert "model: echo (from the next request)\n" in out
    assert re.search(r"model 'nosuch:x' cannot be used: ", out), out
    configured = [r for r in records(store, "s") if r["type"] == "agent_configured"]
    assert configured[-1]["model"] == "echo?context_window=900"


def test_a_bad_models_entry_in_the_config_file_is_a_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """models = ["nosuch:x"] is refused before anything starts, naming where."""
    config = tmp_path / "agents.toml"
    config.write_text('models = ["echo", "nosuch:x"]\n')
    assert main(["chat", "--store", "memory", "--config", str(config)]) != 0
    err = capsys.readouterr().err
    assert re.search(r"models\[1\]: ", err), err


def test_cost_says_the_tokens_so_far(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """/cost: the session's tokens and requests; the cost is unknown."""
    out = chat(capsys, "one two\n/cost\n/quit\n", "--store", str(store))
    assert re.search(
        r"/cost\nsession \S+: 2 tokens in, 2 out, 1 requests on echo; cost: unknown", out
    ), out


def test_clear_starts_a_new_session_and_resume_goes_back(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
) -> None:
    """/clear: a new session (the old one stored); /resume lists it numbered; /resume 1 goes
    back to it, and the input goes on with no line lost."""
    monkeypatch.setenv("COLUMNS", "300")
    lines = "first words\n/clear\nsecond words\n/resume\n/resume 1\n/cost\nthird\n/quit\n"
    out = chat(capsys, lines, "--store", str(store), "--session", "old")
    chats = re.findall(r"chatting with (\S+) on echo", out)
    assert (len(chats), chats[0], chats[2]) == (3, "old", "old"), out
    assert chats[1] != "old"
    assert re.search(r"/resume\n +1\. old  \S+ \S+  first words\n/resume N goes to", out), out
    assert re.search(r"/cost\nsession old: 2 tokens in", out), out
    said = [r["content"] for r in records(store, "old") if r["type"] == "user_message"]
    assert said == ["first words", "third"]
    fresh = [r["content"] for r in records(store, chats[1]) if r["type"] == "user_message"]
    assert fresh == ["second words"]
    assert out.endswith(f"session old: {store / 'old.jsonl'}\n")


def test_resume_with_a_bad_number_or_id_stays(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """/resume 7 with nothing listed, and /resume of an unknown id, say so; the chat stays."""
    lines = "/resume 7\n/resume nope\nstill here\n/quit\n"
    out = chat(capsys, lines, "--store", str(store), "--session", "here")
    assert "no session number 7; the numbers are none yet: /resume lists them\n" in out
    assert "no stored session 'nope'; /resume lists them\n" in out
    said = [r["content"] for r in records(store, "here") if r["type"] == "user_message"]
    assert said == ["still here"]


def test_continue_resumes_the_latest_session_of_this_directory(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
    tmp_path: Path,
) -> None:
    """--continue: the most recent session whose cwd is here (not one of another directory);
    with none here, a new session, said so."""
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    for directory, session_id in ((here, "older"), (here, "newer"), (elsewhere, "other")):
        monkeypatch.chdir(directory)
        chat(capsys, f"in {session_id}\n", "--store", str(store), "--session", session_id)
        time.sleep(0.01)  # updated times differ (the file's modification time)
    monkeypatch.chdir(here)
    out = chat(capsys, "/quit\n", "--store", str(store), "--continue")
    assert "chatting with newer on echo" in out
    monkeypatch.chdir(tmp_path)
    out = chat(capsys, "/quit\n", "--store", str(store), "--continue")
    assert "no stored session in this directory: a new one" in out


def test_continue_and_session_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """--continue with --session is a usage error naming both."""
    with pytest.raises(SystemExit) as exited:
        main(["chat", "--store", "memory", "--continue", "--session", "x"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"trio-agents: error: argument --session: not allowed with argument --continue; .*\n",
        err,
    ), err


def test_an_at_mention_attaches_the_file_with_its_path(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
    tmp_path: Path,
) -> None:
    """@notes.txt: the prompt carries the file's text with its path (one line says so);
    @nobody names no file and stays as typed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("alpha\nbeta\n")
    lines = "summarize @notes.txt for @nobody\n/quit\n"
    out = chat(capsys, lines, "--store", str(store), "--session", "at")
    assert "attached notes.txt (2 lines)\n" in out
    [said] = [r["content"] for r in records(store, "at") if r["type"] == "user_message"]
    assert said == (
        'summarize @notes.txt for @nobody\n\n<file path="notes.txt">\nalpha\nbeta\n</file>'
    )


def test_mentions_of_a_large_or_binary_file_are_not_attached(tmp_path: Path) -> None:
    """Over the limit or not UTF-8: not attached, one red note each; the line is unchanged."""
    (tmp_path / "big.txt").write_text("x" * (256 * 1024 + 1))
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00")
    text, notes = expand_mentions("see @big.txt and @blob.bin.", str(tmp_path))
    assert text == "see @big.txt and @blob.bin."
    assert notes == [
        ("@big.txt not attached: 262,145 bytes, over 262,144", "red"),
        ("@blob.bin not attached: it is not UTF-8 text", "red"),
    ]


def test_compact_prints_its_progress_line_first(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """/compact says compacting… before the outcome line."""
    out = chat(capsys, "/compact\n/quit\n", "--store", str(store))
    assert re.search(r"/compact\ncompacting… \(Ctrl-C cancels\)\n", out), out


def test_shift_tab_cycles_the_modes_on_a_terminal(store: Path, tmp_path: Path) -> None:
    """On a pty, Shift-Tab goes ask → edit → plan → ask, one line each, keeping what was
    typed; the session records each switch."""
    master, slave = os.openpty()
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path), "TERM": "xterm", "COLUMNS": "160"}
    env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    process = subprocess.Popen(
        [str(TRIO_AGENTS), "chat", "--store", str(store), "--session", "tab"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    seen = ""

    def expect(pattern: str) -> None:
        """Wait (at most 30 s) for ``pattern`` in the output not yet matched, escapes
        removed."""
        nonlocal seen
        deadline = time.monotonic() + 30
        while (found := re.search(pattern, seen)) is None:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([master], [], [], max(left, 0))
            assert ready, f"no {pattern!r} in:\n{seen}"
            try:
                chunk = os.read(master, 65536).decode("utf-8", "replace")
            except OSError:  # EIO: the command closed the terminal
                chunk = ""
            assert chunk, f"the command ended before {pattern!r}:\n{seen}"
            seen += ESCAPES.sub("", chunk)
        seen = seen[found.end() :]

    try:
        expect(r"you> ")
        os.write(master, b"draft")
        os.write(master, b"\x1b[Z")  # Shift-Tab
        expect(r"mode: edit \(edits files without asking")
        os.write(master, b"\x1b[Z")
        expect(r"mode: plan \(read-only")
        expect(r"\[plan\] you> draft")
        os.write(master, b"\x1b[Z")
        expect(r"mode: ask \(asks before")
        os.write(master, b" kept\r")
        expect(r"draft kept")
        os.write(master, b"/quit\r")
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    modes = [r["mode"] for r in records(store, "tab") if r["type"] == "mode_changed"]
    assert modes == ["edit", "plan", "ask"]
    said = [r["content"] for r in records(store, "tab") if r["type"] == "user_message"]
    assert said == ["draft kept"]
