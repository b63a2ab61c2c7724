"""Agent turns per second and agent create + dispose per second, against raw-trio floors.

A turn is ``agent.prompt(text)`` then ``await agent.when_idle()`` on a constant-cost echo model
(``ScriptedModel.echo()`` counts the words of every message for its usage figures, which would
make the model itself linear in the history) with a :class:`MemoryStore`, so no I/O and no
model latency: what is left is the runtime's own
cost of a turn (inbox, phase machine, cause scope, model stream, the five session records and
their events). The floor does the least a trio program needs for the same observable effect:
a long-lived task receives the message from a memory channel, builds the echo reply, appends
five records to a list and hands the reply back on a second channel that the caller awaits.
The turns are timed on a fresh agent and on agents that already hold 10,000 and 100,000
session records (2,000 and 20,000 earlier turns of five records each, run untimed through the
same agent), because a turn's cost must not grow with the length of the session: the model
history is folded in from new records only, the request's messages are a view rather than a
copy, and the tool specs are cached (issue #11; the goal is at most 1.3x the fresh turn after
100,000 records). Create + dispose is
``root.agents.create()`` + ``handle.dispose()``; its floor is the fiber benchmark's raw floor
(``nursery.start`` of a child with a three-effect ``AsyncExitStack``, then cancel), and it is
also compared with a plain fiber apply + dispose, since an agent is a fiber with a session, an
inbox and a loop task. Every side runs in one ``trio.run``, rounds interleaved; each figure is
the best of several rounds.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import trio

import trio_agents as ta
from trio_agents.kernel import Context
from trio_agents.model import Finished, FinishReason, ModelEvent, ModelRequest, TextDelta, Usage

from . import bench_fibers
from ._common import best_rates, drive_raw, line

ROUNDS = 5


class Echo:
    """Answers with the newest message in one delta: the same cost at every history length."""

    name = "bench-echo"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        await trio.lowlevel.checkpoint()
        yield TextDelta(request.messages[-1].content)
        yield Finished(FinishReason.STOP, Usage())


TURNS = 200
LONG_RECORDS = (10_000, 100_000)
CREATES = 500


async def _timed_turns(agent: ta.Agent, turns: int) -> float:
    start = time.perf_counter()
    for i in range(turns):
        agent.prompt(f"hello {i}")
        await agent.when_idle()
    return time.perf_counter() - start


async def agent_turns(root: Context, turns: int) -> float:
    """Seconds for ``turns`` prompt + when_idle rounds on a fresh echo agent."""
    handle = await root.agents.create(model=Echo())
    try:
        return await _timed_turns(handle.agent, turns)
    finally:
        await handle.dispose()


async def grown_agent(root: Context, records: int) -> ta.AgentHandle:
    """An echo agent whose session holds at least ``records`` records, from real turns."""
    handle: ta.AgentHandle = await root.agents.create(model=Echo())
    agent = handle.agent
    i = 0
    while agent.session.statistics().records < records:
        agent.prompt(f"warm {i}")
        await agent.when_idle()
        i += 1
    return handle


async def raw_agent(
    inbox: trio.MemoryReceiveChannel[str],
    replies: trio.MemorySendChannel[str],
    records: list[tuple[str, ...]],
) -> None:
    async for message in inbox:
        records.append(("inbox", message))
        records.append(("turn-started",))
        records.append(("user", message))
        reply = str(message)
        records.append(("assistant", reply))
        records.append(("turn-ended", "completed"))
        await replies.send(reply)


async def raw_turns(turns: int) -> float:
    """Seconds for ``turns`` message -> reply rounds with a raw trio task and two channels."""
    return await drive_raw(raw_agent, turns)


async def agent_create_dispose(root: Context, iterations: int) -> float:
    """Seconds for ``iterations`` ``agents.create`` + ``handle.dispose`` rounds."""
    model = Echo()
    start = time.perf_counter()
    for _ in range(iterations):
        handle = await root.agents.create(model=model)
        await handle.dispose()
    return time.perf_counter() - start


async def measure() -> dict[str, float]:
    """Best-of-``ROUNDS`` rates of every side, and the ratios."""
    async with ta.open_runtime(store=ta.MemoryStore()) as root:

        async def turns(n: int) -> float:
            return await agent_turns(root, n)

        async def creates(n: int) -> float:
            return await agent_create_dispose(root, n)

        grown = [await grown_agent(root, n) for n in LONG_RECORDS]

        def on(handle: ta.AgentHandle) -> Callable[[int], Awaitable[float]]:
            async def long_turns(n: int) -> float:
                return await _timed_turns(handle.agent, n)

            return long_turns

        turn_rates = await best_rates(
            [
                ("raw", raw_turns),
                ("agent", turns),
                *((f"after {n}", on(h)) for n, h in zip(LONG_RECORDS, grown, strict=True)),
            ],
            ROUNDS,
            TURNS,
        )
        for handle in grown:
            await handle.dispose()
        create_rates = await best_rates(
            [
                ("raw", bench_fibers.raw_floor),
                ("fiber", bench_fibers.fibers),
                ("agent", creates),
            ],
            ROUNDS,
            CREATES,
        )
    return {
        "turn_raw": turn_rates["raw"],
        "turn_agent": turn_rates["agent"],
        "turn_ratio": turn_rates["raw"] / turn_rates["agent"],
        **{f"turn_{n}": turn_rates[f"after {n}"] for n in LONG_RECORDS},
        **{f"turn_{n}_ratio": turn_rates["agent"] / turn_rates[f"after {n}"] for n in LONG_RECORDS},
        "create_raw": create_rates["raw"],
        "create_fiber": create_rates["fiber"],
        "create_agent": create_rates["agent"],
        "create_ratio_raw": create_rates["raw"] / create_rates["agent"],
        "create_ratio_fiber": create_rates["fiber"] / create_rates["agent"],
    }


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(
        f"agent turns, constant-cost echo model, MemoryStore "
        f"(best of {ROUNDS} x {TURNS} on a fresh agent):"
    )
    print(line("raw trio floor (channel in, reply out, 5 records):", r["turn_raw"]))
    print(line("trio_agents agent (prompt + when_idle):", r["turn_agent"]))
    print(f"  ratio: a turn costs {r['turn_ratio']:.1f}x the raw floor")
    for n in LONG_RECORDS:
        print(f"agent turns after {n:,} earlier session records (best of {ROUNDS} x {TURNS}):")
        print(line("trio_agents agent (prompt + when_idle):", r[f"turn_{n}"]))
        print(f"  ratio: a turn costs {r[f'turn_{n}_ratio']:.2f}x a turn on a fresh agent")
    print(f"agent create+dispose, MemoryStore (best of {ROUNDS} x {CREATES}):")
    print(line("raw trio floor (nursery.start + AsyncExitStack):", r["create_raw"]))
    print(line("trio_agents fiber (ctx.plugin + dispose):", r["create_fiber"]))
    print(line("trio_agents agent (agents.create + dispose):", r["create_agent"]))
    print(f"  ratio: an agent costs {r['create_ratio_raw']:.1f}x the raw floor")
    print(f"  ratio: an agent costs {r['create_ratio_fiber']:.1f}x a fiber")
    return r


if __name__ == "__main__":
    main()
