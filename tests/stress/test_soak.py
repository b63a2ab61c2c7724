"""Many agents under random work for a bounded time; then nothing is left and nothing broke.

Hundreds (``nox -s stress``: 1,000) of agents on one runtime take random prompts, steers,
cancels, tool calls (one that sleeps, one deaf to cancellation for a while), a model that
raises or hangs on cue, child agents and disposes, driven by a seeded
``random.Random`` in real time until the budget runs out. Then every agent is disposed and
the runtime closed.

Invariants: every ``AgentCreated`` has one ``AgentDisposed``; in every session each
``TurnStarted`` has exactly one ``TurnEnded`` and ``seq`` is contiguous; the prompts of each
agent were taken in the order they were sent; open file descriptors, child processes and trio
tasks are back to where they started. RSS at start and end is printed (a figure for the
closing note, not an assertion: the allocator keeps freed memory).
"""

from __future__ import annotations

import gc
import os
import random
import resource
from collections import Counter
from typing import Any

import attrs
import trio
import trio.lowlevel

import trio_agents.agent as ag
from tests.helpers import budget
from tests.helpers.stress_parts import Mood, tools
from tests.helpers.support import Tools, children_of
from trio_agents.session import MemoryStore, TurnEnded, TurnStarted, UserMessage


def _fds() -> int:
    # Collected first: a file or socket an earlier test dropped unclosed is closed by the
    # collector at any moment, which would move the count under this test.
    gc.collect()
    return len(os.listdir("/proc/self/fd"))


def _tasks() -> int:
    """Every task of this trio run."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    count, todo = 0, [root]
    while todo:
        task = todo.pop()
        count += 1
        todo.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return count


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


OPS = (
    *("prompt", "prompt", "prompt", "nap", "steer", "cancel", "child", "dispose", "yield"),
    *("fail", "hang", "stubborn"),  # a model that raises or hangs, a tool deaf to cancel
)


def _pick(live: list[ag.AgentHandle], rng: random.Random) -> ag.AgentHandle | None:
    """A random live agent (the disposed ones, also those gone with a parent, are dropped)."""
    while live:
        i = rng.randrange(len(live))
        if not live[i].agent.done:
            return live[i]
        live[i] = live[-1]
        live.pop()
    return None


@attrs.define
class Book:
    """What the driver sent, to check against what the sessions recorded."""

    sent: dict[str, list[str]] = attrs.Factory(dict)
    events: Counter[str] = attrs.Factory(Counter)


async def _soak(
    agents_count: int, seconds: float, rng: random.Random, book: Book
) -> dict[str, Any]:
    store = MemoryStore()
    async with ag.open_runtime(store=store, model=Mood()) as root:
        await root.plugin(Tools(*tools()))
        root.on(ag.AgentCreated, lambda e: book.events.update(["created"]))
        root.on(ag.AgentDisposed, lambda e: book.events.update(["disposed"]))
        handles: dict[str, ag.AgentHandle] = {}
        live: list[ag.AgentHandle] = []
        ids = iter(range(10**9))
        ops = Counter[str]()
        deadline = trio.current_time() + seconds

        async def create(parent: ag.Agent | None = None) -> None:
            handle = await root.agents.create(session_id=f"s{next(ids)}", parent=parent)
            handles[handle.agent.id] = handle
            live.append(handle)
            book.sent[handle.agent.id] = []

        for _ in range(agents_count):
            await create()
        while trio.current_time() < deadline:
            handle = _pick(live, rng)
            op = rng.choice(OPS)
            ops[op] += 1
            if handle is None or op == "yield" or (op == "child" and len(live) > 4 * agents_count):
                await trio.sleep(0.001)
                continue
            agent = handle.agent
            if op in ("prompt", "nap", "steer", "fail", "hang", "stubborn"):
                text = f"{op} {len(book.sent[agent.id])}"
                (agent.steer if op == "steer" else agent.prompt)(text)
                book.sent[agent.id].append(text)
            elif op == "cancel":
                agent.cancel()
            elif op == "child":
                await create(parent=agent)
            elif op == "dispose":
                await handle.dispose()
                if len(live) < agents_count // 2:
                    await create()
            if sum(ops.values()) % 50 == 0:
                await trio.sleep(0.001)
        sessions = {agent_id: h.agent.session for agent_id, h in handles.items()}
        for handle in list(handles.values()):
            await handle.dispose()
        for agent_id, session in sessions.items():
            _check(agent_id, session.records, book.sent[agent_id])
        return dict(ops)


def _check(agent_id: str, records: Any, sent: list[str]) -> None:
    assert [r.seq for r in records] == list(range(len(records))), agent_id
    started = Counter(r.turn_id for r in records if isinstance(r, TurnStarted))
    ended = Counter(r.turn_id for r in records if isinstance(r, TurnEnded))
    assert started == ended, agent_id
    assert set(ended.values()) <= {1}, agent_id
    taken = [r.content for r in records if isinstance(r, UserMessage)]
    # Cancels drop queued prompts, so what was taken is a subsequence of what was sent, with
    # the steers allowed ahead of the prompts queued before them.
    prompts = [t for t in taken if not t.startswith("steer")]
    expected = iter([s for s in sent if not s.startswith("steer")])
    assert all(p in expected for p in prompts), (agent_id, prompts, sent)


async def test_a_soak_of_many_agents_leaves_nothing_behind() -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    agents_count = budget.count(40, 1000)
    fds, children = _fds(), len(children_of(os.getpid()))
    tasks = _tasks()
    rss_start = _rss_mib()
    book = Book()
    ops = await _soak(agents_count, budget.seconds(2, 60), rng, book)
    rss_end = _rss_mib()
    assert book.events["created"] == book.events["disposed"] > 0, book.events
    assert _fds() == fds
    assert len(children_of(os.getpid())) == children
    assert _tasks() == tasks
    print(
        f"soak (seed {seed}): {agents_count} agents, {book.events['created']} created and "
        f"disposed, ops {sum(ops.values())} {ops}, RSS {rss_start:.0f} -> {rss_end:.0f} MiB, "
        "fds, children and tasks back"
    )
