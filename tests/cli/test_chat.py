"""``trio-agents chat`` driven through a pseudo-terminal, as a person at a keyboard would.

The command runs in its own session with the pty as its controlling terminal, so a ``\\x03``
written to the pty is turned into SIGINT by the terminal driver, as a real Ctrl-C is. Every
wait is for a pattern in the output, with a deadline.
"""

from __future__ import annotations

import io
import os
import re
import signal
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path

import pytest
import trio
import trio.testing
from rich.console import Console

from tests.helpers.pty_support import DEADLINE, Terminal
from trio_agents.agent import Agent, AgentOutput
from trio_agents.cli import main
from trio_agents.cli._chat import _converse, _jobs, _read_lines
from trio_agents.cli._chat_view import ChatView
from trio_agents.cli._keys import Key
from trio_agents.cli._options import Settings, open_cli_runtime, resolve_model
from trio_agents.kernel import Context, PluginReloaded
from trio_agents.model import CallTool, ModelRequest, ScriptedModel
from trio_agents.model._stream import ModelEvent
from trio_agents.session import (
    InboxSpliced,
    Record,
    SessionAppended,
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    UserMessage,
)
from trio_agents.shell import JobDone


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
    # The turn ended once its usage line is drawn, and the prompt is back.
    quick_chat.expect(r"tokens: 4 in, 4 out")
    quick_chat.expect(r"you> ")
    # On the screen (the editor redraws its input line while words stream in, so the byte
    # stream interleaves them; the rendered screen is what a person reads): the typed line,
    # then the answer on a line of its own, then the usage line.
    screen = quick_chat.screen()
    typed = screen.index("you> hello from the terminal")
    assert "hello from the terminal" in screen[typed + 1 :], screen
    answer = screen.index("hello from the terminal", typed + 1)
    assert any(line.startswith("tokens: 4 in, 4 out") for line in screen[answer + 1 :]), screen
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
    # The steer starts a turn: its status line and the note are drawn in either order.
    chat.expect(r"thinking[\s\S]*steering with m-\d+|steering with m-\d+[\s\S]*thinking")
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


def test_closing_the_terminal_ends_the_chat_its_jobs_and_flushes(
    store: Path, tmp_path: Path
) -> None:
    """A hung-up terminal (SIGHUP, and EIO on reads and writes): the running bash call's
    shell and its sleep are gone, the turn is closed in the session, the status is 129."""
    terminal = Terminal("chat", "--store", str(store), home=tmp_path)
    try:
        terminal.expect(r"you> ")
        terminal.send(
            f"!bash sleep 1000 & echo $! > {tmp_path}/pid; echo $$ > {tmp_path}/sh; wait\n"
        )
        terminal.expect(r"allow bash: ")
        terminal.send("y\n")
        deadline = time.monotonic() + DEADLINE
        # The shell writes the file; nothing announces it: poll with a deadline.
        while not (tmp_path / "sh").exists():
            assert time.monotonic() < deadline, terminal.seen
            time.sleep(0.02)
        pids = [int((tmp_path / n).read_text()) for n in ("sh", "pid")]
        os.close(terminal.fd)
        status = terminal.process.wait(timeout=DEADLINE)
        terminal.fd = os.open(os.devnull, os.O_RDONLY)  # for close()
    finally:
        terminal.close()
    assert status == 128 + signal.SIGHUP
    assert [p for p in pids if os.path.exists(f"/proc/{p}")] == []
    (session,) = store.glob("*.jsonl")
    assert '"stop_reason":"cancelled"' in session.read_text().replace(": ", ":")


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
    async with open_cli_runtime(settings, allow=["bash"]) as root:
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


# -- in this process ---------------------------------------------------------------------------


def test_chat_from_a_pipe_in_process_answers_every_command(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    stdin_pipe: int,
) -> None:
    """Each line is echoed and acted on in order; end of input (no newline) still counts."""
    monkeypatch.setenv("COLUMNS", "200")
    lines = "hello\n\n/cancel\n/steer\n/steer more\n/jobs\n/help\n/frob\n!bash echo hi\ny\nlast"
    os.write(stdin_pipe, lines.encode())
    os.close(stdin_pipe)
    assert main(["chat", "--store", str(store), "--session", "talk"]) == 0
    out = capsys.readouterr().out
    expected = [
        r"chatting with talk on echo; /help for commands",
        r"you> hello\nhello\n",
        r"you> \n",
        r"you> /cancel\nnothing to cancel\n",
        r"you> /steer\nusage: /steer TEXT\n",
        r"you> /steer more\nsteering with m-\d+\nmore\n",
        r"you> /jobs\nno background jobs\n",
        r"you> /help\nTEXT +send a prompt",
        r"you> /frob\nunknown command /frob; /help lists the commands\n",
        r'you> !bash echo hi\n→ bash \{"command": "echo hi"\}\n'
        r"allow bash: echo hi\?  \[y\]es / \[n\]o / \[a\]lways\ny\n← hi  \(\+1 lines\)\n"
        r"bash `echo hi` exited: hi",
        r"you> last\nlast\n",
        rf"session talk: {re.escape(str(store / 'talk.jsonl'))}\n$",
    ]
    assert re.search(".*".join(expected), out, re.S), out


def test_chat_with_a_declared_agent_on_memory_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, stdin_pipe: int
) -> None:
    """A config-declared agent is named as such; ``/quit`` leaves; memory keeps no file."""
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nid = "helper"\n')
    os.write(stdin_pipe, b"/quit\nnever read\n")
    assert main(["chat", "--config", str(config), "--store", "memory"]) == 0
    out = capsys.readouterr().out
    assert "chatting with helper (declared in the config file) on echo" in out
    assert "never read" not in out
    assert out.endswith("session helper: memory only (--store memory): not kept\n")


class Gate:
    """A model whose turns wait until the test opens the gate, then echo the prompt."""

    name = "gate"
    context_window: int | None = None

    def __init__(self) -> None:
        self.opened = trio.Event()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        await self.opened.wait()
        async with aclosing(ScriptedModel.echo().stream(request)) as events:
            async for event in events:
                yield event


class Records:
    """The records appended to one session, waited for in order."""

    def __init__(self, root: Context, session_id: str) -> None:
        self._id = session_id
        self._seen: list[Record] = []
        self._next = 0
        self._changed = trio.Event()
        root.on(SessionAppended, self._on)

    def _on(self, event: SessionAppended) -> None:
        if event.session_id == self._id:
            self._seen.append(event.record)
            self._changed.set()

    async def next(self, match: Callable[[Record], bool]) -> Record:
        """The next record (after the last one returned) that ``match`` accepts."""
        with trio.fail_after(DEADLINE):
            while True:
                for index in range(self._next, len(self._seen)):
                    if match(self._seen[index]):
                        self._next = index + 1
                        return self._seen[index]
                self._next = len(self._seen)
                self._changed = trio.Event()
                await self._changed.wait()


def _view(agent: Agent) -> tuple[ChatView, io.StringIO]:
    out = io.StringIO()
    return ChatView(Console(file=out, width=200, highlight=False), agent), out


async def test_a_terminal_steers_queues_and_ctrl_c_cancels_then_leaves(
    stdin_pipe: int,
) -> None:
    """Interactive: lines reach a running turn; Ctrl-C cancels it, then at idle leaves."""
    gate = Gate()
    settings = Settings(model=resolve_model(None), store="memory")
    async with open_cli_runtime(settings, shell=False) as root:
        agent = (await root.agents.create(model=gate)).agent
        view, out = _view(agent)
        view.listen(root)
        records = Records(root, agent.id)
        left = trio.Event()

        async def converse() -> None:
            await _converse(root, agent, view, {}, interactive=True)
            left.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(converse)
            os.write(stdin_pipe, b"first\n")
            await records.next(lambda r: isinstance(r, TurnStarted))
            os.write(stdin_pipe, b"/steer more\nsecond\n")
            await records.next(lambda r: isinstance(r, InboxSpliced) and r.content == "second")
            signal.raise_signal(signal.SIGINT)
            await records.next(lambda r: isinstance(r, TurnEnded))
            with trio.fail_after(DEADLINE):
                await agent.when_idle()
            assert not left.is_set()
            signal.raise_signal(signal.SIGINT)
            with trio.fail_after(DEADLINE):
                await left.wait()
        prompts = [r.content for r in agent.session.records if isinstance(r, UserMessage)]
        assert prompts == ["first"]
    text = out.getvalue()
    assert re.search(
        r"you> .*steering with m-\d+\n.*cancelling… \(Ctrl-C at the prompt leaves\)\n"
        r".*turn t-1 cancelled \(UserCancel\)\n.*you> ",
        text,
        re.S,
    ), text


async def test_end_of_input_on_a_terminal_waits_for_the_running_turn(stdin_pipe: int) -> None:
    """Interactive: Ctrl-D while a turn runs lets it answer before leaving."""
    gate = Gate()
    settings = Settings(model=resolve_model(None), store="memory")
    async with open_cli_runtime(settings, shell=False) as root:
        agent = (await root.agents.create(model=gate)).agent
        view, out = _view(agent)
        view.listen(root)
        records = Records(root, agent.id)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _converse(root, agent, view, {}, interactive=True))
            os.write(stdin_pipe, b"the answer\n")
            await records.next(lambda r: isinstance(r, TurnStarted))
            os.close(stdin_pipe)
            await trio.testing.wait_all_tasks_blocked()
            gate.opened.set()
        assert isinstance(agent.session.records[-1], TurnEnded)
    assert "the answer\n" in out.getvalue()


async def test_lines_are_split_and_decoded_as_they_come(stdin_pipe: int) -> None:
    """Chunks become lines; bad UTF-8 is replaced; a last line without newline is sent."""
    send, receive = trio.open_memory_channel[str | Key](10)
    os.write(stdin_pipe, b"one\ntw")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_read_lines, send)
        with trio.fail_after(DEADLINE):
            assert await receive.receive() == "one"
        os.write(stdin_pipe, b"o\n\xff\nend")
        os.close(stdin_pipe)
        with trio.fail_after(DEADLINE):
            assert [line async for line in receive] == ["two", "\ufffd", "end"]


async def test_the_view_draws_notices_reloads_failures_and_no_other_agent() -> None:
    """Notices, reloads and a failed turn get a line each; another agent's events draw nothing."""
    settings = Settings(model=resolve_model(None), store="memory")
    async with open_cli_runtime(settings, shell=False) as root:
        model = ScriptedModel([[CallTool("nope", {})], "ok"])
        agent = (await root.agents.create(model=model)).agent
        other = (await root.agents.create()).agent
        view, out = _view(agent)
        view.listen(root)
        root.emit(AgentOutput(agent_id=agent.id, turn_id="t-0", text=""))
        other.prompt("not mine")
        await other.when_idle()
        assert out.getvalue() == ""
        agent.inject("a job finished")
        agent.prompt("go")
        await agent.when_idle()
        root.emit(PluginReloaded("tool_bash", "trio_agents.shell._tool_bash", (), ()))
        view.close()
    text = out.getvalue()
    assert "notice for the agent: a job finished\n" in text
    assert re.search(r"→ nope\n← unknown tool 'nope'", text), text
    assert text.endswith("reloaded plugin tool_bash from trio_agents.shell._tool_bash\n")
    assert "not mine" not in text


async def test_jobs_without_a_shell_or_of_an_earlier_process_are_not_listed(
    store: Path,
) -> None:
    """An ended job says its exit code; no shell, a failed start, an earlier process: no row."""
    model = ScriptedModel(
        [
            [CallTool("bash", {"command": "true", "run_in_background": True})],
            [CallTool("bash", {"command": "", "run_in_background": True})],
            "done",
        ]
    )
    settings = Settings(model=resolve_model(None), store=str(store))
    async with open_cli_runtime(settings, shell=False) as root:
        handle = await root.agents.create(model=model)
        assert _jobs(root, handle.agent, {}) == []
        await handle.dispose()
    async with open_cli_runtime(settings, allow=["bash"]) as root:
        done: dict[str, JobDone] = {}
        root.on(JobDone, lambda event: done.__setitem__(event.job_id, event))
        agent = (await root.agents.create(model=model, session_id="jobs")).agent
        agent.prompt("start")
        await agent.when_idle()
        results = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
        assert [r.is_error for r in results] == [False, True]
        with trio.fail_after(DEADLINE):
            while "bash-1" not in done:
                await trio.testing.wait_all_tasks_blocked()
        assert _jobs(root, agent, done) == ["bash-1  exited with code 0  true"]
    async with open_cli_runtime(settings) as root:
        agent = (await root.agents.resume("jobs", model=None)).agent
        assert _jobs(root, agent, {}) == []


# The title change (OSC 0) and the clear screen a hostile answer or tool output would send.
HOSTILE = "\x1b]0;owned\x07\x1b[2J"


def test_run_on_a_terminal_shows_the_answers_controls_as_escapes(
    store: Path, tmp_path: Path
) -> None:
    """run with stdout a terminal: the echoed escape sequences arrive as visible text."""
    terminal = Terminal("run", f"a{HOSTILE}b", "--store", str(store), home=tmp_path)
    try:
        terminal.expect(r"session \S+")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert "a\\x1b]0;owned\\x07\\x1b[2Jb" in terminal.seen
    assert HOSTILE not in terminal.raw


def test_chat_on_a_terminal_shows_tool_and_model_controls_as_escapes(
    store: Path, tmp_path: Path
) -> None:
    """chat: a command's output with escapes is shown escaped, in the tool line and in the
    model's answer that quotes it; the terminal's title and screen are untouched."""
    terminal = Terminal("chat", "--store", str(store), home=tmp_path)
    try:
        terminal.expect(r"you> ")
        terminal.send("!bash printf '\\033]0;owned\\007\\033[2J'\n")
        terminal.expect(r"allow bash: ")
        terminal.send("y\n")
        terminal.expect(r"← \\x1b\]0;owned\\x07\\x1b\[2J")
        terminal.expect(r"exited: \\x1b\]0;owned\\x07\\x1b\[2J")
        terminal.expect(r"you> ")
        terminal.send("/quit\n")
        terminal.expect(r"session \S+: ")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert HOSTILE not in terminal.raw
