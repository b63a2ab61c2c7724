"""What the instrumentation points read of the runtime's objects, as protocols: the
tracing package knows models, tool answers and shell processes by these alone."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Protocol, TypeVar

RequestT = TypeVar("RequestT", contravariant=True)
EventT = TypeVar("EventT", covariant=True)


class StreamingModel(Protocol[RequestT, EventT]):
    """What :func:`chat` needs of a model: ``trio_agents.model.Model`` is one."""

    @property
    def name(self) -> str: ...

    def stream(self, request: RequestT, /) -> AsyncGenerator[EventT, None]: ...


class ToolAnswer(Protocol):
    """The handle :func:`execute_tool` gives: tell it how the call was answered."""

    def answered(self, is_error: bool, content: str) -> None:
        """Record the tool's answer (its content only with ``capture_content``)."""


class _Child(Protocol):
    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...


class _Spec(Protocol):
    @property
    def command(self) -> str: ...

    @property
    def owner(self) -> str | None: ...


class ShellJob(Protocol):
    """What :func:`shell_job` reads of a shell process (the local shell's driver record)."""

    @property
    def job_id(self) -> str | None: ...

    @property
    def process(self) -> _Child: ...

    @property
    def spec(self) -> _Spec: ...

    @property
    def status(self) -> object: ...
