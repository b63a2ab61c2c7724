"""The tool guard the ACP bridge uses: ``ToolRegistry.add_guard`` runs before a tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio

import trio_agents.agent as ag


@attrs.frozen
class Args:
    command: str


async def test_guard_answer_replaces_the_call_and_marks_it_not_started() -> None:
    """A guard's result is the answer, with started=False; the tool never runs."""
    ran: list[str] = []
    seen: list[tuple[str, dict[str, Any]]] = []

    async def tool_fn(call: ag.ToolContext, args: Args) -> str:
        await trio.lowlevel.checkpoint()
        ran.append(args.command)
        return "ran"

    async def guard(
        name: str, arguments: Mapping[str, Any], call: ag.ToolContext
    ) -> ag.ToolResult | None:
        await trio.lowlevel.checkpoint()
        seen.append((name, dict(arguments)))
        if arguments["command"] == "no":
            return ag.ToolResult("refused", is_error=True)
        return None

    async with ag.open_runtime() as root:
        tools: ag.ToolRegistry = root.get("tools")
        tools.register(ag.Tool("bash", "t", Args, tool_fn))
        entry = tools.add_guard(guard)
        refused = await tools.invoke("bash", {"command": "no"})
        assert refused == ag.ToolResult("refused", is_error=True, started=False)
        assert (await tools.invoke("bash", {"command": "yes"})).content == "ran"
        invalid = await tools.invoke("bash", {"command": 1})
        assert invalid.is_error
        assert seen == [("bash", {"command": "no"}), ("bash", {"command": "yes"})]
        await entry.close()
        assert (await tools.invoke("bash", {"command": "no"})).content == "ran"
        assert ran == ["yes", "no"]


async def test_a_failing_guard_is_an_error_result() -> None:
    """A guard that raises refuses the call with an error result naming the failure."""

    async def tool_fn(call: ag.ToolContext, args: None) -> str:
        raise AssertionError("must not run")

    async def guard(
        name: str, arguments: Mapping[str, Any], call: ag.ToolContext
    ) -> ag.ToolResult | None:
        raise RuntimeError("broken guard")

    async with ag.open_runtime() as root:
        tools: ag.ToolRegistry = root.get("tools")
        tools.register(ag.Tool("noop", "t", None, tool_fn))
        tools.add_guard(guard)
        result = await tools.invoke("noop", {})
        assert result.is_error
        assert not result.started
        assert "broken guard" in result.content
