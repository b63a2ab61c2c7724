"""Approval through the command: ``chat`` asks on the terminal (a pty, and a pipe), ``run``
refuses unless ``--yes``, ``sessions show`` prints the answers; the config file marks tools."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import TRIO_AGENTS
from test_cli_chat import Terminal

from trio_agents.cli._config import ConfigFileError, parse
from trio_agents.mcp import McpServer

ASK_BASH = '[approval]\nask = ["bash"]\n'


def command(*args: str, home: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "ask.toml"
    path.write_text(ASK_BASH)
    return path


def test_chat_asks_on_the_terminal_yes_no_always(store: Path, tmp_path: Path, config: Path) -> None:
    """y runs the call, n refuses it (the turn goes on), a runs it and stops asking."""
    marks = tmp_path / "marks"
    marks.mkdir()
    terminal = Terminal("chat", "--store", str(store), "--config", str(config), home=tmp_path)
    try:
        terminal.expect(r"you> ")
        terminal.send(f"!bash touch {marks}/one\n")
        terminal.expect(r"allow bash: touch \S+/one\?  \[y\]es / \[n\]o / \[a\]lways")
        # The input line says that the next line is the answer, not a queued prompt.
        terminal.expect(r"answer> ")
        terminal.send("maybe\n")
        terminal.expect(r"answer y \(yes, once\), n \(no\) or a \(always")
        terminal.send("y\n")
        terminal.expect(r"exited with code 0")
        terminal.expect(r"you> ")
        terminal.send(f"!bash touch {marks}/two\n")
        terminal.expect(r"allow bash: touch \S+/two\?")
        terminal.send("n\n")
        terminal.expect(r"the user refused to let tool 'bash' run")
        terminal.expect(r"you> ")
        terminal.send(f"!bash touch {marks}/three\n")
        terminal.expect(r"allow bash: touch \S+/three\?")
        terminal.send("a\n")
        terminal.expect(r"exited with code 0")
        terminal.expect(r"you> ")
        terminal.send(f"!bash touch {marks}/four\n")
        terminal.expect(r"exited with code 0")
        terminal.expect(r"you> ")
        terminal.send("/quit\n")
        found = terminal.expect(r"session (\S+): ")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert sorted(p.name for p in marks.iterdir()) == ["four", "one", "three"]
    assert terminal.seen.count("allow bash:") == 3
    shown = command("sessions", "show", found[1], "--store", str(store), home=tmp_path)
    assert shown.returncode == 0, shown
    approvals = [line for line in shown.stdout.splitlines() if line.startswith("approval")]
    assert approvals == [
        "approval bash: allow_once by terminal",
        "approval bash: reject_once by terminal",
        "approval bash: allow_always by terminal",
        "approval bash: allow_always by standing answer",
    ]


def test_ctrl_c_while_asking_cancels_the_turn_unrun(
    store: Path, tmp_path: Path, config: Path
) -> None:
    """Ctrl-C at the question: the turn ends cancelled, the command never runs."""
    mark = tmp_path / "mark"
    terminal = Terminal("chat", "--store", str(store), "--config", str(config), home=tmp_path)
    try:
        terminal.expect(r"you> ")
        terminal.send(f"!bash touch {mark}\n")
        terminal.expect(r"allow bash: ")
        terminal.send("\x03")
        terminal.expect(r"turn t-1 cancelled \(UserCancel\)")
        terminal.expect(r"you> ")
        terminal.send("/quit\n")
        terminal.expect(r"session \S+: ")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert not mark.exists()


def test_chat_from_a_pipe_reads_the_answer_as_the_next_line(
    store: Path, tmp_path: Path, config: Path
) -> None:
    """Piped input: the line after a prompt answers its question, and the next line waits
    for that turn (so /quit right after an answer still lets the call run)."""
    first, second = tmp_path / "first", tmp_path / "second"
    result = command(
        "chat",
        "--store",
        str(store),
        "--config",
        str(config),
        home=tmp_path,
        stdin=f"!bash touch {first}\ny\n!bash touch {second}\nn\n/quit\n",
    )
    assert result.returncode == 0, result
    assert first.exists()
    assert not second.exists()
    assert result.stdout.count("allow bash: touch") == 2
    assert "exited with code 0" in result.stdout
    assert "the user refused to let tool 'bash' run" in result.stdout


def test_run_refuses_a_call_that_needs_approval_without_yes(
    store: Path, tmp_path: Path, config: Path
) -> None:
    """run without --yes: not run, the model reads the refusal, stderr names the fix."""
    mark = tmp_path / "mark"
    result = command(
        "run", f"!bash touch {mark}", "--store", str(store), "--config", str(config), home=tmp_path
    )
    assert result.returncode == 0, result
    assert not mark.exists()
    assert f"trio-agents: refused bash: touch {mark} (tool 'bash' needs approval); " in (
        result.stderr
    )
    assert "run with --yes to allow it\n" in result.stderr
    assert "refused: tool 'bash' needs approval" in result.stdout
    assert "run with --yes to allow" in result.stdout


def test_run_yes_allows_and_records_who_allowed(store: Path, tmp_path: Path, config: Path) -> None:
    """run --yes: the call runs; the session says it was allowed by run --yes."""
    mark = tmp_path / "mark"
    result = command(
        "run",
        f"!bash touch {mark}",
        "--yes",
        "--session",
        "s-yes",
        "--store",
        str(store),
        "--config",
        str(config),
        home=tmp_path,
    )
    assert result.returncode == 0, result
    assert mark.exists()
    assert "refused" not in result.stderr
    shown = command("sessions", "show", "s-yes", "--store", str(store), home=tmp_path)
    assert "approval bash: allow_once by run --yes" in shown.stdout


def test_run_without_marks_asks_nothing(store: Path, tmp_path: Path) -> None:
    """No tool marked, no --yes: bash runs as before."""
    mark = tmp_path / "mark"
    result = command("run", f"!bash touch {mark}", "--store", str(store), home=tmp_path)
    assert result.returncode == 0, result
    assert mark.exists()


def test_the_config_file_marks_tools_in_three_places() -> None:
    """[approval] ask, [[agents]] ask and [[mcp_servers]] ask are read strictly."""
    config = parse(
        {
            "approval": {"ask": ["bash"]},
            "agents": [{"id": "a", "ask": ["files__write"]}],
            "mcp_servers": [{"name": "files", "command": "fs", "ask": ["write"]}],
        }
    )
    assert config.ask == ("bash",)
    assert config.agents[0].ask == ["files__write"]
    server = config.mcp_servers[0]
    assert server == McpServer("files", command="fs", ask=("write",))
    assert server.asks("write")
    assert not server.asks("read")
    assert McpServer("all", command="fs", ask=("*",)).asks("read")
    with pytest.raises(ConfigFileError, match=r"approval\.ask"):
        parse({"approval": {"ask": "bash"}})
    with pytest.raises(ConfigFileError, match=r"approval: unknown keys: allow"):
        parse({"approval": {"allow": ["bash"]}})
