"""``AgentLoop``: the factory provider of the ``agents`` service.

It is the co-owner of every agent it made (their fibers are its children) and the sole owner
of the agents declared in its configuration.
"""

from __future__ import annotations

from typing import TypedDict, final

import attrs

from ..kernel import Context
from ..model import MODELS
from ..session import SESSIONS
from ._budget import Budget
from ._definitions import AgentDefinition
from ._registry import AGENTS, AgentRegistry
from ._task import TaskTools
from ._tools import TOOLS


def _check_max_steps(_: object, __: object, value: int) -> None:
    if value < 1:
        raise ValueError(f"max_steps is the most model requests per turn, >= 1; got {value!r}")


def _check_budget(_: object, __: object, value: dict[str, float] | None) -> None:
    if value is not None:
        Budget.of(value)


class _Keywords(TypedDict):
    """The keywords a declared agent gives ``create``, or ``resume`` when its id is stored
    already: written once for both."""

    model: str | None
    tools: list[str] | None
    instructions: str | None
    max_steps: int
    cwd: str | None
    ask: list[str] | None
    budget: Budget | None


@attrs.frozen
class DeclaredAgent:
    """An agent declared in configuration; owned by the ``AgentLoop`` fiber."""

    id: str | None = None
    model: str | None = None
    instructions: str | None = None
    tools: list[str] | None = None
    max_steps: int = attrs.field(default=50, validator=_check_max_steps)
    cwd: str | None = None
    #: The tools whose calls need approval in this agent (see :doc:`/tools`).
    ask: list[str] | None = None
    #: What the agent and its descendants may spend: limits by name (see :class:`Budget`).
    budget: dict[str, float] | None = attrs.field(default=None, validator=_check_budget)
    #: The sandbox policy of this agent's shell commands when the shell is sandboxed
    #: (``read-only``, ...): the stricter of it and the shell's applies (``tool_bash``).
    sandbox: str | None = None


@final
class AgentLoop:
    """The plugin that provides ``agents``. Applied by ``open_runtime``."""

    name = "agent-loop"
    inject = (SESSIONS, TOOLS, MODELS)

    def __init__(self, *, deps: object = None) -> None:
        """The loop; ``deps`` are the application's dependencies of every agent it makes
        (``open_runtime(deps=...)``), held by this plugin object, never stored."""
        self.deps = deps

    @attrs.frozen
    class Config:
        """Agents to create when the loop starts."""

        agents: list[DeclaredAgent] = attrs.Factory(list)
        #: Agent definitions the ``task`` tool starts children from, owned by the loop.
        definitions: list[AgentDefinition] = attrs.Factory(list)

    async def apply(self, ctx: Context, config: AgentLoop.Config) -> None:
        sessions = ctx.service(SESSIONS)
        registry = AgentRegistry(
            ctx, sessions, ctx.service(TOOLS), ctx.service(MODELS), deps=self.deps
        )
        ctx.provide(AGENTS, registry)
        TaskTools(ctx, registry, registry.definitions, ctx.service(TOOLS)).register()
        for definition in config.definitions:
            registry.definitions.define(definition)
        for declared in config.agents:
            # Created from this fiber's task, so the loop is the only owner (the handle is
            # not kept: the loop's unload disposes these agents). A declared id that is
            # stored already is resumed: a restart never loses its history, and the agent
            # takes the definition the configuration gives now.
            keywords = _keywords(declared)
            if declared.id is not None and await sessions.is_stored(declared.id):
                await registry.resume(declared.id, **keywords)
            else:
                await registry.create(session_id=declared.id, **keywords)


def _keywords(declared: DeclaredAgent) -> _Keywords:
    return _Keywords(
        model=declared.model,
        tools=declared.tools,
        instructions=declared.instructions,
        max_steps=declared.max_steps,
        cwd=declared.cwd,
        ask=declared.ask,
        budget=Budget.of(declared.budget) if declared.budget else None,
    )


agent_loop = AgentLoop()
