"""A process for the crash-loop test to SIGKILL: agents on a JSONL store, turn after turn.

Usage: ``python crash_worker.py STORE_DIR AGENTS MARKER``. Every agent ``a0`` …
``a{AGENTS-1}`` is resumed when stored (the crash repair path) or created, then takes prompt
after prompt, all agents at once. Every third prompt is ``!bash sleep 0.05 # MARKER``, which
the echo model turns into a real shell job, so kills land inside tool calls and jobs too.
After a turn has ended (its ``TurnEnded`` is flushed before the agent goes idle) the line
``<id> <n>`` goes to stdout: the parent's record of what is durable.
"""

from __future__ import annotations

import sys

import trio

import trio_agents.agent as ag
from trio_agents.session import JsonlStore, UserMessage


def prompt(agent_id: str, n: int, marker: str) -> str:
    if n % 3 == 0:
        return f"!bash sleep 0.05 # {marker} {agent_id} {n}"
    return f"{agent_id} {n}"


async def drive(agents: ag.AgentRegistry, agent_id: str, marker: str) -> None:
    if await agents.store.is_stored(agent_id):
        agent = (await agents.resume(agent_id)).agent
    else:
        agent = (await agents.create(session_id=agent_id)).agent
    n = sum(isinstance(r, UserMessage) for r in agent.session.records)
    while True:
        n += 1
        agent.prompt(prompt(agent_id, n, marker))
        await agent.when_idle()
        sys.stdout.write(f"{agent_id} {n}\n")
        sys.stdout.flush()


async def main(directory: str, count: int, marker: str) -> None:
    async with ag.open_runtime(store=JsonlStore(directory)) as root:
        agents: ag.AgentRegistry = root.get("agents")
        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(drive, agents, f"a{i}", marker)


if __name__ == "__main__":
    trio.run(main, sys.argv[1], int(sys.argv[2]), sys.argv[3])
