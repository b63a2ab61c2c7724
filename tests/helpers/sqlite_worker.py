"""A process that owns an SQLite session database, for the tests to race and to SIGKILL.

Usage:
- ``python sqlite_worker.py DB hold``: apply a ``SqliteStore(DB)``, print ``ready``, wait.
- ``python sqlite_worker.py DB turns AGENTS TURNS``: agents ``a0`` … ``a{AGENTS-1}`` each take
  ``TURNS - 1`` short turns (after each, its ``TurnEnded`` flushed, the line ``done <id> <n>``),
  then a last turn that lasts for minutes (a long prompt on ``echo?delay=...``); once its
  claimed prompt is flushed, the line ``started <id> <n>``. The parent SIGKILLs the process
  mid-turn when every agent has started its last turn.
"""

from __future__ import annotations

import sys

import trio

import trio_agents.agent as ag
from trio_agents.kernel import Context
from trio_agents.session import SessionAppended, SqliteStore, UserMessage

LONG = " ".join(["hold"] * 20_000)


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def hold(path: str) -> None:
    async with ag.open_runtime(store=SqliteStore(path)):
        say("ready")
        await trio.sleep_forever()


async def drive(root: Context, agent_id: str, turns: int) -> None:
    agents: ag.AgentRegistry = root.get("agents")
    agent = (await agents.create(session_id=agent_id)).agent
    for n in range(1, turns):
        agent.prompt(f"{agent_id} {n}")
        await agent.when_idle()
        say(f"done {agent_id} {n}")
    claimed = trio.Event()

    def on_append(event: SessionAppended) -> None:
        if event.session_id == agent_id and isinstance(event.record, UserMessage):
            claimed.set()

    root.on(SessionAppended, on_append)
    agent.prompt(LONG)
    await claimed.wait()
    await agents.store.flush(agent.session)
    say(f"started {agent_id} {turns}")


async def run_turns(path: str, count: int, turns: int) -> None:
    async with ag.open_runtime(store=SqliteStore(path), model="echo?delay=0.01") as root:
        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(drive, root, f"a{i}", turns)
        await trio.sleep_forever()


if __name__ == "__main__":
    if sys.argv[2] == "hold":
        trio.run(hold, sys.argv[1])
    else:
        trio.run(run_turns, sys.argv[1], int(sys.argv[3]), int(sys.argv[4]))
