"""``trio-agents chat``'s line editor and screen, driven through a pseudo-terminal.

What the model was sent is read back from the stored session (the screen is redrawn, so
its text repeats); what the user sees is matched in the output, escapes removed, or in the
raw bytes where the escapes are the point (Markdown rendering).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from tests.helpers.pty_support import DEADLINE, Terminal
from trio_agents.agent import open_runtime
from trio_agents.cli import main
from trio_agents.cli._chat_view import ChatView, split_blocks
from trio_agents.cli._input import HISTORY_FILE, LineEditor
from trio_agents.cli._keys import Key
from trio_agents.model import Say, ScriptedModel, Wait

LEFT, HOME, UP = "\x1b[D", "\x1b[H", "\x1b[A"


def _prompts(store: Path, session_id: str | None = None) -> list[str]:
    """The prompts the model was sent, in order, from the stored session(s)."""
    paths = [store / f"{session_id}.jsonl"] if session_id else sorted(store.glob("*.jsonl"))
    found = []
    for path in paths:
        for line in path.read_text().splitlines()[1:]:
            record = json.loads(line)
            if record["type"] == "user_message":
                found.append(record["content"])
    return found


def _turns_of_prompts(store: Path) -> list[list[str]]:
    """The prompts the model was sent, grouped by the turn that claimed them."""
    turns: dict[str, list[str]] = {}
    for path in sorted(store.glob("*.jsonl")):
        for line in path.read_text().splitlines()[1:]:
            record = json.loads(line)
            if record["type"] == "user_message":
                turns.setdefault(record["turn_id"], []).append(record["content"])
    return list(turns.values())


def _chat(store: Path, home: Path, *extra: str) -> Terminal:
    terminal = Terminal("chat", "--store", str(store), *extra, home=home)
    terminal.expect(r"you> ")
    return terminal


@pytest.fixture
def editor_chat(store: Path, tmp_path: Path) -> Iterator[Terminal]:
    """A chat on the instant echo model, at its first prompt."""
    terminal = _chat(store, tmp_path)
    try:
        yield terminal
    finally:
        terminal.close()


def _answered(terminal: Terminal) -> None:
    """Wait for the end of a turn and for the input line drawn again after it.

    The editor prints above the input line with the terminal briefly in cooked mode, where
    a Ctrl-D or Ctrl-C is the terminal driver's, not a key: the next keys wait for the redraw.
    """
    terminal.expect(r"tokens: [^\n]*\n")
    terminal.expect(r"you> ")


def _quit(terminal: Terminal) -> None:
    terminal.send("/quit\r")
    terminal.expect(r"session \S+: ")
    assert terminal.wait() == 0


def test_arrow_keys_edit_the_line_before_it_is_sent(editor_chat: Terminal, store: Path) -> None:
    """Left and Home move the cursor; the model gets the edited line, not escape codes."""
    editor_chat.send(f"wrld{LEFT * 3}o{HOME}hello \r")
    _answered(editor_chat)
    _quit(editor_chat)
    assert _prompts(store) == ["hello world"]


def test_history_is_recalled_with_up_in_the_next_run(store: Path, tmp_path: Path) -> None:
    """Lines entered in one run come back with Up in the next; the file is by the sessions."""
    first = _chat(store, tmp_path, "--session", "one")
    try:
        first.send("remember this line\r")
        _answered(first)
        _quit(first)
    finally:
        first.close()
    assert "remember this line" in (store / HISTORY_FILE).read_text()
    second = _chat(store, tmp_path, "--session", "two")
    try:
        second.send(f"{UP}{UP}\r")  # the newest entry is /quit, then the line before it
        _answered(second)
        _quit(second)
    finally:
        second.close()
    assert _prompts(store, "two") == ["remember this line"]


def test_a_trailing_backslash_continues_the_prompt_on_the_next_line(
    editor_chat: Terminal, store: Path
) -> None:
    """``one \\`` Enter ``two`` Enter sends one prompt of two lines."""
    editor_chat.send("line one\\\rline two\r")
    _answered(editor_chat)
    _quit(editor_chat)
    assert _prompts(store) == ["line one\nline two"]


def test_ctrl_c_clears_a_typed_line_and_ctrl_d_leaves(editor_chat: Terminal, store: Path) -> None:
    """Ctrl-C on a line with text clears it (the chat goes on); Ctrl-D on an empty line exits."""
    editor_chat.send("a draft I regret\x03")
    editor_chat.send("kept\r")
    _answered(editor_chat)
    editor_chat.send("\x04")
    editor_chat.expect(r"session \S+: ")
    assert editor_chat.wait() == 0
    assert _prompts(store) == ["kept"]


def test_typing_during_a_turn_queues_visibly_and_ctrl_c_cancels(
    store: Path, tmp_path: Path
) -> None:
    """A line entered while a turn runs says ``queued: …``; Ctrl-C (empty line) cancels it."""
    terminal = _chat(store, tmp_path, "--model", "echo?delay=30")
    try:
        terminal.send("a long question\r")
        terminal.expect(r"thinking… \(Ctrl-C cancels\)")
        terminal.send("the next one\r")
        terminal.expect(r"queued: the next one \(sent when this turn ends\)")
        terminal.send("\x03")
        terminal.expect(r"cancelling… \(Ctrl-C at the prompt leaves\)")
        terminal.expect(r"turn t-1 cancelled \(UserCancel\)")
        _quit(terminal)
    finally:
        terminal.close()
    assert _prompts(store) == ["a long question"]


def test_a_steered_answer_starts_on_its_own_line(store: Path, tmp_path: Path) -> None:
    """A steer mid-answer: the steered step's answer is a line of its own, not glued on."""
    # 16 words at 0.4 s each: the steer, sent at the first word, has 6 s to land in the turn
    # on a loaded machine, and the stored turn ids below fail the test if it did not.
    words = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    terminal = _chat(store, tmp_path, "--model", "echo?delay=0.4")
    try:
        terminal.send(f"{words} fifteen sixteen\r")
        terminal.expect(r"thinking")  # past the echo of the typed line
        terminal.expect(r"one ")  # the first word of the answer: the first step is running
        terminal.send("/steer actually this\r")
        terminal.expect(r"steering with m-\d+")
        _answered(terminal)
        _quit(terminal)
    finally:
        terminal.close()
    # The first answer ends its line; the steered one is a line of its own. Escapes removed,
    # what the editor erased before printing stays in front of it: spaces clearing the live
    # area, and the prompt's text ("queue> " while the turn runs, "you> " once idle).
    assert re.search(r"sixteen\n(.*\n)*?((you|queue)> )* *actually this\n", terminal.seen), (
        terminal.seen
    )
    # The steer landed mid-turn: the model got both messages in one turn.
    assert _turns_of_prompts(store) == [[f"{words} fifteen sixteen", "actually this"]]


def test_a_resumed_session_shows_its_last_exchanges(store: Path, tmp_path: Path) -> None:
    """Resuming prints the last prompts with their answers before the first prompt."""
    first = _chat(store, tmp_path, "--session", "again")
    try:
        for text in ("first words", "second words", "third words", "fourth words"):
            first.send(f"{text}\r")
            _answered(first)
        _quit(first)
    finally:
        first.close()
    second = Terminal("chat", "--store", str(store), "--session", "again", home=tmp_path)
    try:
        second.expect(
            r"resumed; the last exchanges \(1 earlier not shown; trio-agents sessions show\):"
        )
        # On the rendered screen (the input line is drawn over the output while it comes, so
        # the byte stream may repeat a prompt): each prompt with its answer, in order, then
        # the prompt.
        screen = second.expect_on_screen(
            [
                "you> second words",
                "second words",
                "you> third words",
                "third words",
                "you> fourth words",
                "fourth words",
                "you>",
            ]
        )
        assert "first words" not in "\n".join(screen)
        _quit(second)
    finally:
        second.close()
    assert "first words" not in second.seen


def test_markdown_is_rendered_on_a_terminal(editor_chat: Terminal) -> None:
    """On a terminal ``**bold**`` comes out bold, without its asterisks."""
    editor_chat.send("some **strong** words\r")
    _answered(editor_chat)
    _quit(editor_chat)
    assert re.search(r"some strong words$", editor_chat.seen, re.M), editor_chat.seen
    assert re.search(r"\x1b\[1mstrong\x1b\[0m", editor_chat.raw), editor_chat.raw


def test_markdown_stays_plain_when_piped(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """From a pipe the answer is the text as the model wrote it, with no escape codes."""
    os.write(stdin_pipe, b"some **strong** words\n")
    os.close(stdin_pipe)
    assert main(["chat", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\nsome **strong** words\n" in out
    assert "\x1b" not in out


@pytest.mark.parametrize(
    ("text", "finished", "unfinished"),
    [
        ("one line", "", "one line"),
        ("a para\n\nnext", "a para", "next"),
        ("a\nb\n\nc\n\nd", "a\nb\n\nc", "d"),
        ("```\ncode\n\nmore\n", "", "```\ncode\n\nmore\n"),
        ("```\ncode\n\n```\nafter", "```\ncode\n\n```", "after"),
        ("- one\n- two\n\n", "- one\n- two", ""),
    ],
)
def test_split_blocks_cuts_after_the_last_finished_block(
    text: str, finished: str, unfinished: str
) -> None:
    """A blank line outside a fence ends a block; so does the line closing a fence."""
    assert split_blocks(text) == (finished, unfinished)


async def test_a_resumed_view_without_exchanges_prints_nothing() -> None:
    """A session with no prompt yet shows no history header."""
    async with open_runtime(model=ScriptedModel.echo()) as root:
        agent = (await root.agents.create()).agent
        out = io.StringIO()
        ChatView(Console(file=out, width=100), agent).history(agent.session.records)
    assert out.getvalue() == ""


async def test_a_question_takes_the_prompts_place_and_gives_the_draft_back() -> None:
    """ask() stops the prompt being typed, reads the answer, then the prompt resumes with
    its text: how a y/n approval plugs into the chat."""
    with create_pipe_input() as keys:
        editor = LineEditor(None, terminal=(keys, DummyOutput()))
        lines: list[str | Key] = []
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                lines.append(await editor.read())

            nursery.start_soon(read)
            keys.send_text("half a prom")
            await _until(lambda: editor.typed() == "half a prom")
            answer = trio.Event()
            answers: list[str | Key] = []

            async def ask() -> None:
                answers.append(await editor.ask("run `rm -rf build`? [y/n] "))
                answer.set()

            nursery.start_soon(ask)
            await _until(lambda: editor.typed() == "" and editor._questions == 1)
            keys.send_text("y\r")
            with trio.fail_after(DEADLINE):
                await answer.wait()
            await _until(lambda: editor.typed() == "half a prom")
            keys.send_text("pt\r")
        await editor.aclose()
    assert answers == ["y"]
    assert lines == ["half a prompt"]


async def test_closing_the_editor_ends_a_prompt_in_flight() -> None:
    """aclose() while a prompt waits for keys: the prompt's thread is done when it returns."""
    with create_pipe_input() as keys:
        editor = LineEditor(None, terminal=(keys, DummyOutput()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(editor.read)
            keys.send_text("x")
            await _until(lambda: editor.typed() == "x")
            nursery.cancel_scope.cancel()
        await editor.aclose()
        assert editor._idle.is_set()


async def _until(condition: Callable[[], bool]) -> None:
    """Wait for a condition set by the editor's thread (nothing announces it to trio)."""
    with trio.fail_after(DEADLINE):
        while not condition():
            await trio.to_thread.run_sync(time.sleep, 0.01)


def test_a_chat_from_a_pipe_never_imports_the_line_editor(tmp_path: Path) -> None:
    """prompt_toolkit (over a second to import on a loaded machine) only loads on a terminal."""
    code = (
        "import sys; from trio_agents.cli import main; status = main(['chat', '--store', "
        "'memory']); print('prompt_toolkit' in sys.modules, status)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input="/quit\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert result.stdout.splitlines()[-1] == "False 0", result


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_terminal_is_given_back_in_cooked_mode(
    signum: int, store: Path, tmp_path: Path
) -> None:
    """However the chat ends (a signal mid-edit, or /quit), echo and line mode are back on."""
    terminal = _chat(store, tmp_path, "--model", "echo?delay=30")
    try:
        terminal.send("half typed")
        terminal.expect(r"half typed")
        raw = termios.tcgetattr(terminal.fd)[3]
        assert not raw & termios.ICANON  # the editor has the terminal
        terminal.process.send_signal(signum)
        status = terminal.wait()
        cooked = termios.tcgetattr(terminal.fd)[3]
    finally:
        terminal.close()
    # SIGINT at the idle prompt leaves (0); SIGTERM tears down like everywhere else (143).
    assert status == (0 if signum == signal.SIGINT else 128 + signum)
    assert cooked & termios.ICANON
    assert cooked & termios.ECHO


async def test_two_questions_are_asked_in_turn_then_the_prompt_resumes() -> None:
    """Questions asked together are answered one after the other; the prompt waits for both."""
    with create_pipe_input() as keys:
        editor = LineEditor(None, terminal=(keys, DummyOutput()))
        lines: list[str | Key] = []
        answers: list[str | Key] = []
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                lines.append(await editor.read())

            async def ask(question: str) -> None:
                answers.append(await editor.ask(question))

            nursery.start_soon(read)
            await _until(lambda: editor._running is not None)
            nursery.start_soon(ask, "first? ")
            nursery.start_soon(ask, "second? ")
            await _until(lambda: editor._questions == 2 and editor._running is not None)
            for answer in ("a", "b"):
                keys.send_text(f"{answer}\r")
                await _until(lambda: len(answers) == "ab".index(answer) + 1)  # noqa: B023
            await _until(lambda: editor._running is editor._session)
            keys.send_text("the prompt\r")
        await editor.aclose()
    assert sorted(answers) == ["a", "b"]  # type: ignore[type-var]
    assert lines == ["the prompt"]


async def test_each_step_of_a_steered_turn_is_its_own_block(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With an editor, a steered step's answer is printed as a block of its own, after the
    first step's, never glued to it."""
    model = ScriptedModel([[Say("one two", delay=1), Wait(5)], "actually this"])
    with create_pipe_input() as keys:
        editor = LineEditor(None, terminal=(keys, DummyOutput()))
        async with open_runtime(model=model) as root:
            agent = (await root.agents.create()).agent
            out = io.StringIO()
            ChatView(Console(file=out, width=100), agent, editor).listen(root)
            agent.prompt("go")
            await trio.sleep(3)  # both words said; the step waits
            agent.steer("more")
            await agent.when_idle()
    assert re.search(r"one two\n(.*\n)*actually this\n", out.getvalue()), out.getvalue()


async def test_keys_handled_just_before_a_question_stay_in_the_draft() -> None:
    """Text the editor's loop adds while ask() is being called is in the draft given back:
    the draft is read when the prompt stops, on that loop, not when the question came."""
    with create_pipe_input() as keys:
        editor = LineEditor(None, terminal=(keys, DummyOutput()))
        lines: list[str | Key] = []
        answers: list[str | Key] = []
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                lines.append(await editor.read())

            async def ask() -> None:
                answers.append(await editor.ask("ok? "))

            nursery.start_soon(read)
            keys.send_text("early ")
            await _until(lambda: editor.typed() == "early ")
            session = editor._running
            assert session is not None
            assert session.app.loop is not None
            buffer = session.app.current_buffer
            # The editor's loop is held until ask() has stopped the prompt; the text it
            # inserts is queued ahead of that stop (its callbacks run in order).
            held = threading.Event()
            session.app.loop.call_soon_threadsafe(held.wait, DEADLINE)
            session.app.loop.call_soon_threadsafe(buffer.insert_text, "late")
            nursery.start_soon(ask)
            await _until(lambda: editor._questions == 1)
            held.set()
            await _until(lambda: editor._running is editor._quiet)
            keys.send_text("y\r")
            await _until(lambda: editor.typed() == "early late")
            keys.send_text("!\r")
        await editor.aclose()
    assert answers == ["y"]
    assert lines == ["early late!"]
