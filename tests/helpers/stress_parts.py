"""Parts the stress-style tests share: a model that misbehaves on cue, and its tools.

The cues are words in the prompt: ``nap`` calls the ``nap`` tool first, ``stubborn`` calls a
tool that ignores cancellation for a while, ``fail`` makes the model raise ``ModelError``,
``hang`` makes it wait forever (only a cancel or a dispose ends that turn). Otherwise it
echoes the prompt word by word.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import attrs
import trio
import trio.lowlevel

import trio_agents.agent as ag
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelError,
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


async def _stubborn(call: ag.ToolContext, args: NapArgs) -> str:
    with trio.CancelScope(shield=True):  # a tool that ignores cancellation for a while
        await trio.sleep(args.seconds)
    return "done, whatever you said"


def stubborn_tool() -> ag.Tool:
    """``stubborn``: sleep ``seconds`` of trio time, shielded from cancellation."""
    return ag.Tool("stubborn", "Sleep, deaf to cancellation.", NapArgs, _stubborn)


def tools() -> tuple[ag.Tool, ...]:
    """Every tool :class:`Mood` may call."""
    return nap_tool(), stubborn_tool()


@attrs.define
class Mood:
    """A model that calls ``nap`` first when the prompt says ``nap``, then echoes the prompt
    word by word, with a checkpoint per word and ``delay`` seconds before each answer."""

    delay: float = 0.001
    name: str = "mood"
    context_window: int | None = None
    calls: int = 0

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        last = request.messages[-1]
        await trio.sleep(self.delay)
        cue = "" if isinstance(last, ToolOutput) else last.content
        if "fail" in cue:
            raise ModelError("the model failed on cue")
        if "hang" in cue:
            await trio.sleep_forever()
        for tool in ("nap", "stubborn"):
            if tool in cue:
                self.calls += 1
                yield ToolCallRequested(f"{tool}-{self.calls}", tool, {"seconds": 0.01})
                yield Finished(FinishReason.TOOL_CALLS)
                return
        for word in last.content.split():
            await trio.lowlevel.checkpoint()
            yield TextDelta(word + " ")
        yield Finished(FinishReason.STOP)
