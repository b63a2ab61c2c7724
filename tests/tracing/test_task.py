"""A child the ``task`` tool starts is traced under the call that started it (issues 37, 41)."""

from __future__ import annotations

import trio_agents as ta
from tests.helpers.tracing_support import in_memory, tree
from trio_agents.model import CallTool, ScriptedModel


async def test_a_childs_turn_span_is_under_the_task_call_span() -> None:
    """invoke_agent of the child is a child span of execute_tool task of the lead's turn."""
    provider, exporter = in_memory()
    model = ScriptedModel([[CallTool("task", {"agent": "e", "prompt": "hi"})], "ok"])
    async with ta.open_runtime(tracer_provider=provider) as root:
        await root.agents.define("e", description="e", model="echo")
        lead = (await root.agents.create(model, tools=["task"], session_id="lead")).agent
        await lead.ask("go")
        (child_id,) = [r.child_id for r in lead.session.records if hasattr(r, "child_id")][:1]
    assert tree(exporter.get_finished_spans()) == [
        "invoke_agent lead",
        "  chat scripted",
        "  execute_tool task",
        f"    invoke_agent {child_id}",
        "      chat echo",
        "  chat scripted",
    ]
