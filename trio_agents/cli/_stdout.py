"""stdout on a pipe or a socket, written so that a reader that does not read never holds the
command.

A blocking ``write`` to a full pipe stops the trio thread: no signal watcher runs, so a
``run`` whose stdout nobody reads ignored SIGTERM, SIGINT and SIGHUP.

Rules:
- While a command (other than ``acp``, whose fd 1 is the protocol's) runs with fd 1 a pipe or
  a socket, ``sys.stdout`` writes through :class:`PipedStdout`. A write never blocks the
  calling thread: what the pipe takes at once is written at once, in order (so output and
  stderr keep their order while the reader reads); the rest is queued, and one daemon thread
  writes the queue as the reader takes it. What the reader has not taken is held in memory.
- Order is kept: the calling thread writes only while nothing is queued or being written.
- A reader that closed the pipe (``EPIPE``): the queue is dropped and every later write
  raises :exc:`BrokenPipeError`, as a plain stdout's would.
- At the end of the command the entry point calls :meth:`PipedStdout.drain`, which waits for
  the queue to be written, unless a signal or Ctrl-C stopped the command (its output then
  goes nowhere: the reader may never read). The wait is interruptible: trio's handlers are
  gone by then, so SIGINT raises ``KeyboardInterrupt`` and SIGTERM and SIGHUP end the
  process.
"""

from __future__ import annotations

import collections
import io
import os
import select
import stat
import sys
import threading
from typing import TextIO, final

#: Bytes the calling thread writes per ``write``: a pipe that polls writable has a free page,
#: so a write of at most ``PIPE_BUF`` bytes does not block.
_CHUNK = select.PIPE_BUF


def _is_stream(fd: int) -> bool:
    """Whether ``fd`` is a pipe or a socket (a reader may leave it full)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@final
class PipedStdout:
    """The queue and writer thread behind ``sys.stdout`` (see the module rules)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._pending: collections.deque[bytes] = collections.deque()
        self._busy = False
        self._done = False
        #: The error that ended writing (the reader closed the pipe), if any.
        self.error: OSError | None = None
        self._original: TextIO | None = None
        threading.Thread(target=self._write_queue, name="trio-agents stdout", daemon=True).start()

    @classmethod
    def install(cls) -> PipedStdout | None:
        """Point ``sys.stdout`` at a new instance when fd 1 is a pipe or a socket and
        ``sys.stdout`` is the process's own; else ``None``."""
        if sys.stdout is not sys.__stdout__ or sys.stdout is None or not _is_stream(1):
            return None
        original = sys.stdout
        original.flush()
        # A duplicate: the queue goes where stdout went, whatever later happens to fd 1.
        piped = cls(os.dup(1))
        piped._original = original
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(_Raw(piped)),
            encoding=original.encoding,
            errors=original.errors,
            line_buffering=original.line_buffering,
        )
        return piped

    def uninstall(self) -> None:
        """Give ``sys.stdout`` back; the thread ends once what is queued is written (a
        reader that never reads keeps it, a daemon, blocked until the process exits)."""
        if self._original is not None:
            sys.stdout = self._original
            self._original = None
        with self._lock:
            self._done = True  # the thread ends once the queue is written
            self._changed.notify_all()

    def put(self, data: bytes) -> None:
        """Write ``data`` now as far as the pipe takes it, queue the rest; never blocks.

        Raises:
            BrokenPipeError: the reader closed the pipe.
        """
        with self._lock:
            if not self._pending and not self._busy and self.error is None:
                data = self._write_ready(data)
            if self.error is not None:
                # OSError picks the subclass of the errno: BrokenPipeError for EPIPE.
                raise OSError(self.error.errno, self.error.strerror)
            if data:
                self._pending.append(data)
                self._changed.notify_all()

    def drain(self) -> None:
        """Wait until everything queued is written (or writing failed)."""
        with self._lock:
            while (self._pending or self._busy) and self.error is None:
                self._changed.wait()

    def _write_ready(self, data: bytes) -> bytes:
        """Write what the pipe takes without blocking; the rest of ``data``."""
        poller = select.poll()
        poller.register(self._fd, select.POLLOUT)
        view = memoryview(data)
        try:
            while view and poller.poll(0):
                view = view[os.write(self._fd, view[:_CHUNK]) :]
        except OSError as exc:
            self.error = exc
            return b""
        return bytes(view)

    def _write_queue(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._done:
                    self._changed.wait()
                if not self._pending:
                    return
                data = memoryview(self._pending.popleft())
                self._busy = True
            error: OSError | None = None
            try:
                while data:
                    data = data[os.write(self._fd, data) :]  # blocks while the pipe is full
            except OSError as exc:
                error = exc
            with self._lock:
                self._busy = False
                if error is not None:
                    self.error = error
                    self._pending.clear()
                self._changed.notify_all()


@final
class _Raw(io.RawIOBase):
    """The raw stream under ``sys.stdout``: each write goes to :meth:`PipedStdout.put`."""

    def __init__(self, piped: PipedStdout) -> None:
        super().__init__()
        self._piped = piped

    def writable(self) -> bool:
        return True

    def write(self, b: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        data = bytes(b)
        self._piped.put(data)
        return len(data)

    def fileno(self) -> int:
        return 1

    def isatty(self) -> bool:
        return False
