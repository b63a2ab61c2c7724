"""A command on a pseudo-terminal, as a person at a keyboard drives it (the chat tests).

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
from pathlib import Path

import pyte

from tests.helpers.support import TRIO_AGENTS

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
        # Nothing answers a cursor position request on this pty (a terminal would).
        env["PROMPT_TOOLKIT_NO_CPR"] = "1"
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
        self.raw = ""  # the output with its escape sequences
        self._unread = ""
        # What a person would see: the output rendered by a terminal emulator, tall enough
        # that nothing scrolls away.
        self._screen = pyte.Screen(120, 500)
        self._render = pyte.Stream(self._screen)

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
            decoded = chunk.decode("utf-8", errors="replace")
            self.raw += decoded
            self._render.feed(decoded)
            text = _ESCAPES.sub("", decoded)
            self.seen += text
            self._unread += text

    def expect_on_screen(self, lines: list[str]) -> list[str]:
        """Wait (at most ``DEADLINE`` seconds) until ``lines`` stand on the rendered screen one
        after another; the screen's lines. (The byte stream interleaves the input line's
        redraws with the output; the screen is what a person reads.)"""
        deadline = time.monotonic() + DEADLINE
        while True:
            screen = self.screen()
            if any(screen[i : i + len(lines)] == lines for i in range(len(screen))):
                return screen
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(left, 0))
            chunk = self._read() if ready else None
            if not chunk:
                raise AssertionError(f"{lines!r} not on the screen:\n" + "\n".join(screen))
            decoded = chunk.decode("utf-8", errors="replace")
            self.raw += decoded
            self._render.feed(decoded)
            text = _ESCAPES.sub("", decoded)
            self.seen += text
            self._unread += text

    def screen(self) -> list[str]:
        """The lines on the screen now (as rendered so far), without trailing blanks."""
        lines = [line.rstrip() for line in self._screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

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
