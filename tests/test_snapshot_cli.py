"""The ownership tree in the command: chat's ``/tree`` on a terminal, and SIGUSR1 printing it
to stderr while ``run``, ``chat`` or ``acp`` goes on.

Every wait is for the output or a file the tool call writes, with a deadline.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from command_support import Command, acp_prompt
from pty_support import Terminal
from supervision_support import wait_until

from trio_agents.cli._tree_view import age


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Terminal]:
    """``trio-agents chat`` on a terminal, at its first prompt."""
    terminal = Terminal("chat", "--store", "memory", home=tmp_path)
    try:
        terminal.expect(r"you> ")
        yield terminal
    finally:
        terminal.close()


def test_tree_in_chat_draws_the_ownership_tree_and_the_chat_goes_on(chat: Terminal) -> None:
    """/tree draws the runtime's fibers with the chat's agent among them; the prompt returns."""
    chat.send("/tree\n")
    chat.expect(r"ownership tree \(entries oldest first; teardown runs each list from the bottom")
    chat.expect(r"root#1 active")
    chat.expect(r"agent-loop#\d+ active")
    chat.expect(r"agent:\S+#\d+ active \S+ · agent \S+ idle")
    chat.expect(r"you> ")
    chat.send("hello\n")
    chat.expect(r"hello")
    chat.send("/quit\n")
    assert chat.wait() == 0


def start(kind: str, tmp_path: Path, command: str) -> Command:
    """``run``, ``chat`` (prompts from a pipe) or ``acp``, running ``command`` as a bash call."""
    prompt = f"!bash {command}"
    if kind == "run":
        started = Command(tmp_path, "run", prompt, "--yes", "--store", "memory")
        started.stdin.close()  # run reads piped stdin to its end before it starts the turn
    elif kind == "chat":
        started = Command(tmp_path, "chat", "--store", "memory")
        started.stdin.write(prompt.encode() + b"\ny\n")  # y: the answer to "allow bash?"
        started.stdin.flush()
    else:
        started = Command(tmp_path, "acp", "--allow-bash", "--store", "memory")
        acp_prompt(started, prompt)
    return started


@pytest.mark.parametrize("kind", ["run", "chat", "acp"])
def test_sigusr1_prints_the_tree_to_stderr_and_the_command_goes_on(
    kind: str, tmp_path: Path
) -> None:
    """Mid tool call, SIGUSR1 prints the tree with the running turn, its call and the
    command; the command keeps running until SIGTERM ends it as usual."""
    flag = tmp_path / "started"
    command = start(kind, tmp_path, f"touch {flag}; sleep 600")
    try:
        wait_until(flag.exists, "the tool call to start")
        command.process.send_signal(signal.SIGUSR1)
        wait_until(lambda: "foreground command(s) running" in command.stderr, "the tree")
        assert command.process.poll() is None
        command.process.send_signal(signal.SIGTERM)
        status = command.wait()
    finally:
        command.close()
    assert status == 128 + signal.SIGTERM, command.stderr
    lines = command.stderr.splitlines()
    assert lines[0] == (
        "ownership tree (entries oldest first; teardown runs each list from the bottom up)"
    )
    assert lines[1].startswith("root#1 active ")
    text = "\n".join(lines)
    assert " · agent " in text
    assert "running t-1 " in text
    assert "tool bash (call-1) running " in text
    assert "1 foreground command(s) running" in text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.04, "0.0s"), (9.96, "10.0s"), (10.2, "10s"), (185, "3m05s"), (7620, "2h07m")],
)
def test_ages_are_short(seconds: float, shown: str) -> None:
    """A duration is drawn in tenths below 10 s, then whole seconds, minutes, hours."""
    assert age(seconds) == shown
