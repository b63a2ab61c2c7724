"""The per-job supervisor (Linux): one small process between the owner and a job's shell.

Run as ``python -I -S _supervisor.py CONTROL_FD GRACE -- PROGRAM ARGS...`` by
``LocalShell``; it uses the standard library only, so it starts without importing the package.

Rules:
- It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): every process the
  command leaves behind, including one that called ``setsid`` or double-forked, is re-parented
  to the supervisor rather than to init, so it stays a descendant the supervisor can find.
- It forks the command as the leader of its own process group, with ``PR_SET_PDEATHSIG``
  (SIGKILL) so that the shell dies if the supervisor is killed outright.
- ``CONTROL_FD`` is one end of a socket pair whose other end only the owner holds. The
  supervisor writes ``pid N`` once the command is forked and ``exit CODE`` once it has reaped
  it (``CODE`` as ``subprocess`` reports it: negative for a signal). The owner writes ``T``
  (SIGTERM and SIGCONT to every descendant) and ``K`` (SIGKILL to every descendant).
- End of file on ``CONTROL_FD`` means the owner is gone, however it went (even SIGKILL, which
  closes the socket in the kernel). So do SIGTERM, SIGINT and SIGHUP to the supervisor. It then
  sends SIGTERM to every descendant, waits ``GRACE`` seconds, sends SIGKILL until none is left,
  and exits.
- It exits, status 0, once the command has been reaped and no descendant is left; its stdout
  and stderr are the command's (it writes there only when the command cannot be started).
"""

from __future__ import annotations

import ctypes
import os
import select
import sys
import time
from collections.abc import Iterator

# Every import here is paid by every job's start (``benchmarks/bench_shell.py``). The signal
# module's Python wrapper imports enum (about 10 ms on the development machine), so the C
# module under it is used, which has the same functions and constants as plain ints;
# ``socket`` and ``contextlib`` are left out for the same reason (the control socket is a
# plain fd, and try/except stands in for contextlib.suppress). ``typing`` costs 20 ms:
# mypy takes a module-level ``TYPE_CHECKING`` as its own.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
else:
    import _signal as signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# How often the SIGKILL phase looks again for descendants that are not dead yet.
_RESCAN = 0.02


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """Each process of ``/proc`` with the fields of its ``stat`` after the command name
    (state, ppid, pgrp, session, ...); a process that ended while being read is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                yield int(entry), f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue


def descendants(root: int) -> list[int]:
    """Every live (non-zombie) process below ``root``, parents before children."""
    children: dict[int, list[tuple[int, bytes]]] = {}
    for pid, fields in proc_stats():
        children.setdefault(int(fields[1]), []).append((pid, fields[0]))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid, state in children.get(todo.pop(), ()):
            # A zombie's children were re-parented already; it is dead and needs no signal.
            if state not in (b"Z", b"X"):
                found.append(pid)
                todo.append(pid)
    return found


class Supervisor:
    """The supervisor's state; :meth:`run` is its whole life."""

    def __init__(self, control: int, grace: float, argv: list[str]) -> None:
        self.control = control
        self.grace = grace
        self.argv = argv
        self.pid = os.getpid()
        self.child: int | None = None
        self.reaped = False
        self.orphaned = False
        self.has_children = True
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    def _send(self, text: str) -> None:
        data = text.encode()
        try:
            while data:
                data = data[os.write(self.control, data) :]
        except OSError:  # the owner is gone: end of file tells us soon
            pass

    def _on_signal(self, signum: int, frame: object) -> None:
        if signum in _STOPS:
            self.orphaned = True

    def _fork(self) -> int:
        # A stop signal that reaches the child before it restored the default actions would
        # run this process's handler there and be lost: block them across the fork, and let
        # the child receive any that is pending only once their default action is back.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        pid = os.fork()
        if pid:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            return pid
        # The child: nothing here may raise past this block.
        try:
            os.setpgid(0, 0)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != self.pid:  # the supervisor died before the prctl
                os._exit(128 + signal.SIGKILL)
            # Python ignores SIGPIPE and SIGXFSZ; a shell pipeline needs them back.
            for signum in (*_STOPS, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.execv(self.argv[0], self.argv)
        except BaseException as exc:
            try:  # noqa: SIM105 - contextlib costs start-up time (see the imports)
                os.write(2, f"trio-agents: cannot run {self.argv[0]}: {exc}\n".encode())
            except BaseException:
                pass
        finally:
            os._exit(127)

    def reap(self) -> None:
        """Collect every dead child; note the command's status."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.has_children = False
                return
            if pid == 0:
                self.has_children = True
                return
            if pid == self.child:
                self.reaped = True
                self._send(f"exit {os.waitstatus_to_exitcode(status)}\n")

    def signal_all(self, signum: int) -> None:
        """Send ``signum`` to every descendant."""
        for pid in descendants(self.pid):
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                continue

    def _wait(self, timeout: float | None) -> bool:
        """Wait for a signal or a command; ``True`` when the owner spoke or left."""
        try:
            ready, _, _ = select.select([self.control, self._wake_r], [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            return False
        if self._wake_r in ready:
            try:  # noqa: SIM105 - contextlib costs start-up time (see the imports)
                os.read(self._wake_r, 4096)
            except BlockingIOError:
                pass
        if self.control not in ready:
            return False
        try:
            data = os.read(self.control, 4096)
        except OSError:
            data = b""
        if not data:
            self.orphaned = True
        for command in data:
            if command == ord("T"):
                self.signal_all(signal.SIGTERM)
                self.signal_all(signal.SIGCONT)
            elif command == ord("K"):
                self.signal_all(signal.SIGKILL)
        return True

    def _stop(self) -> None:
        """The owner is gone: SIGTERM, the grace period, then SIGKILL until nothing is left."""
        self.signal_all(signal.SIGTERM)
        self.signal_all(signal.SIGCONT)
        deadline = time.monotonic() + self.grace
        self.reap()
        while self.has_children and (left := deadline - time.monotonic()) > 0:
            self._wait(left)
            self.reap()
        while self.has_children:
            self.signal_all(signal.SIGKILL)
            self._wait(_RESCAN)
            self.reap()

    def run(self) -> int:
        """Fork the command, supervise it, end what it left; the exit status."""
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        os.set_blocking(self._wake_r, False)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        for signum in (*_STOPS, signal.SIGCHLD):
            signal.signal(signum, self._on_signal)
        self.child = self._fork()
        self._send(f"pid {self.child}\n")
        while True:
            self.reap()
            if self.orphaned:
                self._stop()
                return 0
            if self.reaped and not self.has_children:
                return 0
            self._wait(None)


def main(argv: list[str]) -> int:
    """``CONTROL_FD GRACE -- PROGRAM ARGS...``."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: _supervisor.py CONTROL_FD GRACE -- PROGRAM ARGS...", file=sys.stderr)
        return 2
    control = int(argv[0])
    os.set_inheritable(control, False)
    return Supervisor(control, float(argv[1]), argv[3:]).run()


if __name__ == "__main__":
    # os._exit: nothing is buffered, and the interpreter's own finalization would add a few
    # milliseconds between the job's end and the supervisor's exit, which the owner awaits.
    os._exit(main(sys.argv[1:]))
