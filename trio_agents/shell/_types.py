"""The values of the shell seam: requests, resolved specs, results, jobs and their events.

Rules:
- A :class:`ShellExecRequest` is what a caller asks for; every field may be left out.
- A :class:`ShellExecSpec` is the request resolved by the executor: every value explicit and
  every field required, ``owner`` included (a forgotten owner is a visible ``None``).
- The owner is an opaque token: the executor stores it and hands it back through
  ``ShellExecutor.owner_of``; it never interprets it. It is deliberately not on
  :class:`BashTask` (one read path).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

import attrs

#: The sandbox policies, by Codex's names, strictest first: a read-only file system; the
#: workspace writable; no sandbox.
SANDBOX_POLICIES: Final = ("read-only", "workspace-write", "danger-full-access")


class JobStatus(enum.Enum):
    """Where a process (a background job or a foreground run) is."""

    #: Still running.
    RUNNING = "running"
    #: Its shell exited on its own (a negative exit code: it died of that signal).
    EXITED = "exited"
    #: Stopped by the executor: ``kill``, a timeout, a cancelled caller, or disposal.
    KILLED = "killed"


def job_state(
    status: JobStatus,
    exit_code: int | None,
    *,
    timed_out: bool = False,
    timeout: float | None = None,
) -> str:
    """How a job's state reads, in the tools' results, their notices and the terminal.

    ``running``, ``exited with code 0``, ``killed (exit code -15)`` or ``timed out after 5 s;
    killed (exit code -15)`` (``timeout`` given).
    """
    if status is JobStatus.RUNNING:
        return "running"
    if timed_out:
        after = f" after {timeout:g} s" if timeout is not None else ""
        return f"timed out{after}; killed (exit code {exit_code})"
    if status is JobStatus.KILLED:
        return f"killed (exit code {exit_code})"
    return f"exited with code {exit_code}"


@attrs.frozen
class ShellExecRequest:
    """What to run, as a caller asks for it.

    Args:
        command: a ``/bin/sh -c`` command line.
        cwd: the working directory; relative paths are resolved against the process's
            current directory, ``None`` means that directory.
        env: variables laid over the executor's base environment (``os.environ``).
        timeout: seconds; ``None`` means the executor's default (foreground) or no limit
            (background).
        owner: the opaque owner token stored with a background job (``None``: unowned).
        background: whether the command is meant for ``start`` rather than ``run``.
        sandboxed: run it inside the executor's sandbox, if it has one (``False``: outside
            it; the ``bash_unsandboxed`` tool, which always needs approval).
        policy: a sandbox policy this command asks for (``read-only``: the calling agent's
            mode is ``plan``, or its definition says so); the stricter of it and the
            executor's own applies. ``None``: the executor's. Without a sandbox it changes
            nothing.
    """

    command: str
    cwd: str | None = None
    env: Mapping[str, str] | None = None
    timeout: float | None = None
    owner: str | None = None
    background: bool = False
    sandboxed: bool = True
    policy: str | None = None


@attrs.frozen(kw_only=True)
class ShellExecSpec:
    """A request resolved into explicit values; made by ``ShellExecutor.resolve``.

    Attributes:
        command: the ``/bin/sh -c`` command line.
        cwd: the absolute working directory.
        env: the complete environment of the process.
        timeout: seconds until the process is killed, or ``None`` (no limit).
        output_cap: the most bytes of unread output kept; older bytes are dropped and
            counted.
        owner: the opaque owner token (``None``: unowned). Required: never defaulted.
        background: whether this spec is meant for ``start``.
        sandboxed: whether it runs inside the executor's sandbox (when it has one).
        policy: the sandbox policy the request asked for, or ``None`` (the executor's).
    """

    command: str
    cwd: str
    env: Mapping[str, str] = attrs.field(repr=False, hash=False)
    timeout: float | None
    output_cap: int
    owner: str | None
    background: bool
    sandboxed: bool
    policy: str | None = None


@attrs.frozen
class ShellResult:
    """The outcome of a foreground ``run``.

    Attributes:
        output: stdout and stderr, merged, decoded as UTF-8 (invalid bytes replaced).
        exit_code: the shell's exit status; negative when it died of a signal.
        status: ``EXITED`` or ``KILLED``.
        timed_out: whether the timeout killed it.
        dropped: how many bytes of (earlier) output the output cap dropped.
    """

    output: str
    exit_code: int | None
    status: JobStatus
    timed_out: bool = False
    dropped: int = 0

    @property
    def truncated(self) -> bool:
        """Whether output was dropped."""
        return self.dropped > 0


@attrs.frozen
class BashTask:
    """A background job just started. Its owner is read with ``ShellExecutor.owner_of``."""

    id: str
    command: str
    pid: int


@attrs.frozen
class JobOutput:
    """One incremental read of a background job.

    Attributes:
        job_id: the job.
        output: what it wrote since the previous read (merged stdout and stderr).
        status: where the job is now.
        exit_code: the exit status once it ended, else ``None``.
        dropped: bytes written since the previous read that the output cap dropped (the
            oldest ones); ``truncated`` says whether there were any.
        timed_out: whether its timeout killed it.
    """

    job_id: str
    output: str
    status: JobStatus
    exit_code: int | None
    dropped: int = 0
    timed_out: bool = False

    @property
    def truncated(self) -> bool:
        """Whether output was dropped since the previous read."""
        return self.dropped > 0


@attrs.frozen
class JobDone:
    """A background job ended (emitted once per job, never after the executor's disposal).

    It carries no owner: ``ShellExecutor.owner_of(job_id)`` is the one read path of
    ownership, so a listener on the bus learns nothing it could not ask the executor.
    """

    job_id: str
    exit_code: int | None
    status: JobStatus
