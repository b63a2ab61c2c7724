"""A tool typed by its application's dependencies (checked by ``nox -s typecheck``).

mypy checks this file with ``--disallow-any-expr`` (the comment below): ``ctx.deps`` of a
``ToolContext[Deps]`` must be the application's own type, so ``ctx.deps.db.name`` checks, and
a tool reading a field its dependencies lack fails the type check.
``tests/agent/test_tool_context.py`` also runs the tool.
"""
# mypy: disallow-any-expr

from __future__ import annotations

from typing import NamedTuple, assert_type

import trio_agents as ta
from trio_agents.agent import AgentUsage

__all__ = ["Database", "Deps", "lookup", "lookup_tool"]


class Database(NamedTuple):
    """The application's database, as its tools see it."""

    name: str


class Deps(NamedTuple):
    """What the application gives its agents (``open_runtime(deps=Deps(...))``)."""

    db: Database


async def lookup(ctx: ta.ToolContext[Deps], params: None) -> str:
    """Answer with the database's name, the agent's requests so far and a child's id."""
    assert_type(ctx.deps, Deps)
    assert_type(ctx.deps.db, Database)
    usage = ctx.usage
    assert_type(usage, AgentUsage | None)
    child = await ctx.start_child(instructions="a helper")
    assert_type(child, ta.AgentHandle[ta.Agent])
    requests = usage.requests if usage is not None else 0
    return f"{ctx.deps.db.name} {requests} {child.agent.parent is ctx.agent}"


lookup_tool = ta.Tool("lookup", "name the database", None, lookup)
