"""The chat's input line on a terminal: a ``prompt_toolkit`` line editor in a worker thread.

Rules:
- One :class:`LineEditor` per chat. Its ``prompt_toolkit`` session runs in a worker thread
  (its own asyncio loop there, never touching trio's); trio waits for the line in
  :meth:`LineEditor.read`. Every write to stdout or stderr during the chat goes through
  ``patch_stdout``, so it is printed *above* the input line, which is then redrawn: output and
  typing never share a line.
- Above the input line sits the *live area* (:meth:`LineEditor.show`): the part of the answer
  still streaming and a status line (``thinking…``). It is redrawn, never printed; what is
  final is printed above it. The prompt is ``you>`` when the agent is idle, ``queue>``
  while it works (a line entered then is queued), and ``answer>`` while a question of the
  agent's (a tool approval) waits for the next line.
- Keys: the usual editing (arrows, Home/End, Ctrl-A/E/K/U/W, Alt-B/F); Up/Down walk the
  history, kept in a file across runs; a line ending with ``\\`` (or Alt-Enter) continues on
  the next line; Ctrl-C clears a line that has text and otherwise is :data:`Key.INTERRUPT`
  (the chat decides: cancel the running turn, or leave); Ctrl-D on an empty line is
  :data:`Key.EOF`; Shift-Tab is :data:`Key.MODE` (the chat goes to the next mode), and the
  line being typed comes back with the next prompt.
- :meth:`LineEditor.ask` puts a question in place of the prompt (a tool approval, a
  ``/command`` that needs an answer): the line being typed is kept and given back after.
- :meth:`LineEditor.aclose` ends a prompt still running and waits (bounded) for its thread,
  so the terminal is out of raw mode before the command exits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, final

import attrs
import trio
from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style

from ._keys import Key

PROMPT = "you> "
BUSY_PROMPT = "queue> "
ANSWER_PROMPT = "answer> "
HISTORY_FILE = ".chat-history"
# How long aclose waits for the prompt's thread to give the terminal back.
_CLOSE_TIMEOUT = 5.0


@attrs.frozen
class _Preempted:
    """A prompt stopped for a question; ``draft`` is what had been typed."""

    draft: str


class _Closed:
    """A prompt stopped because the editor is closing."""


@attrs.frozen
class _Cycled:
    """Shift-Tab: the line being typed is ``draft``, kept for the next prompt."""

    draft: str


_STYLE = Style.from_dict(
    {
        "prompt": "bold ansicyan",
        "live": "ansigreen",
        "status": "ansibrightblack",
        "badge": "bold ansiyellow",
    }
)


def history_file(sessions: Path | None) -> Path | None:
    """Where the input history is kept: next to the sessions (``None``: in memory only)."""
    return sessions / HISTORY_FILE if sessions is not None else None


def _bindings() -> KeyBindings:
    keys = KeyBindings()

    @keys.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if (
            buffer.document.text_before_cursor.endswith("\\")
            and buffer.document.is_cursor_at_the_end
        ):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @keys.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        _edit_or_exit(event, Buffer.reset, Key.INTERRUPT)

    @keys.add("s-tab")
    def _mode(event: KeyPressEvent) -> None:
        event.app.exit(result=_Cycled(event.current_buffer.text))

    @keys.add("c-d")
    def _eof(event: KeyPressEvent) -> None:
        _edit_or_exit(event, Buffer.delete, Key.EOF)

    return keys


def _edit_or_exit(event: KeyPressEvent, edit: Callable[[Buffer], object], key: Key) -> None:
    """A line with text is edited by ``edit``; an empty line ends the prompt with ``key``."""
    buffer = event.current_buffer
    if buffer.text:
        edit(buffer)
    else:
        event.app.exit(result=key)


@final
class LineEditor:
    """The input line of one chat; see the module rules.

    Args:
        history: the history file (created with its directory); ``None`` keeps it in memory.
        terminal: where keys come from and the screen goes (default: the process's terminal).
    """

    def __init__(
        self, history: Path | None, *, terminal: tuple[Input, Output] | None = None
    ) -> None:
        store: History = InMemoryHistory()
        if history is not None:
            history.parent.mkdir(parents=True, exist_ok=True)
            store = FileHistory(str(history))
        keys, screen = terminal if terminal is not None else (None, None)
        common: dict[str, Any] = {"key_bindings": _bindings(), "style": _STYLE}
        common.update(input=keys, output=screen)
        self._session: PromptSession[Any] = PromptSession(history=store, multiline=True, **common)
        self._quiet: PromptSession[Any] = PromptSession(**common)
        self._live: list[tuple[str, str]] = []
        self._busy = False
        self._asked = False
        self._lock = trio.Lock()
        self._questions = 0
        self._answered = trio.Event()
        self._answered.set()
        self._closing = False
        self._running: PromptSession[Any] | None = None
        self._idle = threading.Event()
        self._idle.set()
        # What was typed when Shift-Tab ended a prompt: the next prompt starts with it.
        self._carry = ""
        self._badge = ""

    @contextmanager
    def screen(self) -> Iterator[None]:
        """While inside, stdout and stderr print above the input line."""
        with patch_stdout(raw=True):
            yield

    # -- the live area ---------------------------------------------------------------------

    def show(
        self, streaming: str = "", status: str = "", *, busy: bool = False, asked: bool = False
    ) -> None:
        """Set the live area (thread-safe; redrawn at once): text still streaming, a status.

        ``busy``: the agent is working, so a line entered now is queued; the prompt says so
        (``queue>`` instead of ``you>``). ``asked``: the next line answers a question
        (``answer>``).
        """
        self._busy = busy
        self._asked = asked
        live = []
        if streaming:
            live.append(("class:live", streaming + "\n"))
        if status:
            live.append(("class:status", status + "\n"))
        self._live = live
        session = self._running
        if session is not None:
            session.app.invalidate()

    def badge(self, text: str) -> None:
        """Show ``text`` in brackets before the prompt (the agent's mode, when it is not the
        first one: ``[plan] you>``); ``""`` shows none. Thread-safe; redrawn at once."""
        self._badge = text
        session = self._running
        if session is not None:
            session.app.invalidate()

    def _message(self) -> FormattedText:
        text = ANSWER_PROMPT if self._asked else BUSY_PROMPT if self._busy else PROMPT
        prompt = [("class:prompt", text)]
        if self._badge:
            prompt.insert(0, ("class:badge", f"[{self._badge}] "))
        if get_app().is_done:  # the line as it stays on screen once entered
            return FormattedText(prompt)
        return FormattedText([*self._live, *prompt])

    # -- reading ---------------------------------------------------------------------------

    async def read(self) -> str | Key:
        """The next line typed (history kept), or a :class:`Key`.

        Waits while a question (:meth:`ask`) is on screen; what was typed before it is kept.
        """
        draft, self._carry = self._carry, ""
        while True:
            await self._answered.wait()
            async with self._lock:
                result = await self._run(self._session, self._message, draft)
            if isinstance(result, _Preempted):
                draft = result.draft
                continue
            if isinstance(result, _Cycled):
                self._carry = result.draft
                return Key.MODE
            return Key.EOF if isinstance(result, _Closed) else result

    async def ask(self, question: str) -> str | Key:
        """Ask ``question`` in place of the prompt and return the answer (no history).

        The prompt being typed, if any, is stopped and given back with its text after.
        A plug-in point for the chat: a y/n approval or a command that needs an answer.
        """
        if not self._questions:
            self._answered = trio.Event()
        self._questions += 1
        try:
            self._stop(preempt=True)
            async with self._lock:
                result = await self._run(self._quiet, FormattedText([("bold", question)]), "")
            # A question is never preempted; one cut short by aclose has no answer.
            return result if isinstance(result, str | Key) else Key.EOF
        finally:
            self._questions -= 1
            if not self._questions:
                self._answered.set()

    async def _run(
        self, session: PromptSession[Any], message: Any, draft: str
    ) -> str | Key | _Preempted | _Closed | _Cycled:
        self._idle.clear()

        def started() -> None:
            self._running = session
            if self._closing or (session is self._session and self._questions):
                self._stop(preempt=True)

        def prompt() -> str | Key | _Preempted | _Closed | _Cycled:
            try:
                result: str | Key | _Preempted | _Closed | _Cycled = session.prompt(
                    message,
                    default=draft,
                    pre_run=started,
                    handle_sigint=False,
                    set_exception_handler=False,
                )
                return result
            except EOFError:
                return Key.EOF
            finally:
                self._running = None
                self._idle.set()

        return await trio.to_thread.run_sync(prompt, abandon_on_cancel=True)

    def typed(self) -> str:
        """The text of the line being edited (``""`` when no prompt is on screen)."""
        session = self._running
        return session.app.current_buffer.text if session is not None else ""

    def _stop(self, *, preempt: bool) -> None:
        session = self._running
        loop = session.app.loop if session is not None else None
        if session is None or loop is None:
            return
        app = session.app

        def stop() -> None:
            # On the editor's loop: the draft is read when the prompt stops, so keys still
            # being handled when the question came are kept, not lost.
            if app.is_running and not app.future.done():  # type: ignore[union-attr]
                draft = app.current_buffer.text
                app.exit(result=_Preempted(draft) if preempt and not self._closing else _Closed())

        # RuntimeError: the prompt ended meanwhile and its loop is closed; nothing to stop.
        with suppress(RuntimeError):
            loop.call_soon_threadsafe(stop)

    async def aclose(self) -> None:
        """End a running prompt and wait (at most a few seconds) for the terminal back."""
        self._closing = True
        deadline = trio.current_time() + _CLOSE_TIMEOUT
        with trio.CancelScope(shield=True):
            while not self._idle.is_set() and trio.current_time() < deadline:
                self._stop(preempt=False)
                await trio.to_thread.run_sync(self._idle.wait, 0.05)
