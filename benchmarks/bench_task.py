"""Starting and ending a foreground child (issue #37): one ``task`` call against creating and
disposing an agent.

Three sides, interleaved, best of ``ROUNDS``, on a :class:`MemoryStore` and the instant echo
model: ``create``+``dispose`` of an agent (the goal's yardstick); ``create``, one ``ask`` and
``dispose`` (the same work a child does, without the tool); and one ``task`` call of a parent,
invoked through the tools registry as a turn calls it: the child created under the parent, its
answer, its disposal and the parent's two records of it. The goal: the ``task`` call at most
2x ``create``+``dispose``.
"""

from __future__ import annotations

import time

import trio

import trio_agents as ta

from ._common import best_rates, line

ROUNDS = 5
ITERATIONS = 300


async def _run() -> dict[str, float]:
    async with ta.open_runtime(store="memory") as root:
        await root.agents.define("echoer", description="echoes", model="echo")
        parent = (await root.agents.create("echo", tools=["task"])).agent
        arguments = {"agent": "echoer", "prompt": "hello"}

        async def create_dispose(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                handle = await root.agents.create("echo")
                await handle.dispose()
            return time.perf_counter() - start

        async def create_ask_dispose(n: int) -> float:
            start = time.perf_counter()
            for _ in range(n):
                handle = await root.agents.create("echo", parent=parent)
                await handle.agent.ask("hello")
                await handle.dispose()
            return time.perf_counter() - start

        async def task_call(n: int) -> float:
            start = time.perf_counter()
            for i in range(n):
                result = await root.tools.invoke("task", arguments, parent, call_id=f"c{i}")
                assert not result.is_error, result.content
            return time.perf_counter() - start

        rates = await best_rates(
            [
                ("create_dispose", create_dispose),
                ("create_ask_dispose", create_ask_dispose),
                ("task", task_call),
            ],
            ROUNDS,
            ITERATIONS,
        )
    return rates


def main() -> dict[str, float]:
    """Print the figures; return them (and the ratio) for the table."""
    rates = trio.run(_run)
    ratio = rates["create_dispose"] / rates["task"]
    print("task: a foreground child started and ended, against an agent made and disposed")
    print(line("create + dispose an agent", rates["create_dispose"]))
    print(line("create + ask + dispose a child agent", rates["create_ask_dispose"]))
    print(line("task call (child created, asked, disposed, recorded)", rates["task"]))
    verdict = "met" if ratio <= 2 else "NOT MET"
    print(f"  task call costs {ratio:.2f}x create+dispose (goal <= 2x): {verdict}")
    return {**rates, "task_vs_create": ratio}


if __name__ == "__main__":
    main()
