"""A module plugin that owns an agent and its child: what the ownership machine reloads.

Applying it creates an agent and a child agent of that one, both kept in
``stress_parts.OWNED[fiber id]`` (a reload of this module keeps that dict); unloading or
reloading the plugin must take both away.
"""

from __future__ import annotations

from typing import Any

from tests.helpers.stress_parts import OWNED

name = "stress-owner"
inject = ("agents",)


async def apply(ctx: Any, config: None) -> None:
    agent = (await ctx.agents.create()).agent
    child = (await ctx.agents.create(parent=agent)).agent
    OWNED[ctx.fiber.id] = (agent, child)
