"""``trio-agents chat`` driven through a pseudo-terminal, as a person at a keyboard would.

The command runs in its own session with the pty as its controlling terminal, so a ``\\x03``
written to the pty is turned into SIGINT by the terminal driver, as a real Ctrl-C is. Every
wait is for a pattern in the output, with a deadline.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from support import TRIO_AGENTS

from trio_agents.cli._chat import _jobs
from trio_agents.cli._options import Settings, open_cli_runtime, resolve_model
from trio_agents.model import CallTool, ScriptedModel
from trio_agents.shell import JobDone

DEADLINE = 30.0
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _take_terminal() -> None:
    # Runs in the child after setsid(): the pty (its stdin) becomes its controlling terminal.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """A command on a pty; ``expect`` reads its output until a pattern shows up."""

    def __init__(self, *args: str, home: Path) -> None:
        master, slave = os.openpty()
        env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "TERM": "xterm", "COLUMNS": "120"}
        env.pop("NO_COLOR", None)
        self.process = subprocess.Popen(
            [str(TRIO_AGENTS), *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self.fd = master
        self.seen = ""
        self._unread = ""

    def send(self, text: str) -> None:
        """Type ``text`` (``\\x03`` is Ctrl-C)."""
        os.write(self.fd, text.encode())

    def expect(self, pattern: str) -> re.Match[str]:
        """Wait (at most ``DEADLINE`` seconds) for ``pattern`` in the output not yet matched."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + DEADLINE
        while True:
            found = regex.search(self._unread)
            if found is not None:
                self._unread = self._unread[found.end() :]
                return found
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            chunk = self._read() if ready else None
            if chunk is None or not chunk:
                reason = "timed out" if chunk is None else "the command closed the terminal"
                raise AssertionError(f"{reason} waiting for {pattern!r}; output:\n{self.seen}")
            text = _ESCAPES.sub("", chunk.decode("utf-8", errors="replace"))
            self.seen += text
            self._unread += text

    def _read(self) -> bytes:
        try:
            return os.read(self.fd, 65536)
        except OSError:  # EIO: the other side is closed
            return b""

    def wait(self) -> int:
        """The exit status, once the command has exited."""
        return self.process.wait(timeout=DEADLINE)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.fd)


@pytest.fixture
def chat(store: Path, tmp_path: Path) -> Iterator[Terminal]:
    """``trio-agents chat`` on a slow echo model (each word after 30 s)."""
    terminal = Terminal("chat", "--store", str(store), "--model", "echo?delay=30", home=tmp_path)
    try:
        terminal.expect(r"you> ")
        yield terminal
    finally:
        terminal.close()


@pytest.fixture
def quick_chat(store: Path, tmp_path: Path) -> Iterator[Terminal]:
    """``trio-agents chat`` on the instant echo model."""
    terminal = Terminal("chat", "--store", str(store), home=tmp_path)
    try:
        terminal.expect(r"you> ")
        yield terminal
    finally:
        terminal.close()


def test_a_prompt_gets_an_answer_and_quit_exits_zero(quick_chat: Terminal, store: Path) -> None:
    """A typed line is answered (streamed back by echo); /quit exits 0 naming the session file."""
    quick_chat.send("hello from the terminal\n")
    quick_chat.expect(r"hello from the terminal\n(.*\n)?hello from the terminal\n")
    quick_chat.expect(r"you> ")
    quick_chat.send("/quit\n")
    found = quick_chat.expect(r"session (\S+): (\S+\.jsonl)")
    assert quick_chat.wait() == 0
    assert Path(found[2]) == store / f"{found[1]}.jsonl"
    assert Path(found[2]).is_file()


def test_ctrl_c_cancels_the_running_turn_and_the_chat_goes_on(chat: Terminal) -> None:
    """Ctrl-C during a turn cancels it with UserCancel; the next prompt still works."""
    chat.send("a long question\n")
    chat.expect(r"thinking")
    chat.send("\x03")
    chat.expect(r"turn t-1 cancelled \(UserCancel\)")
    chat.expect(r"you> ")
    chat.send("/steer are you there\n")
    chat.expect(r"steering with m-\d+")
    chat.expect(r"thinking")
    chat.send("/cancel\n")
    chat.expect(r"turn t-2 cancelled \(UserCancel\)")
    chat.expect(r"you> ")
    chat.send("/quit\n")
    chat.expect(r"session \S+: ")
    assert chat.wait() == 0


def test_a_second_ctrl_c_at_the_prompt_exits_cleanly(chat: Terminal) -> None:
    """The first Ctrl-C cancels the turn; the next one, at the idle prompt, leaves with 0."""
    chat.send("a long question\n")
    chat.expect(r"thinking")
    chat.send("\x03")
    chat.expect(r"cancelled \(UserCancel\)")
    chat.expect(r"you> ")
    chat.send("\x03")
    chat.expect(r"session \S+: \S+\.jsonl")
    assert chat.wait() == 0
    assert "Traceback" not in chat.seen


def test_help_and_unknown_commands_answer_at_the_prompt(quick_chat: Terminal) -> None:
    """/help lists the commands, an unknown command says so, and the prompt comes back."""
    quick_chat.send("/help\n")
    quick_chat.expect(r"/jobs +the background jobs of this agent")
    quick_chat.expect(r"you> ")
    quick_chat.send("/frobnicate\n")
    quick_chat.expect(r"unknown command /frobnicate; /help lists the commands")
    quick_chat.expect(r"you> ")
    quick_chat.send("/jobs\n")
    quick_chat.expect(r"no background jobs")
    quick_chat.send("/quit\n")
    assert quick_chat.wait() == 0


async def test_jobs_lists_the_agents_background_jobs_and_their_state() -> None:
    """/jobs shows a job the agent started (running, then killed), not another agent's."""
    model = ScriptedModel(
        [[CallTool("bash", {"command": "sleep 30", "run_in_background": True})], "started"]
    )
    settings = Settings(model=resolve_model(None), store="memory")
    async with open_cli_runtime(settings) as root:
        done: dict[str, JobDone] = {}
        root.on(JobDone, lambda event: done.__setitem__(event.job_id, event))
        owner = (await root.agents.create(model=model)).agent
        other = (await root.agents.create()).agent
        owner.prompt("start a job")
        await owner.when_idle()
        assert _jobs(root, owner, done) == ["bash-1  running  sleep 30"]
        assert _jobs(root, other, done) == []
        with trio.fail_after(DEADLINE):
            await root.get("shell").kill("bash-1")
            while "bash-1" not in done:
                await trio.testing.wait_all_tasks_blocked()
        (row,) = _jobs(root, owner, done)
        assert re.fullmatch(r"bash-1  killed \(exit code -?\d+\)  sleep 30", row)


def test_ctrl_c_during_run_cancels_the_turn_and_exits_130(store: Path, tmp_path: Path) -> None:
    """``run`` on a terminal: Ctrl-C cancels the turn (recorded), one line, status 130."""
    terminal = Terminal(
        "run", "a b c", "--store", str(store), "--model", "echo?delay=30", home=tmp_path
    )
    try:
        terminal.expect(r"thinking")
        terminal.send("\x03")
        found = terminal.expect(r"trio-agents: cancelled; session (\S+) \((\S+)\)")
        assert terminal.wait() == 130
    finally:
        terminal.close()
    assert '"stop_reason": "cancelled"' in Path(found[2]).read_text().replace('":"', '": "')
