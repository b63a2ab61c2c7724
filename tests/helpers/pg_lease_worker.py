"""A worker process for the lease-loss test: one agent on a shared PostgreSQL store.

Usage: ``python pg_lease_worker.py DSN SESSION_ID MODE LEASE_SECONDS``. Once its runtime is up
it prints ``ready``; MODE is

- ``hold``: wait for a line ``go`` on stdin, resume SESSION_ID, print ``entered``, start a turn
  whose model call waits an hour, and print ``turn`` once its ``TurnStarted`` is flushed;
- ``takeover``: resume SESSION_ID, trying again every 20 ms while another worker holds it,
  then print ``resumed``.

Every model call prints ``model call N``; the runtime's events print ``lost <error>``
(``SessionWriteFailed``), ``cancel <cause>`` (``AgentCancelRequested``) and ``disposed <id>``
(``AgentDisposed``). Then it serves stdin: ``prompt`` sends the agent a prompt (``queued``, or
``refused <message>``), ``calls`` prints ``calls N``; end of input ends the runtime.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator

import attrs
import trio

import trio_agents.agent as ag
from trio_agents.model import ModelEvent, ModelRequest, ScriptedModel
from trio_agents.session import (
    PostgresStore,
    SessionAppended,
    SessionWriteFailed,
    TurnStarted,
)


def say(line: str) -> None:
    sys.stdout.write(line.replace("\n", " ") + "\n")
    sys.stdout.flush()


@attrs.define(eq=False)
class Counted:
    """The echo model, waiting an hour before it answers; it says when a call starts."""

    name: str = "counted"
    context_window: int | None = None
    calls: int = 0
    inner: ScriptedModel = attrs.field(factory=lambda: ScriptedModel.echo(delay=3600))

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.calls += 1
        say(f"model call {self.calls}")
        async for event in self.inner.stream(request):
            yield event


async def resume(agents: ag.AgentRegistry, session_id: str, retry: bool) -> ag.Agent:
    with trio.fail_after(30):
        while True:
            try:
                return (await agents.resume(session_id)).agent
            except ag.AgentIdInUseError:
                if not retry:
                    raise
                await trio.sleep(0.02)  # polling another process's lease: no event exists


async def lines(stdin: trio.abc.ReceiveStream) -> AsyncGenerator[str, None]:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            data = await stdin.receive_some(1024)
            if not data:
                return
            buffer += data
        line, buffer = buffer.split(b"\n", 1)
        yield line.decode().strip()


async def main(dsn: str, session_id: str, mode: str, lease: float) -> None:
    store = PostgresStore(dsn, lease_seconds=lease, renew_every=lease / 5)
    model = Counted()
    commands = lines(trio.lowlevel.FdStream(0))
    async with ag.open_runtime(store=store, model=model) as root:
        root.on(SessionWriteFailed, lambda event: say(f"lost {event.error}"))
        root.on(ag.AgentCancelRequested, lambda event: say(f"cancel {event.cause!r}"))
        root.on(ag.AgentDisposed, lambda event: say(f"disposed {event.agent_id}"))
        agents: ag.AgentRegistry = root.get("agents")
        say("ready")
        if mode == "hold":
            async for command in commands:
                if command == "go":
                    break
        agent = await resume(agents, session_id, retry=mode == "takeover")
        await agents.store.flush(agent.session)
        say("entered" if mode == "hold" else "resumed")
        if mode == "hold":
            started = trio.Event()

            def on_append(event: SessionAppended) -> None:
                if isinstance(event.record, TurnStarted):
                    started.set()

            root.on(SessionAppended, on_append)
            agent.prompt("a turn that never ends")
            await started.wait()
            await agents.store.flush(agent.session)
            say("turn")
        async for command in commands:
            if command == "prompt":
                try:
                    agent.prompt("after the loss")
                except ag.AgentClosedError as exc:
                    say(f"refused {exc}")
                else:
                    say("queued")
            elif command == "calls":
                say(f"calls {model.calls}")


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
