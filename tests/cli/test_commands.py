"""The installed ``trio-agents`` command, run as a real subprocess against a temporary store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT
from tests.helpers.support import TRIO_AGENTS


def _run(*args: str, home: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _one_line_error(result: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    assert re.fullmatch(rf"trio-agents: error: {pattern}\n", result.stderr), result.stderr


def _stored_ids(store: Path) -> list[str]:
    return sorted(p.stem for p in store.glob("*.jsonl"))


def test_demo_exits_zero_and_prints_where_the_session_is(store: Path, tmp_path: Path) -> None:
    """``demo`` runs the lifecycle and names the session file it wrote."""
    result = _run("demo", "--store", str(store), home=tmp_path)
    assert result.returncode == 0, result.stderr
    found = re.search(r"session written to (\S+\.jsonl)", result.stdout)
    assert found is not None, result.stdout
    assert Path(found[1]).is_file()
    assert Path(found[1]).parent == store


def test_run_prints_the_answer_and_exits_zero(store: Path, tmp_path: Path) -> None:
    """``run "hello"`` streams the echo model's answer to stdout and stores the session."""
    result = _run("run", "hello", "--store", str(store), home=tmp_path)
    assert (result.returncode, result.stdout) == (0, "hello\n"), result.stderr
    (session_id,) = _stored_ids(store)
    assert f"session {session_id}" in result.stderr
    _header, *records = (store / f"{session_id}.jsonl").read_text().splitlines()
    assert "turn_ended" in {json.loads(r)["type"] for r in records}


def test_run_resumes_a_session_given_by_id(store: Path, tmp_path: Path) -> None:
    """``run --session ID`` creates the session once, then continues it."""
    for prompt in ("first", "second"):
        result = _run("run", prompt, "--session", "work", "--store", str(store), home=tmp_path)
        assert (result.returncode, result.stdout) == (0, f"{prompt}\n"), result.stderr
    shown = _run("sessions", "show", "work", "--store", str(store), home=tmp_path)
    assert re.search(r"user: first.*user: second", shown.stdout, re.S), shown.stdout


def test_a_bad_model_spec_is_one_line_and_a_failure(store: Path, tmp_path: Path) -> None:
    """``--model "echo?delay=x"`` is refused before anything runs, without a traceback."""
    result = _run("run", "hi", "--model", "echo?delay=x", "--store", str(store), home=tmp_path)
    _one_line_error(result, r"invalid model spec 'echo\?delay=x': delay must be .*")
    assert result.stdout == ""
    assert _stored_ids(store) == []


def test_an_invalid_session_id_is_one_line(store: Path, tmp_path: Path) -> None:
    """A session id that is not filename-safe is refused in one line."""
    result = _run("run", "hi", "--session", "../x", "--store", str(store), home=tmp_path)
    _one_line_error(result, r"invalid session id '\.\./x': .*")


def test_a_store_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    """A --store under a regular file fails in one line (the store's own log is not repeated)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = _run("run", "hi", "--store", str(blocker / "sessions"), home=tmp_path)
    _one_line_error(result, rf"{re.escape(str(blocker / 'sessions'))}: Not a directory")


def test_sessions_list_show_and_delete_a_stored_session(store: Path, tmp_path: Path) -> None:
    """A session written by ``run`` is listed, shown and deleted."""
    assert _run("run", "hello there", "--store", str(store), home=tmp_path).returncode == 0
    (session_id,) = _stored_ids(store)

    listed = _run("sessions", "list", "--store", str(store), home=tmp_path)
    assert listed.returncode == 0
    assert re.search(rf"{session_id}\W+\d+\W+[\d: -]+\W+hello there", listed.stdout), listed.stdout

    shown = _run("sessions", "show", session_id, "--store", str(store), home=tmp_path)
    assert shown.returncode == 0
    assert shown.stdout.splitlines() == [
        "user: hello there",
        "agent: hello there",
        "turn t-1: completed · 2 in, 2 out tokens (1 request)",
        "usage: 2 in, 2 out tokens (1 request)",
    ]

    deleted = _run("sessions", "delete", session_id, "--store", str(store), home=tmp_path)
    assert (deleted.returncode, deleted.stdout) == (0, f"deleted {session_id}\n")
    assert _stored_ids(store) == []
    empty = _run("sessions", "list", "--store", str(store), home=tmp_path)
    assert empty.stdout == "no stored sessions\n"


@pytest.mark.parametrize("action", ["show", "delete"])
def test_an_unknown_session_is_one_line(action: str, store: Path, tmp_path: Path) -> None:
    """``sessions show|delete`` of an id that is not stored says so in one line."""
    result = _run("sessions", action, "nope", "--store", str(store), home=tmp_path)
    _one_line_error(
        result,
        rf"no stored session 'nope' in {re.escape(str(store))}; "
        r"'trio-agents sessions list' shows the ids",
    )


def test_a_bad_config_file_lists_every_problem(store: Path, tmp_path: Path) -> None:
    """Every problem of the file is listed under one heading; nothing runs."""
    config = tmp_path / "bad.toml"
    config.write_text(
        textwrap.dedent(
            """
            model = "nonsense"
            colour = "blue"

            [[agents]]
            tools = "bash"
            """
        )
    )
    result = _run("run", "hi", "--config", str(config), "--store", str(store), home=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"trio-agents: error: config file '.*bad\.toml' has 3 problems:", lines[0])
    problems = sorted(lines[1:])
    assert problems[0] == "  - agents[0].tools: expected a list, got str 'bash'"
    assert re.fullmatch(r"  - model: unknown model spec 'nonsense'; known: echo, .*", problems[1])
    assert problems[2:] == ["  - top level: unknown keys: colour"]
    assert _stored_ids(store) == []


def test_a_missing_config_file_is_one_line(store: Path, tmp_path: Path) -> None:
    """``--config`` of a file that does not exist is one line."""
    missing = tmp_path / "missing.toml"
    result = _run("chat", "--config", str(missing), "--store", str(store), home=tmp_path)
    _one_line_error(result, rf"config file {re.escape(repr(str(missing)))} does not exist")


def test_a_config_declared_agent_answers_run(store: Path, tmp_path: Path) -> None:
    """``run --session ID`` talks to the agent the config file declares."""
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nid = "helper"\ninstructions = "Be brief."\n')
    result = _run(
        "run", "hi", "--session", "helper", "--config", str(config), "--store", str(store),
        home=tmp_path,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, "hi\n"), result.stderr
    assert _stored_ids(store) == ["helper"]


def test_chat_from_a_pipe_answers_each_line_then_quits(store: Path, tmp_path: Path) -> None:
    """With stdin a pipe, chat answers each prompt before reading on, and /quit exits 0."""
    result = _run("chat", "--store", str(store), home=tmp_path, stdin="hello\n/jobs\n/quit\n")
    assert result.returncode == 0, result.stderr
    assert re.search(r"you> hello\nhello\n.*no background jobs", result.stdout, re.S)
    (session_id,) = _stored_ids(store)
    assert result.stdout.endswith(f"session {session_id}: {store / session_id}.jsonl\n")


def test_the_readme_embedding_example_runs(tmp_path: Path) -> None:
    """The README's Python example runs as written and stores its session."""
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"```python\n(.*?)```", readme, re.S)
    assert found is not None
    (tmp_path / "example.py").write_text(found[1])
    result = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("hello\nbash `echo from the shell` exited: from the shell\n")
    stored = re.search(r"session stored in \./sessions/(\S+)\.jsonl", result.stdout)
    assert stored is not None
    assert (tmp_path / "sessions" / f"{stored[1]}.jsonl").is_file()


def test_run_records_the_directory_it_was_started_in(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` gives its agent the directory the command was started in: it is recorded in
    the session (so an editor's session/list can report it), and a resume from elsewhere
    moves it there."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    def recorded_cwds() -> list[str]:
        (path,) = store.glob("*.jsonl")
        lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
        return [r["cwd"] for r in lines if r["type"] == "agent_configured"]

    monkeypatch.chdir(first)
    assert _run("run", "hi", "--store", str(store), "--session", "w", home=tmp_path).returncode == 0
    assert recorded_cwds() == [str(first)]
    monkeypatch.chdir(second)
    assert _run("run", "hi", "--store", str(store), "--session", "w", home=tmp_path).returncode == 0
    assert recorded_cwds() == [str(first), str(second)]
