"""What hooks cost a turn: tool turns with ten no-op hooks against tool turns with none.

A turn is :mod:`bench_tools`' tool turn (``agent.prompt(text)`` then ``await
agent.when_idle()``: a model request that calls a trivial ``echo`` tool, the call, and a
second request that answers with its output). One runtime has no hook; the other has ten
no-op hooks spread over the points such a turn passes: one at ``prompt_accepted`` (a plain
function), one at ``turn_start``, two at ``pre_model`` and two at ``post_model`` (each runs
twice a turn), one at ``pre_tool``, one at ``post_tool`` and two at ``turn_end``: fourteen
hook runs per turn. The hooks have the default timeout (``None``: no cancel scope); a third
side gives each a 10 s timeout, so each run pays a cancel scope (reported, no goal). Rounds
are interleaved and the best of each side kept. Goal (issue #39): a turn with the ten
default hooks costs at most 1.2x a turn without hooks.
"""

from __future__ import annotations

import trio

import trio_agents as ta
from trio_agents.agent import HOOKS
from trio_agents.agent._hook_points import HOOK_POINTS
from trio_agents.kernel import Context

from ._common import best_rates, line
from .bench_tools import _EchoTool, echo, tool_turns

ROUNDS = 7
TURNS = 200

#: Where the ten hooks go: (point, how many).
PLACES = (
    ("prompt_accepted", 1),
    ("turn_start", 1),
    ("pre_model", 2),
    ("post_model", 2),
    ("pre_tool", 1),
    ("post_tool", 1),
    ("turn_end", 2),
)


def _nothing(event: object) -> None:
    return None


async def _nothing_async(event: object) -> None:
    return None


class _NoOpHooks:
    """Adds the ten no-op hooks of :data:`PLACES` on its own fiber."""

    name = "bench-no-op-hooks"
    inject = ("hooks",)

    def __init__(self, timeout: float | None = None) -> None:
        self.timeout = timeout

    async def apply(self, ctx: Context, config: None) -> None:
        hooks = ctx.service(HOOKS)
        for point, count in PLACES:
            fn = _nothing if HOOK_POINTS[point].sync else _nothing_async
            for _ in range(count):
                await hooks.add(point, fn, timeout=self.timeout)


async def measure(rounds: int = ROUNDS, turns: int = TURNS) -> dict[str, float]:
    """Best-of-``rounds`` rates of tool turns without and with ten hooks, and the ratio."""

    async def turns_in_a_runtime(n: int, *, hooks: bool, limit: float | None = None) -> float:
        # A runtime per round and side (set up outside the timed loop): one task can be
        # in only one runtime's fibers.
        async with ta.open_runtime(store=ta.MemoryStore()) as root:
            await root.plugin(_EchoTool(echo))
            if hooks:
                await root.plugin(_NoOpHooks(limit))
                assert sum(len(root.service(HOOKS).at(p)) for p in HOOK_POINTS.values()) == 10
            return await tool_turns(root, n)

    async def without(n: int) -> float:
        return await turns_in_a_runtime(n, hooks=False)

    async def with_hooks(n: int) -> float:
        return await turns_in_a_runtime(n, hooks=True)

    async def with_timed_hooks(n: int) -> float:
        return await turns_in_a_runtime(n, hooks=True, limit=10.0)

    rates = await best_rates(
        [("bare", without), ("hooked", with_hooks), ("timed", with_timed_hooks)], rounds, turns
    )
    return {
        "bare": rates["bare"],
        "hooked": rates["hooked"],
        "timed": rates["timed"],
        "hooked_cost": rates["bare"] / rates["hooked"],
        "timed_cost": rates["bare"] / rates["timed"],
    }


def main() -> dict[str, float]:
    """Measure and print; returns the figures."""
    r = trio.run(measure)
    print(
        f"hooks, tool turns with 10 no-op hooks vs none, MemoryStore (best of {ROUNDS} x {TURNS}):"
    )
    print(line("tool turn, no hook:", r["bare"]))
    print(line("tool turn, 10 no-op hooks (14 runs a turn):", r["hooked"]))
    print(line("tool turn, the same 10 hooks, each with a 10 s timeout:", r["timed"]))
    goal = "met" if r["hooked_cost"] <= 1.2 else "NOT MET"
    print(f"  ratio: a hooked turn costs {r['hooked_cost']:.2f}x a turn without (<= 1.2x: {goal})")
    print(f"  ratio: with timeouts (a cancel scope per run) {r['timed_cost']:.2f}x")
    return r


if __name__ == "__main__":
    main()
