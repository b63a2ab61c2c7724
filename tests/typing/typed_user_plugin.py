"""A user plugin written against the typed service keys (checked by ``nox -s typecheck``).

mypy checks this file with ``--disallow-any-expr`` (the comment below): an expression of type
``Any`` anywhere in it is an error, so a service, an agent or an event whose type stops at a
seam fails the type check. ``assert_type`` pins the types the keys give. The test
``tests/kernel/test_service_keys.py`` also runs the plugin.
"""
# mypy: disallow-any-expr

from __future__ import annotations

from typing import NamedTuple, assert_type

import trio_agents as ta
from trio_agents.agent import AgentRegistry
from trio_agents.model import ModelCatalog
from trio_agents.shell import ShellExecutor

__all__ = ["Probe", "probe"]


class Probe(NamedTuple):
    """What the plugin saw: the typed services and the statuses of one agent's turn."""

    agents: int
    tools: tuple[str, ...]
    default_model: str
    stored: bool
    shell: bool
    statuses: tuple[ta.AgentStatus, ...]
    caller: str | None


class TypedPlugin:
    """Declares its services by key, reads them typed, and runs one prompt."""

    name = "typed-user-plugin"
    inject = (ta.AGENTS, ta.TOOLS, ta.SESSIONS, ta.MODELS)

    def __init__(self) -> None:
        self.seen: list[Probe] = []

    async def apply(self, ctx: ta.Context, config: None) -> None:
        agents = ctx.service(ta.AGENTS)
        assert_type(agents, AgentRegistry)
        assert_type(ctx.get(ta.AGENTS), AgentRegistry | None)
        tools = ctx.service(ta.TOOLS)
        assert_type(tools, ta.ToolRegistry)
        store = ctx.service(ta.SESSIONS)
        assert_type(store, ta.SessionStore)
        models = ctx.service(ta.MODELS)
        assert_type(models, ModelCatalog)
        shell = ctx.get(ta.SHELL)
        assert_type(shell, ShellExecutor | None)

        callers: list[str | None] = []

        async def whoami(call: ta.ToolContext, params: None) -> str:
            agent = call.agent
            assert_type(agent, ta.Agent | None)
            callers.append(None if agent is None else agent.id)
            return "ok"

        ctx.provide(ta.ServiceKey[str]("typed_greeting"), "hello")
        tools.register(ta.Tool("whoami", "who called", None, whoami))
        statuses: list[ta.AgentStatus] = []

        def on_status(event: ta.AgentStatusChanged) -> None:
            assert_type(event.new, ta.AgentStatus)
            statuses.append(event.new)

        ctx.on(ta.AgentStatusChanged, on_status)
        handle = await agents.create(model=ta.ScriptedModel.echo())
        handle.agent.prompt("typed")
        await handle.agent.when_idle()
        no_arguments: dict[str, object] = {}
        await tools.invoke("whoami", no_arguments, handle.agent)
        await handle.dispose()
        self.seen.append(
            Probe(
                agents=len(agents.list()),
                tools=tools.names(),
                default_model=type(models.default).__name__,
                stored=await store.is_stored(handle.agent.id),
                shell=shell is not None,
                statuses=tuple(statuses),
                caller=callers[0] if callers else None,
            )
        )


probe = TypedPlugin()
