"""How ``LocalShell`` holds one job's processes: supervised (Linux) or as a process group.

Rules:
- Both kinds offer the driver the same primitives: the shell's ``pid`` and ``returncode``,
  ``wait()`` for the shell's exit, ``signal(signum)`` to every process of the job (``False``
  when none is left), ``settle()`` until every process of the job is gone, and ``aclose()``.
- :class:`GroupChild` (every platform) runs ``/bin/sh -c`` as the leader of its own session
  and process group; ``signal`` is ``killpg``. A process that leaves the group (``setsid``)
  is out of reach, and nothing survives the owner's SIGKILL to kill the group.
- :class:`SupervisedChild` (Linux) runs the supervisor of ``_supervisor.py``, which forks the
  shell. ``signal`` asks the supervisor (over the control socket) to signal every descendant;
  ``settle`` is the supervisor's exit, which comes only when no descendant is left. When the
  owner dies, the socket closes and the supervisor ends the job on its own.
"""

from __future__ import annotations

import abc
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from typing import final

import trio

from ._errors import ShellError

__all__ = ["Child", "GroupChild", "SupervisedChild", "supervisor_available"]

_SUPERVISOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_supervisor.py")
# The supervisor writes its first line right after fork(); this bounds a broken one.
_START_TIMEOUT = 30.0


def supervisor_available() -> bool:
    """Whether this platform has what the supervisor needs (Linux: subreapers, /proc)."""
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self")


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
    async def aclose(self) -> None:
        """Release what the child holds (the shell has exited)."""


async def _open(
    argv: list[str], cwd: str, env: Mapping[str, str], pass_fds: tuple[int, ...] = ()
) -> trio.Process:
    # Every job: its own session and group, no stdin, stdout and stderr merged in one pipe.
    return await trio.lowlevel.open_process(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
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
    async def spawn(cls, command: str, cwd: str, env: Mapping[str, str]) -> GroupChild:
        """Start ``command``."""
        return cls(await _open(["/bin/sh", "-c", command], cwd, env))

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

    async def aclose(self) -> None:
        await self.stdout.aclose()


@final
class SupervisedChild(Child):
    """The shell under a per-job supervisor process (see ``_supervisor.py``)."""

    def __init__(self, process: trio.Process, control: socket.socket, pid: int) -> None:
        self._process = process
        self._control = control
        self._pid = pid
        self._buffer = b""
        self._code: int | None = None
        self._eof = False
        assert process.stdout is not None
        self.stdout = process.stdout

    @classmethod
    async def spawn(
        cls, command: str, cwd: str, env: Mapping[str, str], grace: float
    ) -> SupervisedChild:
        """Start the supervisor of ``command`` and wait until it has forked the shell.

        Raises:
            ShellError: the supervisor could not start the shell.
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
                    "/bin/sh",
                    "-c",
                    command,
                ],
                cwd,
                env,
                (theirs.fileno(),),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        child = cls(process, ours, 0)
        # Invariant: once the supervisor exists, this task owns it; a cancellation here
        # must not leave it behind, so the one line is read shielded (and bounded).
        with trio.CancelScope(shield=True):
            with trio.move_on_after(_START_TIMEOUT):
                line = await child._line()
            if line is not None and line.startswith("pid "):
                child._pid = int(line[4:])
                return child
            # No shell: closing the socket makes a live supervisor end whatever it started.
            child._close_control()
            with trio.move_on_after(_START_TIMEOUT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await child.stdout.aclose()
        raise ShellError(
            f"the job supervisor ({_SUPERVISOR}) did not start the shell "
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

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def returncode(self) -> int | None:
        if self._code is not None:
            return self._code
        # A supervisor that died without reporting (killed outright): its status stands in.
        return self._process.returncode if self._eof else None

    async def wait(self) -> None:
        while self._code is None:
            line = await self._line()
            if line is None:
                # The supervisor is gone without a report: its own status is the answer.
                await self._process.wait()
                return
            if line.startswith("exit "):
                self._code = int(line[5:])

    def signal(self, signum: signal.Signals) -> bool:
        if self._process.returncode is not None or self._control.fileno() < 0:
            return False
        command = b"K" if signum is signal.SIGKILL else b"T"
        try:
            self._control.send(command)
        except OSError:  # BrokenPipe: the supervisor has exited
            return False
        return True

    async def settle(self) -> None:
        await self._process.wait()

    def _close_control(self) -> None:
        if self._control.fileno() >= 0:
            trio.lowlevel.notify_closing(self._control)
            self._control.close()

    async def aclose(self) -> None:
        self._close_control()
        await self.stdout.aclose()
