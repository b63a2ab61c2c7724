"""How ``LocalShell`` holds one job's processes: supervised (Linux) or as a process group.

Rules:
- Both kinds offer the driver the same primitives: the shell's ``pid`` and ``returncode``,
  ``wait()`` for the shell's exit, ``signal(signum)`` to every process of the job (``False``
  when none is left), ``settle()`` until every process of the job is gone, and ``aclose()``.
- :class:`GroupChild` (every platform) runs ``/bin/sh -c`` as the leader of its own session
  and process group; ``signal`` is ``killpg``. A process that leaves the group (``setsid``)
  is out of reach, and nothing survives the owner's SIGKILL to kill the group.
- :class:`SupervisedChild` (Linux) runs the supervisor of ``_supervisor.py``, which forks the
  command. ``signal`` asks the supervisor (over the control socket) to signal every descendant;
  ``settle`` is the supervisor's exit, which comes only when no descendant is left. When the
  owner dies, the socket closes and the supervisor ends the job on its own.
- A job may fight its supervisor (it is the same user's process). Every command to it comes
  with a SIGCONT (a job may have stopped it), and ``force()`` (the driver's last resort, after
  a bounded wait) kills it outright. Once the supervisor is dead, the owner reaches what is
  left of the job itself: every process of the supervisor's *session* (the supervisor leads
  one; the command and all it starts belong to it unless they call ``setsid``).
- Invariant: the supervisor is reaped (``trio.Process.wait``) only once no process of its
  session is left, so its pid, which is the session id the owner looks for, cannot be reused
  while the owner still signals by it (a pidfd tells that it exited without reaping it).
"""

from __future__ import annotations

import abc
import functools
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import final

import trio

from ._errors import ShellError
from ._supervisor import proc_stats

_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_supervisor.py")
# The supervisor writes its first line right after fork(); this bounds a broken one.
_START_TIMEOUT = 30.0
# How often the owner looks again for what is left of a job whose supervisor is dead.
_RESCAN = 0.02


@functools.cache
def supervisor_available() -> bool:
    """Whether this platform has what the supervisor needs (Linux: subreapers, /proc, pidfds)."""
    if not (sys.platform.startswith("linux") and os.path.isdir("/proc/self")):
        return False
    try:  # the call exists since Linux 5.3
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


def session_members(session: int) -> list[int]:
    """Every live (non-zombie) process whose session id is ``session``, except its leader."""
    return [
        pid
        for pid, fields in proc_stats()
        if pid != session and fields[0] not in (b"Z", b"X") and int(fields[3]) == session
    ]


class Child(abc.ABC):
    """The processes of one job, as the driver of ``LocalShell`` sees them."""

    #: The merged stdout and stderr pipe.
    stdout: trio.abc.ReceiveStream

    @property
    @abc.abstractmethod
    def pid(self) -> int:
        """The shell's pid (the leader of the job's process group)."""

    @property
    @abc.abstractmethod
    def returncode(self) -> int | None:
        """The shell's exit status once it exited (negative: the signal), else ``None``."""

    @abc.abstractmethod
    async def wait(self) -> None:
        """Return once the shell has exited."""

    @abc.abstractmethod
    def signal(self, signum: signal.Signals) -> bool:
        """Send ``signum`` to every process of the job; ``False`` when none is left."""

    @abc.abstractmethod
    async def settle(self) -> None:
        """Return once no process of the job is left that this child can know of."""

    @abc.abstractmethod
    async def force(self) -> None:
        """SIGKILL every process of the job the owner can reach without help; the driver's
        last resort when a SIGKILL asked for did not end the shell in time."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release what the child holds (the shell has exited)."""


async def _open(
    argv: list[str],
    cwd: str | None,
    env: Mapping[str, str],
    pass_fds: tuple[int, ...] = (),
    stdin: int = subprocess.DEVNULL,
    stderr: int = subprocess.STDOUT,
) -> trio.Process:
    # Every job: its own session and group, stdout a pipe; a shell job has no stdin and its
    # stderr merged into stdout (an MCP server gets a stdin pipe and its own stderr).
    return await trio.lowlevel.open_process(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,
        pass_fds=pass_fds,
    )


@final
class GroupChild(Child):
    """``/bin/sh -c`` as the leader of its own process group."""

    def __init__(self, process: trio.Process) -> None:
        self._process = process
        # Invariant: spawned with stdout=PIPE.
        assert process.stdout is not None
        self.stdout = process.stdout

    @classmethod
    async def spawn(
        cls, command: str, cwd: str, env: Mapping[str, str], *, prefix: Sequence[str] = ()
    ) -> GroupChild:
        """Start ``command`` (under the program ``prefix`` names, if any: a sandbox)."""
        return cls(await _open([*prefix, "/bin/sh", "-c", command], cwd, env))

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> None:
        await self._process.wait()

    def signal(self, signum: signal.Signals) -> bool:
        # Invariant: only called while the driver owns the process (before it is done).
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            # PermissionError: the group id was reused by another user's process.
            return False
        return True

    async def settle(self) -> None:
        # A group has no exit to await: the driver's drain of the pipe to end of file says
        # when the last member holding it has gone.
        await trio.lowlevel.checkpoint()

    async def force(self) -> None:
        self.signal(signal.SIGKILL)
        await self._process.wait()

    async def aclose(self) -> None:
        await self.stdout.aclose()


@final
class SupervisedChild(Child):
    """A command under a per-job supervisor process (see ``_supervisor.py``)."""

    def __init__(
        self, process: trio.Process, control: socket.socket, pidfd: int, grace: float
    ) -> None:
        self._process = process
        self._control = control
        # A pidfd of the supervisor: readable once it exited, without reaping it.
        self._pidfd = pidfd
        self._grace = grace
        self._pid = 0
        self._buffer = b""
        self._code: int | None = None
        # The supervisor's own status once it exited (before it is reaped).
        self._exit: int | None = None
        self._eof = False
        # Invariant: only aclose() reaps the supervisor; trio's returncode, send_signal and
        # kill would reap it by polling, so the pidfd is used instead.
        self._reaped = False
        assert process.stdout is not None
        self.stdout = process.stdout
        #: The command's stdin, when it was given a pipe.
        self.stdin = process.stdin

    @classmethod
    async def spawn(
        cls,
        argv: list[str],
        cwd: str | None,
        env: Mapping[str, str],
        grace: float,
        *,
        stdin: int = subprocess.DEVNULL,
        stderr: int = subprocess.STDOUT,
    ) -> SupervisedChild:
        """Start the supervisor of ``argv`` and wait until it has forked the command.

        Raises:
            ShellError: the supervisor could not start the command.
        """
        ours, theirs = socket.socketpair()
        try:
            process = await _open(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    _SUPERVISOR,
                    str(theirs.fileno()),
                    repr(grace),
                    "--",
                    *argv,
                ],
                cwd,
                env,
                (theirs.fileno(),),
                stdin,
                stderr,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        # Invariant: the process is ours and not reaped, so its pid is still its own.
        child = cls(process, ours, os.pidfd_open(process.pid), grace)
        # Invariant: once the supervisor exists, this task owns it; a cancellation here
        # must not leave it behind, so the one line is read shielded (and bounded).
        with trio.CancelScope(shield=True):
            with trio.move_on_after(_START_TIMEOUT):
                line = await child._line()
            if line is not None and line.startswith("pid "):
                child._pid = int(line[4:])
                return child
            # No command: closing the socket makes a live supervisor end whatever it started.
            child._close_control()
            with trio.move_on_after(_START_TIMEOUT):
                await child._exited()
            await child.aclose()
        raise ShellError(
            f"the job supervisor ({_SUPERVISOR}) did not start the command "
            f"(exit status {process.returncode}); set LocalShell.Config(supervise=False) "
            f"to run jobs without it"
        )

    async def _line(self) -> str | None:
        """The next line from the supervisor, or ``None`` at end of file."""
        while b"\n" not in self._buffer:
            if self._eof:
                return None
            await trio.lowlevel.wait_readable(self._control)
            try:
                data = self._control.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._eof = True
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("ascii", errors="replace")

    async def _exited(self) -> None:
        """Return once the supervisor has exited (noting its status), without reaping it."""
        if self._exit is not None:
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.wait_readable(self._pidfd)
        # WNOWAIT on a readable pidfd: answers at once, and leaves the reaping to aclose().
        info = os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOWAIT)  # noqa: ASYNC222
        # Invariant: the pidfd is readable only once the process exited, so waitid answers.
        assert info is not None
        killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
        self._exit = -info.si_status if killed else info.si_status

    @property
    def _alive(self) -> bool:
        """Whether the supervisor may still act on a command."""
        return self._exit is None and not self._eof and self._control.fileno() >= 0

    def _signal_left(self, signum: signal.Signals) -> bool:
        """Signal what is left of the job without its supervisor: its session."""
        if self._reaped:  # the session id may belong to someone else by now
            return False
        found = session_members(self._process.pid)
        for pid in found:
            try:
                os.kill(pid, signum)
                if signum is signal.SIGTERM:
                    os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                continue
        return bool(found)

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        if self._code is not None:
            return self._code
        # A supervisor that died without reporting (killed outright): its status stands in.
        return self._exit if self._eof else None

    async def wait(self) -> None:
        while self._code is None:
            line = await self._line()
            if line is None:
                # The supervisor is gone without a report: its own status is the answer.
                await self._exited()
                return
            if line.startswith("exit "):
                self._code = int(line[5:])

    def signal(self, signum: signal.Signals) -> bool:
        if self._alive:
            # A job can stop its supervisor (kill -STOP $PPID): wake it for every command.
            self._send_supervisor(signal.SIGCONT)
            command = b"K" if signum is signal.SIGKILL else b"T"
            try:
                self._control.send(command)
            except OSError:  # BrokenPipe: the supervisor has exited
                pass
            else:
                return True
        return self._signal_left(signum)

    async def settle(self) -> None:
        # The supervisor exits (0) only once no descendant is left; any other status means
        # it was killed, and what it left behind is looked for in its session.
        await self._exited()
        # Nothing announces the exit of a process that is not our child: look again.
        while self._exit != 0 and session_members(self._process.pid):  # noqa: ASYNC110
            await trio.sleep(_RESCAN)

    def _send_supervisor(self, signum: int) -> None:
        # Invariant: not reaped yet (see __init__), so the pidfd still names the supervisor.
        if not self._reaped and self._exit is None:
            try:  # noqa: SIM105 - the one place, no contextlib needed
                signal.pidfd_send_signal(self._pidfd, signum)
            except ProcessLookupError:  # it exited; _exited() will say so
                pass

    async def force(self) -> None:
        self._send_supervisor(signal.SIGKILL)
        await self._exited()
        await self._kill_left()

    async def _kill_left(self) -> None:
        """SIGKILL what is left in the supervisor's session until nothing is (bounded)."""
        with trio.move_on_after(self._grace):
            # Nothing announces the exit of a process that is not our child: look again.
            while self._exit != 0 and self._signal_left(signal.SIGKILL):  # noqa: ASYNC110
                await trio.sleep(_RESCAN)

    def _close_control(self) -> None:
        if self._control.fileno() >= 0:
            trio.lowlevel.notify_closing(self._control)
            self._control.close()

    async def aclose(self) -> None:
        self._close_control()
        if not self._reaped:
            if self._exit is None:
                # Still there after the driver's bounded waits (a job keeps stopping it).
                self._send_supervisor(signal.SIGKILL)
                await self._exited()
            await self._kill_left()
            await self._process.wait()
            self._reaped = True
        if self._pidfd >= 0:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        await self.stdout.aclose()
        if self.stdin is not None:
            await self.stdin.aclose()
