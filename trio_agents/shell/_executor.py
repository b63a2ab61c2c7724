"""``ShellExecutor``: the Service Definition of the service ``shell``.

Rules (every provider keeps them; ``LocalShell`` is the reference provider):
- ``resolve`` turns a request into a spec of explicit values, or raises
  :class:`ShellRequestError`; nothing runs.
- ``run`` runs in the caller's task to completion; a timeout kills the process group and
  returns (``timed_out=True``); a cancelled caller kills the process group, awaits its exit and
  re-raises.
- ``start`` returns a :class:`BashTask` at once; the job is owned by the executor (not by the
  caller); ids are ``bash-1``, ``bash-2``, ... unique per executor.
- Ownership: ``owner_of`` is the one read path for the opaque token of ``spec.owner``. It is
  kept after the job ended, for as long as the executor lives.
- ``on_job_done`` listeners are owned by the *calling* fiber (an entry of its stack). They run
  in the executor's task, once per job, never after the executor began its disposal.
- Disposal kills every process group (foreground and background) and awaits its exit.
- Child processes get no stdin.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Final

from ..kernel import Entry, ServiceKey
from ._types import BashTask, JobDone, JobOutput, ShellExecRequest, ShellExecSpec, ShellResult

#: A synchronous ``on_job_done`` listener.
JobListener = Callable[[JobDone], object]


class ShellExecutor(abc.ABC):
    """Runs shell commands in the foreground and as background jobs (service ``shell``)."""

    @property
    def sandbox(self) -> str | None:
        """The sandbox policy commands run under (``read-only``, ``workspace-write``), or
        ``None``: no sandbox. A spec with ``sandboxed=False`` runs outside it."""
        return None

    @abc.abstractmethod
    def resolve(self, request: ShellExecRequest) -> ShellExecSpec:
        """Resolve ``request`` into explicit values.

        Raises:
            ShellRequestError: the request cannot be honoured (the message says why).
        """

    @abc.abstractmethod
    async def run(self, spec: ShellExecSpec) -> ShellResult:
        """Run ``spec`` to completion in the caller's task.

        Raises:
            trio.Cancelled: the caller was cancelled; the process group was killed first.
            trio.ClosedResourceError: the executor is closed.
        """

    @abc.abstractmethod
    async def start(self, spec: ShellExecSpec) -> BashTask:
        """Start ``spec`` as a background job owned by the executor; return at once.

        Raises:
            trio.ClosedResourceError: the executor is closed.
        """

    @abc.abstractmethod
    def owner_of(self, job_id: str) -> str | None:
        """The owner token the job was started with (``None``: unowned).

        Raises:
            JobNotFoundError: no such job.
        """

    @abc.abstractmethod
    def read_output(self, job_id: str) -> JobOutput:
        """The job's output since the previous read, and its status.

        Raises:
            JobNotFoundError: no such job.
        """

    @abc.abstractmethod
    async def kill(self, job_id: str) -> bool:
        """Stop the job's process group and await its exit.

        Returns:
            Whether the job was still running (``False``: it had ended already).

        Raises:
            JobNotFoundError: no such job.
        """

    @abc.abstractmethod
    def on_job_done(self, listener: JobListener) -> Entry:
        """Call ``listener(JobDone)`` when a background job ends, while the calling fiber
        is loaded.

        Returns:
            The calling fiber's entry; closing it removes the listener.
        """


#: The key of the ``shell`` service (provided by :class:`LocalShell`).
SHELL: Final[ServiceKey[ShellExecutor]] = ServiceKey("shell")
