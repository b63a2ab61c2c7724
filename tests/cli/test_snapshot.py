"""The ownership tree in the command: chat's ``/tree`` on a terminal, and SIGUSR1 printing it
to stderr while ``run``, ``chat`` or ``acp`` goes on.

Every wait is for the output or a file the tool call writes, with a deadline.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.command_support import Command, acp_prompt
from tests.helpers.pty_support import Terminal
from tests.helpers.supervision_support import wait_until
from trio_agents.agent import AgentSnapshot, AgentStatus, MessageId, QueuedMessage
from trio_agents.agent._snapshot import ToolCallSnapshot, TurnSnapshot
from trio_agents.cli._tree_view import age, render_tree
from trio_agents.kernel import EntrySnapshot, FiberSnapshot, FiberState
from trio_agents.mcp import McpServerSnapshot
from trio_agents.shell import ShellSnapshot
from trio_agents.shell._snapshot import JobSnapshot


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


def _fiber(fiber: FiberSnapshot) -> EntrySnapshot:
    return EntrySnapshot("fiber", f"fiber {fiber.id}", fiber=fiber)


def test_the_tree_draws_each_kind_of_detail_under_its_owner() -> None:
    """Jobs under the shell service, the turn with its calls and the queue under the agent, a
    child in its parent's scope, runs of equal entries counted, a co-owner's entry named."""
    on = FiberState.ACTIVE
    unregister = EntrySnapshot("defer", "defer ToolRegistry._unregister")
    job = JobSnapshot("bash-1", "sleep 600", 4242, "a", 30.0)
    shell = FiberSnapshot(
        "shell#2",
        "shell",
        on,
        12.0,
        entries=(EntrySnapshot("service", "service shell", details=ShellSnapshot((job,), 1)),),
    )
    server = McpServerSnapshot("files", "stdio", "python server.py")
    mcp = FiberSnapshot(
        "files#3",
        "files",
        on,
        11.0,
        details=server,
        entries=(EntrySnapshot("task", "task Connection.run"), unregister, unregister, unregister),
    )
    child = FiberSnapshot(
        "agent:b#5", "agent:b", on, 0.25, details=AgentSnapshot("b", AgentStatus.IDLE, "a")
    )
    calls = (ToolCallSnapshot("call-1", "bash", 2.5), ToolCallSnapshot("call-2", "write", None))
    queued = QueuedMessage(MessageId("m-3"), "next_turn", "line one\nline two", True, 3)
    agent = FiberSnapshot(
        "agent:a#4",
        "agent:a",
        on,
        185.0,
        details=AgentSnapshot(
            "a", AgentStatus.RUNNING, turn=TurnSnapshot("t-2", 3.0, calls), queued=(queued,)
        ),
        entries=(EntrySnapshot("section", "section agent-scope", entries=(_fiber(child),)),),
    )
    broken = FiberSnapshot("broken#6", "broken", on, 1.0, details="describe() failed: Oops")
    root = FiberSnapshot(
        "root#1",
        "root",
        on,
        12.5,
        entries=(
            _fiber(shell),
            _fiber(mcp),
            _fiber(agent),
            _fiber(broken),
            EntrySnapshot("defer", "defer Fiber._dispose", disposes="agent:a#4"),
        ),
    )
    assert render_tree(root, width=100).splitlines() == [
        "ownership tree (entries oldest first; teardown runs each list from the bottom up)",
        "root#1 active 12s",
        "├── shell#2 active 12s",
        "│   └── service shell",
        "│       ├── job bash-1 running 30s (pid 4242, owner a): sleep 600",
        "│       └── 1 foreground command(s) running",
        "├── files#3 active 11s · MCP server files (stdio: python server.py)",
        "│   ├── task Connection.run",
        "│   └── defer ToolRegistry._unregister (x3)",
        "├── agent:a#4 active 3m05s · agent a running",
        "│   ├── running t-2 3.0s",
        "│   │   ├── tool bash (call-1) running 2.5s",
        "│   │   └── tool write (call-2) not started",
        "│   ├── queued m-3 (next turn): line one…",
        "│   └── section agent-scope",
        "│       └── agent:b#5 active 0.2s · agent b idle (child of a)",
        "├── broken#6 active 1.0s · describe() failed: Oops",
        "└── defer Fiber._dispose (disposes agent:a#4: a co-owner)",
    ]
