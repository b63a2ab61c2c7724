"""The official ACP client (the ``agent-client-protocol`` package, on asyncio) driving the
installed ``trio-agents acp`` command: a recorder of its updates and the process it spawns."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest

from tests.helpers.support import TRIO_AGENTS

acp = pytest.importorskip("acp")
from acp.connection import StreamEvent  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
)

T = TypeVar("T")


# Safety net only: every wait below ends on an event, this bounds a broken run.
LIMIT = 30.0


class Recorder:
    """The client side: records every update, answers permission requests by policy."""

    def __init__(self, permission: str | None = "allow_once") -> None:
        self.permission = permission
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[Any] = []
        self.changed = asyncio.Event()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(tool_call)
        if self.permission is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = next(o for o in options if o.kind == self.permission)
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    def texts(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text for s, u in self.updates if s == session_id and u.session_update == kind
        )

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self.changed.clear()
            await self.changed.wait()


class Wire:
    """The frames each way, in the order they passed (an observer of the connection)."""

    def __init__(self) -> None:
        self.incoming: list[dict[str, Any]] = []
        self.outgoing: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    def __call__(self, event: StreamEvent) -> None:
        side = self.incoming if event.direction.value == "incoming" else self.outgoing
        side.append(event.message)
        self._changed.set()

    async def wait_sent(self, method: str, count: int = 1) -> None:
        """Wait until ``count`` frames of ``method`` were written to the agent."""
        while sum(m.get("method") == method for m in self.outgoing) < count:
            self._changed.clear()
            await self._changed.wait()


@asynccontextmanager
async def agent_process(
    recorder: Recorder, *args: str, wire: Wire | None = None
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    async with acp.spawn_agent_process(
        recorder,
        str(TRIO_AGENTS),
        "acp",
        *args,
        transport_kwargs={"stderr": None},
        # The client's default environment drops PYTHONPATH (and the rest): pass the test's
        # own, so the subprocess runs the code under test with the test's settings.
        env=dict(os.environ),
        observers=[wire] if wire is not None else None,
    ) as (conn, process):
        await conn.initialize(protocol_version=1)
        yield conn, process


def run(main: Callable[[], Awaitable[T]]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(main(), LIMIT)

    return asyncio.run(bounded())
