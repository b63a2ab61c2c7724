"""A long conversation in a small window: 10,000 turns with ``echo?context_window=2000``.

The agent runs on the embedded echo model declared with a 2,000-token window and the
default compaction policy (``SummarizingCompactor``: compact over 80 % of the window, keep the
last three turns, summarize the rest with the agent's own model), on a :class:`MemoryStore`.
Every request the model receives is measured as the model counts it (the echo model's tokens
are words: the ``input_tokens`` it reports), the summary requests included, and the turns are
timed in blocks of 500. The figures: the largest request against the window, the number of
compactions, and the turn rate at the end of the run against the start (each the best of five
blocks, since a noisy neighbour only ever slows a block down). Compaction keeps the
conversation, and so a turn's cost, bounded however long the session grows, while every
record stays in the session (its size is printed too).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import aclosing

import attrs
import trio

import trio_agents as ta
from trio_agents.model import Finished, ModelEvent, ModelRequest, ScriptedModel
from trio_agents.session import Compacted

from ._common import line

WINDOW = 2000
TURNS = 10_000
BLOCK = 500
#: The rate of a part of the run is the best of this many blocks (a noisy neighbour only ever
#: makes a block slower), and the first part is compared with the last.
BEST_OF = 5


@attrs.define(eq=False)
class _Measured:
    """The echo model, keeping the largest request it was sent, in its own tokens."""

    inner: ScriptedModel
    name: str = "echo"
    largest: int = 0
    requests: int = 0

    @property
    def context_window(self) -> int | None:
        return self.inner.context_window

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests += 1
        async with aclosing(self.inner.stream(request)) as events:
            async for event in events:
                if isinstance(event, Finished):
                    self.largest = max(self.largest, event.usage.input_tokens)
                yield event


async def measure() -> dict[str, float]:
    """Drive one agent for ``TURNS`` turns; the sizes, counts and block rates."""
    inner = ta.model_from_spec(f"echo?context_window={WINDOW}")
    assert isinstance(inner, ScriptedModel)
    model = _Measured(inner)
    rates: list[float] = []
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        handle = await root.agents.create(model=model, instructions="Answer briefly.")
        agent = handle.agent
        for block in range(TURNS // BLOCK):
            start = time.perf_counter()
            for i in range(BLOCK):
                agent.prompt(f"message {block * BLOCK + i}: tell me about the weather today")
                await agent.when_idle()
            rates.append(BLOCK / (time.perf_counter() - start))
        records = agent.session.records
        await handle.dispose()
    return {
        "largest": model.largest,
        "requests": model.requests,
        "compactions": sum(isinstance(r, Compacted) for r in records),
        "records": len(records),
        "first": max(rates[:BEST_OF]),
        "last": max(rates[-BEST_OF:]),
        "flat": max(rates[:BEST_OF]) / max(rates[-BEST_OF:]),
    }


def main() -> None:
    """Measure and print."""
    r = trio.run(measure)
    print(
        f"a long conversation: {TURNS:,} turns on echo?context_window={WINDOW}, "
        f"default compaction, MemoryStore:"
    )
    print(line("largest request (the model's count):", r["largest"], "tokens"))
    print(line("context window:", WINDOW, "tokens"))
    print(line("model requests (turns + summaries):", r["requests"], ""))
    print(line("compactions:", r["compactions"], ""))
    print(line("session records (nothing removed):", r["records"], ""))
    part = f"best of {BEST_OF} blocks of {BLOCK:,}"
    print(line(f"turns, first {BEST_OF * BLOCK:,} ({part}):", r["first"]))
    print(line(f"turns, last {BEST_OF * BLOCK:,} ({part}):", r["last"]))
    print(f"  ratio: the largest request is {r['largest'] / WINDOW:.0%} of the window")
    print(f"  ratio: a turn at the end costs {r['flat']:.2f}x one at the start")


if __name__ == "__main__":
    main()
