"""What the shell executor adds to a snapshot of the ownership tree (``ctx.snapshot()``).

Rules:
- The executor is the ``shell`` service; the kernel shows its fiber, and these records are
  the ``details`` of its service entry (the kernel's ``Describer`` protocol): the background
  jobs still running, each with its owner, and how many foreground runs are in flight.
- Plain data, read synchronously: frozen attrs records that ``cattrs`` unstructures to JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal, Protocol, final

import attrs

if TYPE_CHECKING:
    from ._child import Child
    from ._types import ShellExecSpec


@final
@attrs.frozen
class JobSnapshot:
    """A running background job.

    Attributes:
        id: the job's id (``bash-3``).
        command: the command line.
        pid: the process id of its shell (or of the supervisor that runs it).
        owner: the owner token it was started with (the agent's id), or ``None``.
        running_for: seconds since it started.
    """

    id: str
    command: str
    pid: int
    owner: str | None
    running_for: float


@final
@attrs.frozen
class ShellSnapshot:
    """The executor at the instant of the snapshot.

    Attributes:
        kind: ``"shell"``, so a record unstructured to JSON says what it is.
        jobs: its running background jobs, oldest first.
        foreground: how many foreground runs are in flight.
    """

    jobs: tuple[JobSnapshot, ...] = ()
    foreground: int = 0
    kind: Literal["shell"] = "shell"


class _Running(Protocol):
    """A process as the executor keeps it (``_local._Process``)."""

    @property
    def job_id(self) -> str | None: ...
    @property
    def since(self) -> float: ...
    @property
    def spec(self) -> ShellExecSpec: ...
    @property
    def process(self) -> Child: ...


def describe_shell(running: Iterable[_Running], now: float) -> ShellSnapshot:
    """The record of an executor whose processes in flight are ``running``."""
    jobs: list[JobSnapshot] = []
    foreground = 0
    for proc in running:
        if proc.job_id is None:
            foreground += 1
            continue
        jobs.append(
            JobSnapshot(
                id=proc.job_id,
                command=proc.spec.command,
                pid=proc.process.pid,
                owner=proc.spec.owner,
                running_for=now - proc.since,
            )
        )
    return ShellSnapshot(tuple(jobs), foreground)
