"""Parts the stress-style tests share: a model that calls a tool on cue, and that tool."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import attrs
import trio
import trio.lowlevel

import trio_agents.agent as ag
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    ToolOutput,
)

#: The agents each fiber of the ``stress_owner`` plugin made: fiber id -> (agent, child).
OWNED: dict[str, tuple[ag.Agent, ag.Agent]] = {}


@attrs.frozen
class NapArgs:
    seconds: float


async def _nap(call: ag.ToolContext, args: NapArgs) -> str:
    await trio.sleep(args.seconds)
    return "rested"


def nap_tool() -> ag.Tool:
    """``nap``: sleep ``seconds`` of trio time."""
    return ag.Tool("nap", "Sleep a little.", NapArgs, _nap)


@attrs.define
class Mood:
    """A model that calls ``nap`` first when the prompt says ``nap``, then echoes the prompt
    word by word, with a checkpoint per word and ``delay`` seconds before each answer."""

    delay: float = 0.001
    name: str = "mood"
    calls: int = 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        last = request.messages[-1]
        await trio.sleep(self.delay)
        if not isinstance(last, ToolOutput) and "nap" in last.content:
            self.calls += 1
            yield ToolCallRequested(f"nap-{self.calls}", "nap", {"seconds": 0.01})
            yield Finished(FinishReason.TOOL_CALLS)
            return
        for word in last.content.split():
            await trio.lowlevel.checkpoint()
            yield TextDelta(word + " ")
        yield Finished(FinishReason.STOP)
