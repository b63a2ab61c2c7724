"""A process for the SIGKILL-mid-task test: a parent agent whose ``task`` child is streaming.

Usage: ``python task_worker.py STORE_DIR``. The parent ``p`` (echo model, ``!tool task``)
starts a child from the definition ``slow`` (a slow echo); once the child's turn is running
and both sessions are flushed, the line ``ready <child id>`` goes to stdout, and the process
waits to be killed.
"""

from __future__ import annotations

import json
import sys

import trio

import trio_agents.agent as ag
from trio_agents.session import JsonlStore

PROMPT = " ".join(f"w{i}" for i in range(200))


async def main(directory: str) -> None:
    store = JsonlStore(directory)
    async with ag.open_runtime(store=store) as root:
        await root.agents.define("slow", description="slow echo", model="echo?delay=0.05")
        parent = (
            await root.agents.create(
                "echo", session_id="p", tools=["task", "task_output", "task_cancel"]
            )
        ).agent
        parent.prompt("!tool task " + json.dumps({"agent": "slow", "prompt": PROMPT}))
        while not parent.children or parent.children[0].statistics().running_turn is None:  # noqa: ASYNC110 (a real process, no event to wait on)
            await trio.sleep(0.01)
        (child,) = parent.children
        await trio.sleep(0.2)  # a few words streamed
        await store.flush(parent.session)
        await store.flush(child.session)
        sys.stdout.write(f"ready {child.id}\n")
        sys.stdout.flush()
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
