"""Tool turns per second (model -> tool -> model) against plain turns, in the same run.

A tool turn is ``agent.prompt(text)`` then ``await agent.when_idle()`` on a constant-cost model
that answers a user message with one call of a trivial async ``echo`` tool (a ``@tool`` with
one ``str`` argument, validated as every call is) and answers the tool's output with its text:
two model requests, one tool call and the records of both steps. Its reference is the plain
turn of :mod:`bench_agents` (one request, no tool) on the same runtime, rounds interleaved, so
the ratio is what the tool step adds; the raw-trio floor of the same model -> tool -> model
exchange (a task that receives the message, awaits the tool function and appends the seven
records to a list) is measured beside it. Goal: a tool turn at least 0.5x the plain turn rate.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator

import trio

import trio_agents as ta
from trio_agents.agent import Tool, ToolContext, tool
from trio_agents.kernel import Context
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    ToolOutput,
    Usage,
)

from ._common import best_rates, drive_raw, line
from .bench_agents import agent_turns

ROUNDS = 7
TURNS = 200


async def _echo_text(text: str) -> str:
    await trio.lowlevel.checkpoint()
    return text


@tool
async def echo(ctx: ToolContext, text: str) -> str:
    """Answer with the text.

    Args:
        text: what to answer with.
    """
    return await _echo_text(text)


class _Caller:
    """Calls ``echo`` on a user message, answers a tool output with its text."""

    name = "bench-tool-caller"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        await trio.lowlevel.checkpoint()
        last = request.messages[-1]
        if isinstance(last, ToolOutput):
            yield TextDelta(last.content)
            yield Finished(FinishReason.STOP, Usage())
            return
        yield ToolCallRequested("call-1", "echo", {"text": last.content})
        yield Finished(FinishReason.TOOL_CALLS, Usage())


class _EchoTool:
    """Registers the ``echo`` tool on its own fiber."""

    name = "bench-echo-tool"
    inject = ("tools",)

    def __init__(self, tool: Tool) -> None:
        self._tool = tool

    async def apply(self, ctx: Context, config: None) -> None:
        ctx.tools.register(self._tool)


async def tool_turns(root: Context, turns: int) -> float:
    """Seconds for ``turns`` prompt + when_idle rounds whose turn calls the echo tool once."""
    handle = await root.agents.create(model=_Caller())
    agent = handle.agent
    try:
        start = time.perf_counter()
        for i in range(turns):
            agent.prompt(f"hello {i}")
            await agent.when_idle()
        elapsed = time.perf_counter() - start
        assert agent.session.statistics().records >= 9 * turns, "the tool never ran"
        return elapsed
    finally:
        await handle.dispose()


async def _raw_tool_agent(
    inbox: trio.MemoryReceiveChannel[str],
    replies: trio.MemorySendChannel[str],
    records: list[tuple[str, ...]],
) -> None:
    async for message in inbox:
        records.append(("inbox", message))
        records.append(("turn-started",))
        records.append(("user", message))
        records.append(("assistant", "", "echo"))
        output = await _echo_text(message)
        records.append(("tool", str(output)))
        records.append(("assistant", str(output)))
        records.append(("turn-ended", "completed"))
        await replies.send(str(output))


async def raw_tool_turns(turns: int) -> float:
    """Seconds for ``turns`` message -> tool -> reply rounds with a raw trio task."""
    return await drive_raw(_raw_tool_agent, turns)


async def measure(rounds: int = ROUNDS, turns: int = TURNS) -> dict[str, float]:
    """Best-of-``rounds`` rates of raw tool turns, plain turns and tool turns, and ratios."""
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        await root.plugin(_EchoTool(echo))

        async def plain(n: int) -> float:
            return await agent_turns(root, n)

        async def tools(n: int) -> float:
            return await tool_turns(root, n)

        rates = await best_rates(
            [("raw", raw_tool_turns), ("plain", plain), ("tool", tools)], rounds, turns
        )
    return {
        "tool_raw": rates["raw"],
        "plain": rates["plain"],
        "tool": rates["tool"],
        "tool_vs_plain": rates["tool"] / rates["plain"],
        "tool_ratio_raw": rates["raw"] / rates["tool"],
    }


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(f"tool turns, model -> echo tool -> model, MemoryStore (best of {ROUNDS} x {TURNS}):")
    print(line("raw trio floor (channel in, tool awaited, 7 records):", r["tool_raw"]))
    print(line("trio_agents plain turn (no tool):", r["plain"]))
    print(line("trio_agents tool turn (prompt + when_idle):", r["tool"]))
    print(f"  ratio: a tool turn runs at {r['tool_vs_plain']:.2f}x the plain turn rate")
    print(f"  ratio: a tool turn costs {r['tool_ratio_raw']:.1f}x its raw floor")
    return r


if __name__ == "__main__":
    main()
