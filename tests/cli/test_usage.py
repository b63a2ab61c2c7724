"""The command's conventions: usage mistakes, ``--version``, stdin for ``run``, plain output
when piped, the default store announced, ``demo`` on a failing model."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.support import TRIO_AGENTS
from trio_agents.cli import main
from trio_agents.cli._main import _parser
from trio_agents.cli._usage import suggestion, version


def _run(
    *args: str, home: Path, stdin: str | None = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "TRIO_AGENTS_HOME": str(home), "COLUMNS": "120", **(env or {})}
    environ.pop("TRIO_AGENTS_DEBUG", None)
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "pattern"),
    [
        (
            ["chat", "--modle", "echo"],
            r"unrecognized arguments: --modle echo; did you mean --model\?",
        ),
        (["caht"], r"argument COMMAND: invalid choice: 'caht' .*; did you mean chat\?"),
        (["sessions", "lst"], r"argument ACTION: invalid choice: 'lst' .*; did you mean list\?"),
        (
            ["run", "hi", "--sesion=x"],
            r"unrecognized arguments: --sesion=x; did you mean --session\?",
        ),
        (["--verison"], r"the following arguments are required: COMMAND; did you mean --version\?"),
        (["run"], r"the following arguments are required: prompt; see 'trio-agents run --help'"),
        (
            ["demo", "--frobnicate"],
            r"unrecognized arguments: --frobnicate; see 'trio-agents demo --help'",
        ),
        (
            ["run", "hi", "--stor", "memory"],
            r"unrecognized arguments: --stor memory; did you mean --store\?",
        ),
        (
            ["sessions", "list", "--conf", "x.toml"],
            r"unrecognized arguments: --conf x.toml; did you mean --config\?",
        ),
    ],
)
def test_a_usage_mistake_is_one_line_with_a_suggestion_and_status_1(
    argv: list[str], pattern: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line on stderr, "did you mean" when one option or command is close, status 1."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    assert (exited.value.code, out) == (1, "")
    assert re.fullmatch(rf"trio-agents: error: {pattern}\n", err), err


def test_suggestions_come_from_the_chosen_subcommand_only() -> None:
    """``--watch`` is an option of chat, not of demo: no suggestion for demo's typo of it."""
    parser = _parser()
    message = "unrecognized arguments: --wach"
    assert suggestion(parser, ["chat", "--wach"], message) == "--watch"
    assert suggestion(parser, ["demo", "--wach"], message) is None


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``--version`` prints ``trio-agents VERSION`` and exits 0."""
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"trio-agents {version()}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", version())


def test_run_dash_reads_the_prompt_from_stdin(tmp_path: Path) -> None:
    """``run -`` sends what stdin carries (the echo model says it back)."""
    result = _run("run", "-", "--store", "memory", home=tmp_path, stdin="from a pipe\n")
    assert (result.returncode, result.stdout) == (0, "from a pipe\n"), result.stderr


def test_run_dash_with_empty_stdin_says_what_to_do(tmp_path: Path) -> None:
    """``run -`` with nothing piped in is one line and status 1."""
    result = _run("run", "-", "--store", "memory", home=tmp_path, stdin=None)
    assert result.returncode == 1
    assert result.stderr == (
        "trio-agents: error: 'run -' reads the prompt from stdin, which was empty; "
        "pipe the prompt in\n"
    )


def test_piped_stdin_is_sent_after_the_prompt(tmp_path: Path) -> None:
    """``echo x | trio-agents run "summarize"``: the prompt, a blank line, the piped text."""
    result = _run("run", "summarize", "--store", "memory", home=tmp_path, stdin="line 1\nline 2\n")
    assert (result.returncode, result.stdout) == (0, "summarize\n\nline 1\nline 2\n")


def test_the_default_store_is_announced_once_on_first_use(tmp_path: Path) -> None:
    """Without --store, the first run names the directory it creates; the second says nothing."""
    first = _run("run", "hi", home=tmp_path)
    assert first.returncode == 0, first.stderr
    where = tmp_path / "sessions"
    notice = f"trio-agents: sessions are kept in {where} (set --store DIR, or --store memory)\n"
    assert first.stderr.startswith(notice)
    assert list(where.glob("*.jsonl"))
    second = _run("run", "hi", home=tmp_path)
    assert second.returncode == 0
    assert "sessions are kept" not in second.stderr


def test_sessions_list_is_plain_columns_when_piped(tmp_path: Path, store: Path) -> None:
    """Piped, ``sessions list`` has neither box drawing nor colour codes."""
    assert (
        _run("run", "a title", "--session", "one", "--store", str(store), home=tmp_path).returncode
        == 0
    )
    result = _run("sessions", "list", "--store", str(store), home=tmp_path)
    assert result.returncode == 0
    assert re.search(r"^ *one +\d+ +\d{4}-\d\d-\d\d \d\d:\d\d +a title *$", result.stdout, re.M)
    assert not re.search(r"[\u2500-\u257f\x1b]", result.stdout), result.stdout


def test_demo_with_a_failing_model_ends_with_one_line_and_status_1(tmp_path: Path) -> None:
    """A model that cannot answer stops the demo after its first turn, with what to do."""
    result = _run(
        "demo",
        "--store",
        "memory",
        "--model",
        "openai:gpt-x",
        home=tmp_path,
        env={"OPENAI_API_KEY": ""},
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert re.fullmatch(
        r"trio-agents: error: the demo stopped: model gpt-x cannot answer: "
        r"OPENAI_API_KEY is not set.*; run it without --model to use the embedded echo model\n",
        result.stderr,
    ), result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["acp"],
        ["chat"],
        ["run"],
        ["demo"],
        ["sessions", "list"],
        ["sessions", "show"],
        ["sessions", "delete"],
    ],
)
def test_every_subcommand_takes_the_common_options_and_names_the_config_tables(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--config`` and ``--store`` on every subcommand; its help names what the file holds."""
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(
        r"--config FILE a TOML file: model, store, \[\[plugins\]\], "
        r"\[\[mcp_servers\]\], \[\[agents\]\] and \[approval\]",
        text,
    ), text
    assert re.search(r"--store SPEC where sessions are kept", text), text


def test_sessions_take_the_store_of_the_config_file(tmp_path: Path, store: Path) -> None:
    """``sessions list/show/delete --config FILE`` work on the config file's ``store``."""
    config = tmp_path / "agents.toml"
    config.write_text(f"store = {str(store)!r}\n")
    made = _run(
        "run", "from the config", "--session", "one", "--config", str(config), home=tmp_path
    )
    assert made.returncode == 0, made.stderr
    assert (store / "one.jsonl").exists()
    listed = _run("sessions", "list", "--config", str(config), home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^ *one +\d+ .* from the config *$", listed.stdout, re.M), listed.stdout
    shown = _run("sessions", "show", "one", "--config", str(config), home=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("user: from the config\nagent: from the config\n")
    deleted = _run("sessions", "delete", "one", "--config", str(config), home=tmp_path)
    assert (deleted.returncode, deleted.stdout) == (0, "deleted one\n"), deleted.stderr
    assert not (store / "one.jsonl").exists()


@pytest.mark.parametrize("view", ["--json", "--full"])
def test_sessions_show_into_a_reader_that_stops_early_ends_quietly(
    tmp_path: Path, store: Path, view: str
) -> None:
    """``sessions show ID | head``: exit status 141 (128 + SIGPIPE) and nothing on stderr."""
    big = "word " * 40_000  # far more than a pipe holds, so the writer meets the closed pipe
    made = _run("run", "-", "--session", "big", "--store", str(store), home=tmp_path, stdin=big)
    assert made.returncode == 0, made.stderr
    environ = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path)}
    with subprocess.Popen(
        [str(TRIO_AGENTS), "sessions", "show", "big", view, "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
    ) as reader:
        assert reader.stdout is not None
        assert reader.stderr is not None
        assert reader.stdout.read(10)
        reader.stdout.close()  # what head does once it has its lines
        status = reader.wait(timeout=60)
        assert (status, reader.stderr.read()) == (141, b"")
