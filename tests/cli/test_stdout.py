"""A command whose stdout nobody reads still ends on a stop signal; a reader that reads gets
everything, in order (``cli/_stdout.py``)."""

from __future__ import annotations

import array
import fcntl
import os
import re
import signal
import subprocess
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.support import TRIO_AGENTS
from trio_agents.cli._stdout import PipedStdout

#: Bytes in the stdout pipe that mean it is full: a writer that goes on blocks (or queues).
FULL = 60_000
#: A prompt the echo model says back: far more than a pipe holds.
BIG = ("x" * 99 + " ") * 3_000


def _writing(pid: int) -> bool:
    """Whether a thread of process ``pid`` is blocked writing to a pipe (Linux)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "wchan").read_text().endswith("pipe_write"):
                return True
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return False


def _in_pipe(fd: int) -> int:
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


@contextmanager
def _unread_run(model: str, home: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``trio-agents run - --model MODEL`` with the big prompt, once its stdout pipe is full,
    nobody reads it, and a thread of it is blocked writing there."""
    environ = {**os.environ, "TRIO_AGENTS_HOME": str(home)}
    environ.pop("TRIO_AGENTS_DEBUG", None)
    with subprocess.Popen(
        [str(TRIO_AGENTS), "run", "-", "--store", "memory", "--model", model],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
    ) as process:
        try:
            assert process.stdin is not None
            assert process.stdout is not None
            process.stdin.write(BIG.encode())
            process.stdin.close()
            deadline = time.monotonic() + 60
            # Waiting for a state of the pipe that only the other process changes.
            while _in_pipe(process.stdout.fileno()) < FULL or not _writing(process.pid):
                assert time.monotonic() < deadline, "the command never filled its stdout"
                time.sleep(0.01)
            yield process
        finally:
            if process.returncode is None:
                process.kill()
                process.wait()


@pytest.mark.parametrize(
    ("model", "signum", "status", "line"),
    [
        # The turn is still streaming when the pipe fills up.
        ("echo?delay=0.002", signal.SIGTERM, 143, r"terminated \(SIGTERM\)"),
        # Ctrl-C cancels the turn (``run``'s own rule), which ends the command.
        ("echo?delay=0.002", signal.SIGINT, 130, r"cancelled; session s-\S+"),
        ("echo?delay=0.002", signal.SIGHUP, 129, r"hung up \(SIGHUP\)"),
        # The turn is over; the rest of the answer waits for a reader.
        ("echo", signal.SIGTERM, 143, r"terminated \(SIGTERM\)"),
    ],
)
def test_a_stop_signal_ends_run_whose_stdout_nobody_reads(
    tmp_path: Path, model: str, signum: signal.Signals, status: int, line: str
) -> None:
    """SIGTERM, SIGINT, SIGHUP end ``run`` with a full, unread stdout pipe, with their status."""
    with _unread_run(model, tmp_path) as process:
        assert process.stderr is not None
        process.send_signal(signum)
        assert process.wait(timeout=10) == status
        assert re.search(rf"(?m)^trio-agents: {line}\n\Z", process.stderr.read().decode())


def test_a_slow_reader_gets_the_whole_answer_in_order(tmp_path: Path) -> None:
    """A reader that starts late still gets every byte of the answer, then exit status 0."""
    with _unread_run("echo", tmp_path) as process:
        assert process.stdout is not None
        out = process.stdout.read()
        assert process.wait(timeout=60) == 0
        assert out.decode() == BIG.rstrip() + "\n"


def test_run_into_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    """``run ... | head`` mid-answer: the turn stops, status 141, nothing on stderr."""
    environ = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path)}
    environ.pop("TRIO_AGENTS_DEBUG", None)
    with subprocess.Popen(
        [str(TRIO_AGENTS), "run", "-", "--store", "memory", "--model", "echo?delay=0.002"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdin.write(BIG.encode())
        process.stdin.close()
        assert process.stdout.read(10) == b"x" * 10
        process.stdout.close()  # what head does once it has its lines
        assert process.wait(timeout=60) == 141
        assert process.stderr.read() == b""


def test_a_write_to_a_full_pipe_returns_at_once_and_keeps_the_order() -> None:
    """Four pipes' worth written with nobody reading returns; the reader then gets it all."""
    read_fd, write_fd = os.pipe()
    piped = PipedStdout(write_fd)
    chunks = [bytes([65 + i % 26]) * 1000 for i in range(260)]
    for chunk in chunks:
        piped.put(chunk)  # would block a plain write once the pipe held 64 KiB
    received = bytearray()
    with os.fdopen(read_fd, "rb") as reader:
        while len(received) < sum(map(len, chunks)):
            received += reader.read1(65536)
        piped.drain()
        piped.uninstall()
    assert bytes(received) == b"".join(chunks)
    os.close(write_fd)


def test_a_closed_reader_makes_the_next_write_a_broken_pipe() -> None:
    """After the reader closed the pipe, a write raises BrokenPipeError, as a plain one would."""
    read_fd, write_fd = os.pipe()
    piped = PipedStdout(write_fd)
    os.close(read_fd)
    with pytest.raises(BrokenPipeError):
        piped.put(b"lost")
    assert isinstance(piped.error, BrokenPipeError)
    piped.uninstall()
    os.close(write_fd)
