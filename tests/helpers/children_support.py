"""What the tests of child sessions share (``test_session_children*.py``,
``test_cli_sessions_children*.py``): a family of sessions made by a real runtime."""

from __future__ import annotations

import trio_agents.agent as ag
from trio_agents.model import ScriptedModel
from trio_agents.session import SessionStore

#: Each session of :func:`store_a_family` and its parent.
FAMILY = {"p": None, "c1": "p", "g": "c1", "c2": "p", "s": None}


async def store_a_family(store: SessionStore) -> None:
    """``p`` with children ``c1`` (itself the parent of ``g``) and ``c2``, and an unrelated
    ``s``, made with ``create(parent=...)``; each ran one turn (``hello from ID``), then the
    runtime closed."""
    async with ag.open_runtime(store=store, model=ScriptedModel.echo()) as root:
        parent = (await root.agents.create(session_id="p")).agent
        c1 = (await root.agents.create(session_id="c1", parent=parent)).agent
        g = (await root.agents.create(session_id="g", parent=c1)).agent
        c2 = (await root.agents.create(session_id="c2", parent=parent)).agent
        other = (await root.agents.create(session_id="s")).agent
        for agent in (parent, c1, g, c2, other):
            agent.prompt(f"hello from {agent.id}")
            await agent.when_idle()
