"""A worker process for the PostgreSQL multi-process tests: one agent on a shared store.

Usage: ``python pg_worker.py DSN SESSION_ID MODE LEASE_SECONDS``. Once its runtime (and so
its store) is up it prints ``ready``; MODE is

- ``hold``: wait for a line ``go`` on stdin, then resume the stored session SESSION_ID once.
  Print ``refused <message>`` (and exit) if another worker holds it, else ``entered``, then
  start a turn that never ends by itself (the echo model waits an hour) and print ``turn``
  once its ``TurnStarted`` is flushed;
- ``takeover``: resume SESSION_ID, trying again every 20 ms while another worker holds it
  (for at most 30 s), then flush and print ``resumed <attempts>``.

Then both serve stdin: a line ``write`` queues a prompt and flushes it, printing ``flushed``
or ``refused <message>``; end of input ends the runtime (the session detaches, its lease is
released). Whenever the store reports a session write failure, ``lost <message>`` is printed.
A lost lease stops and disposes the agent (``LeaseLost``): a later ``write`` is refused. Should
the runtime still end with the lost lease's error, it prints ``ended <message>`` and exits
with status 3.
"""

from __future__ import annotations

import sys

import trio

import trio_agents.agent as ag
from trio_agents.model import ScriptedModel
from trio_agents.session import (
    PostgresStore,
    SessionAppended,
    SessionLeaseLostError,
    SessionWriteError,
    SessionWriteFailed,
    TurnStarted,
)


def say(line: str) -> None:
    sys.stdout.write(line.replace("\n", " ") + "\n")
    sys.stdout.flush()


async def resume(agents: ag.AgentRegistry, session_id: str, retry: bool) -> ag.Agent | None:
    attempts = 0
    with trio.fail_after(30):
        while True:
            attempts += 1
            try:
                agent = (await agents.resume(session_id)).agent
            except ag.AgentIdInUseError as exc:
                if not retry:
                    # The registry's error names the agent; the store's says who holds it.
                    say(f"refused {exc} ({exc.__context__})")
                    return None
                await trio.sleep(0.02)  # polling another process's lease: no event exists
                continue
            await agents.store.flush(agent.session)
            say("entered" if not retry else f"resumed {attempts}")
            return agent


async def serve(agents: ag.AgentRegistry, agent: ag.Agent, stdin: trio.abc.ReceiveStream) -> None:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            data = await stdin.receive_some(1024)
            if not data:
                return
            buffer += data
        line, buffer = buffer.split(b"\n", 1)
        if line.strip() == b"write":
            try:
                agent.prompt("written after")
            except ag.AgentClosedError as exc:  # a lost lease stopped the agent
                say(f"refused {exc}")
                continue
            try:
                await agents.store.flush(agent.session)
            except SessionWriteError as exc:
                say(f"refused {exc}")
            else:
                say("flushed")


async def main(dsn: str, session_id: str, mode: str, lease: float) -> None:
    store = PostgresStore(dsn, lease_seconds=lease, renew_every=lease / 5)
    stdin = trio.lowlevel.FdStream(0)
    async with ag.open_runtime(store=store, model=ScriptedModel.echo(delay=3600)) as root:
        root.on(SessionWriteFailed, lambda event: say(f"lost {event.error}"))
        agents: ag.AgentRegistry = root.get("agents")
        say("ready")
        if mode == "hold":
            buffer = b""
            while b"go\n" not in buffer:
                data = await stdin.receive_some(1024)
                if not data:
                    return
                buffer += data
        agent = await resume(agents, session_id, retry=mode == "takeover")
        if agent is None:
            return
        if mode == "hold":
            started = trio.Event()

            def on_append(event: SessionAppended) -> None:
                if event.session_id == session_id and isinstance(event.record, TurnStarted):
                    started.set()

            root.on(SessionAppended, on_append)
            agent.prompt("a turn that never ends")
            await started.wait()
            await agents.store.flush(agent.session)
            say("turn")
        await serve(agents, agent, stdin)


if __name__ == "__main__":
    try:
        trio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]))
    except* SessionLeaseLostError as group:
        # The lost session's final flush fails at teardown: the runtime ends with the error.
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        say(f"ended {leaf}")
        sys.exit(3)
