"""An MCP server's read-only tools (``readOnlyHint``) under the modes: not asked about by
``ask = ["*"]``, and run in the ``plan`` mode, which refuses the server's other tools."""

from __future__ import annotations

import re

import trio

import trio_agents.agent as ag
from tests.helpers.mcp_support import registry, tools_server
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import ToolCallEnded


async def test_a_read_only_mcp_tool_is_marked_and_not_asked_by_the_star() -> None:
    """peek (readOnlyHint) is read_only and unasked under ask=["*"]; add is asked; a name
    in ask is asked whatever the hint."""
    async with ag.open_runtime() as root:
        with trio.fail_after(30):
            await root.plugin(tools_server(ask=("*",)))
            await root.plugin(tools_server("n", ask=("peek",)))
        tools = registry(root)
        peek, add, named = tools.get("t__peek"), tools.get("t__add"), tools.get("n__peek")
        assert peek is not None
        assert add is not None
        assert named is not None
        assert (peek.read_only, peek.ask) == (True, False)
        assert (add.read_only, add.ask) == (False, True)
        assert (named.read_only, named.ask) == (True, True)


async def test_plan_mode_runs_the_read_only_mcp_tool_and_refuses_the_others() -> None:
    """In plan, t__peek runs and t__add is refused before it reaches the server."""
    model = ScriptedModel(
        [[CallTool("t__peek"), CallTool("t__add", {"a": 1, "b": 2})], [Say("ok")]]
    )
    async with ag.open_runtime(model=model) as root:
        with trio.fail_after(30):
            await root.plugin(tools_server())
        agent = (await root.agents.create()).agent
        agent.set_mode("plan")
        agent.prompt("go")
        with trio.fail_after(30):
            await agent.when_idle()
        ended = {r.name: r for r in agent.session.records if isinstance(r, ToolCallEnded)}
    assert (ended["t__peek"].is_error, ended["t__peek"].content) == (False, "peeked")
    assert re.match(r"^tool 't__add' is not available in the 'plan' mode", ended["t__add"].content)
    assert not ended["t__add"].started
