"""One ownership tree under random operations: plugins, agents, children, tool calls, reloads
and ACP sessions together, the invariants checked after every step.

Hypothesis generates a program; one ``trio.run`` under an autojumping mock clock executes it
(deterministic: the clock and ``wait_all_tasks_blocked`` decide every interleaving). The
owners are a plugin module (``stress_owner``: an agent and its child per fiber), plain agents
with children, and ACP bridges on memory streams whose sessions are agents.

Invariants:
- nothing owned outlives its owner: after a plugin is unloaded or reloaded, an agent disposed
  or a bridge's client gone, every agent it owned is done and out of the registry;
- every agent's ``seq`` is contiguous, each ``TurnStarted`` has at most one ``TurnEnded`` and
  a done agent has ended every turn;
- every prompt an agent took was sent to it, in the order sent;
- at the end, every ``AgentCreated`` has exactly one ``AgentDisposed``.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any, Literal, get_args

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import trio_agents.agent as ag
from tests.helpers import budget, stress_owner
from tests.helpers.stress_parts import OWNED, Mood, tools
from tests.helpers.support import Tools
from trio_agents.acp import AcpBridge
from trio_agents.acp._framing import LineFramer, Oversized, encode_frame
from trio_agents.kernel import Context, Fiber
from trio_agents.session import Record, TurnEnded, TurnStarted, UserMessage

SLOTS = 4

Op = Literal[
    "agent",
    "child",
    "plugin",
    "unload",
    "reload",
    "acp_open",
    "acp_new",
    "acp_prompt",
    "acp_close",
    "prompt",
    "nap",
    "fail",
    "hang",
    "stubborn",
    "steer",
    "cancel",
    "dispose",
    "advance",
    "settle",
]


@attrs.frozen
class Step:
    op: Op
    slot: int
    arg: int


# Creating operations weigh more, so that most programs have something to tear down.
WEIGHTS: dict[str, int] = {"agent": 3, "child": 2, "plugin": 2, "acp_open": 2, "acp_new": 3}
WEIGHTS |= {"acp_prompt": 2, "prompt": 3, "nap": 2}
OPS = [op for op in get_args(Op) for _ in range(WEIGHTS.get(op, 1))]

steps = st.lists(
    st.builds(Step, st.sampled_from(OPS), st.integers(0, SLOTS - 1), st.integers(0, 3)),
    min_size=8,
    max_size=budget.count(30, 60),
)


@attrs.define
class Client:
    """The client end of one bridge: it writes frames and reads (and drops) every answer."""

    stream: trio.StapledStream[Any, Any]
    fiber: Fiber
    ids: itertools.count[int] = attrs.Factory(lambda: itertools.count(1))
    #: The ids of the sessions this client opened (from the answers to session/new).
    sessions: set[str] = attrs.Factory(set)

    async def send(self, method: str, params: object) -> None:
        frame = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params}
        await self.stream.send_all(encode_frame(frame))

    async def read(self) -> None:
        framer = LineFramer()
        while data := await self.stream.receive_some(1 << 16):
            for frame in framer.feed(data):
                assert not isinstance(frame, Oversized)
                result = json.loads(frame).get("result")
                if isinstance(result, dict) and "sessionId" in result:
                    self.sessions.add(result["sessionId"])


@attrs.define
class World:
    root: Context
    agents: dict[int, ag.AgentHandle | ag.Agent] = attrs.Factory(dict)
    plugins: dict[int, Fiber] = attrs.Factory(dict)
    clients: dict[int, Client] = attrs.Factory(dict)
    sent: dict[str, list[str]] = attrs.Factory(dict)
    events: Counter[str] = attrs.Factory(Counter)
    every: dict[str, ag.Agent] = attrs.Factory(dict)
    acp_sessions: int = 0
    reloads: int = 0

    def agent(self, slot: int) -> ag.Agent | None:
        held = self.agents.get(slot)
        agent = held.agent if isinstance(held, ag.AgentHandle) else held
        return agent if agent is not None and not agent.done else None


def gone(world: World, agents: list[ag.Agent], why: str) -> None:
    live = {a.id for a in world.root.agents.list()}
    for agent in agents:
        assert agent.done, f"{agent.id} outlived its owner ({why})"
        assert agent.id not in live, f"{agent.id} still listed after {why}"


def check(world: World) -> None:
    for agent in world.every.values():
        records: tuple[Record, ...] = agent.session.records
        assert [r.seq for r in records] == list(range(len(records))), agent.id
        started = Counter(r.turn_id for r in records if isinstance(r, TurnStarted))
        ended = Counter(r.turn_id for r in records if isinstance(r, TurnEnded))
        assert set(ended.values()) <= {1}, agent.id
        assert set(ended) <= set(started), agent.id
        if agent.done:
            assert started == ended, agent.id
        taken = [r.content for r in records if isinstance(r, UserMessage)]
        prompts = [t for t in taken if not t.startswith("steer")]
        expected = iter(t for t in world.sent.get(agent.id, ()) if not t.startswith("steer"))
        assert all(p in expected for p in prompts), (agent.id, prompts)


async def step_once(world: World, step: Step, nursery: trio.Nursery) -> None:
    root = world.root
    agent = world.agent(step.slot)
    owner = step.slot % 2  # plugins and clients: fewer slots, so later steps find them
    if step.op == "agent" and agent is None:
        world.agents[step.slot] = await root.agents.create()
    elif step.op == "child":
        parent = world.agent(step.arg % SLOTS)
        if parent is not None and agent is None:
            world.agents[step.slot] = await root.agents.create(parent=parent)
    elif step.op == "plugin" and owner not in world.plugins:
        fiber = await root.plugin(stress_owner)
        world.plugins[owner] = fiber
        world.agents[step.slot], world.agents[(step.slot + 1) % SLOTS] = OWNED[fiber.id]
    elif step.op == "unload" and owner in world.plugins:
        fiber = world.plugins.pop(owner)
        await fiber.dispose()
        gone(world, list(OWNED[fiber.id]), "its plugin was unloaded")
    elif step.op == "reload" and world.plugins:
        old = dict(world.plugins)
        new = await root.reload(stress_owner)
        world.reloads += 1
        assert len(new) == len(old)
        for fiber in old.values():
            gone(world, list(OWNED[fiber.id]), "its plugin was reloaded")
        world.plugins = dict(zip(old, new, strict=True))
        for fiber in new:
            assert not any(a.done for a in OWNED[fiber.id])
    elif step.op == "acp_open" and owner not in world.clients:
        ours, theirs = trio.testing.memory_stream_pair()
        fiber = await root.plugin(AcpBridge(ours))
        client = Client(theirs, fiber)
        nursery.start_soon(client.read)
        await client.send("initialize", {"protocolVersion": 1})
        world.clients[owner] = client
    elif step.op == "acp_new" and owner in world.clients:
        await world.clients[owner].send("session/new", {"cwd": "/tmp", "mcpServers": []})
    elif step.op == "acp_prompt" and owner in world.clients:
        client = world.clients[owner]
        mine = [a for a in root.agents.list() if a.id in client.sessions]
        for target in mine[: step.arg + 1]:
            text = f"p{step.arg}"
            world.sent.setdefault(target.id, []).append(text)
            params = {"sessionId": target.id, "prompt": [{"type": "text", "text": text}]}
            await client.send("session/prompt", params)
    elif step.op == "acp_close" and owner in world.clients:
        client = world.clients.pop(owner)
        owned = [a for a in root.agents.list() if a.id in client.sessions]
        world.acp_sessions += len(client.sessions)
        await client.stream.send_stream.aclose()
        await client.fiber.dispose()
        gone(world, owned, "its ACP client went away")
    elif agent is None:
        pass
    elif step.op in ("prompt", "nap", "steer", "fail", "hang", "stubborn"):
        text = {"prompt": "p"}.get(step.op, step.op) + str(step.arg)
        (agent.steer if step.op == "steer" else agent.prompt)(text)
        world.sent.setdefault(agent.id, []).append(text)
    elif step.op == "cancel":
        agent.cancel(keep_inbox=step.arg == 0)
    elif step.op == "dispose":
        held = world.agents[step.slot]
        children = list(agent.children)
        if isinstance(held, ag.AgentHandle):
            await held.dispose()
            gone(world, [agent, *children], "it was disposed")
    elif step.op == "advance":
        await trio.sleep(0.005 * (step.arg + 1))
    elif step.op == "settle":
        await trio.testing.wait_all_tasks_blocked()


async def execute(program: list[Step]) -> World:
    async with ag.open_runtime(model=Mood(delay=0.01)) as root:
        await root.plugin(Tools(*tools()))
        world = World(root)
        root.on(ag.AgentCreated, lambda e: world.events.update(["created"]))
        root.on(ag.AgentDisposed, lambda e: world.events.update(["disposed"]))
        async with trio.open_nursery() as nursery:
            for step in program:
                await step_once(world, step, nursery)
                for agent in root.agents.list():
                    world.every.setdefault(agent.id, agent)
                check(world)
            await trio.testing.wait_all_tasks_blocked()
            for client in world.clients.values():
                world.acp_sessions += len(client.sessions)
                await client.stream.send_stream.aclose()
            for fiber in world.plugins.values():
                await fiber.dispose()
        for agent in list(root.agents.list()):
            agent.cancel()  # a model that hangs on cue ends only so
            await agent.when_idle()
        check(world)
    assert world.events["created"] == world.events["disposed"], world.events
    check(world)
    return world


@settings(
    max_examples=budget.examples(40, 2000),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps)
def test_random_ownership_trees_keep_the_invariants(program: list[Step]) -> None:
    OWNED.clear()
    world = trio.run(execute, program, clock=trio.testing.MockClock(autojump_threshold=0))
    event(f"agents created: {min(world.events['created'], 10)}+")
    event(f"sessions over ACP: {world.acp_sessions > 0}")
    event(f"reloads: {min(world.reloads, 3)}")
