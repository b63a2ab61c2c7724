"""An ACP bridge in process with a fake ``bash`` tool, and what its frames said (shared by the
ACP bridge tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.acp_support import Client, Message
from trio_agents.acp import AcpBridge
from trio_agents.kernel import Context
from trio_agents.model import Model
from trio_agents.session import MemoryStore, SessionStore


def chunks(messages: list[Message], kind: str = "agent_message_chunk") -> str:
    return "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == kind
    )


@attrs.frozen
class FakeBashArgs:
    command: str


@attrs.define
class FakeBash:
    """A ``bash`` tool that only records the commands it was asked to run."""

    ran: list[str] = attrs.Factory(list)

    async def run(self, call: ag.ToolContext, args: FakeBashArgs) -> str:
        await trio.lowlevel.checkpoint()
        self.ran.append(args.command)
        return f"ran {args.command}"

    def tool(self) -> ag.Tool:
        return ag.Tool("bash", "a fake shell", FakeBashArgs, self.run)


@attrs.define
class Served:
    root: Context
    bridge: AcpBridge
    client: Client
    bash: FakeBash
    store: SessionStore

    @property
    def agents(self) -> ag.AgentRegistry:
        registry: ag.AgentRegistry = self.root.get("agents")
        return registry

    def agent(self, session_id: str) -> ag.Agent:
        agent = self.agents.get(session_id)
        assert agent is not None
        return agent


@asynccontextmanager
async def serve(
    model: Model | str = "echo",
    *,
    allow_bash: bool = False,
    store: SessionStore | None = None,
    forget_approvals: bool = False,
) -> AsyncIterator[Served]:
    store = store if store is not None else MemoryStore()
    async with ag.open_runtime(store=store, model=model) as root:
        bash = FakeBash()
        root.get("tools").register(bash.tool())
        ours, theirs = trio.testing.memory_stream_pair()
        bridge = AcpBridge(ours, allow_bash=allow_bash, forget_approvals=forget_approvals)
        fiber = await root.plugin(bridge)
        yield Served(root, bridge, Client(theirs), bash, store)
        await fiber.dispose()
