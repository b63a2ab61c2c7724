"""The pytest plugin of :mod:`trio_agents.testing`: fixtures for testing one's own agents.

Installed with trio-agents, it loads itself (a ``pytest11`` entry point whose name is this
module's, so ``-p trio_agents.testing.pytest_plugin`` names the same plugin and never loads it
twice). The fixtures are trio fixtures: they need pytest-trio (``trio_mode = true``, or tests
marked ``@pytest.mark.trio``).

Rules:

- ``ta_model`` is the runtime's default model, ``ScriptedModel.echo()``; a test module (or a
  conftest) overrides it with a fixture of the same name to play a script.
- ``ta_runtime`` runs on a fresh :class:`~trio_agents.session.MemoryStore` in trio's virtual
  time. pytest-trio takes the clock of ``trio.run`` only from the *test's own* parameters, never
  from a fixture's, so the test names ``autojump_clock`` (or ``mock_clock``) itself; without a
  mock clock ``ta_runtime`` fails with that fix, instead of letting model delays and timeouts
  pass in real seconds.
- ``ta_events`` starts collecting before ``ta_agent`` exists (``ta_agent`` depends on it), so
  the agent's ``AgentCreated`` is in it. ``ta_agent`` is disposed before the runtime closes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from ..agent import Agent, open_runtime
from ..kernel import Context
from ..model import Model, ScriptedModel
from ..session import MemoryStore
from ._events import EventCollector, collect_events

__all__ = ["ta_agent", "ta_events", "ta_model", "ta_runtime"]


@pytest.fixture
def ta_model() -> Model:
    """The default model of ``ta_runtime``, ``ScriptedModel.echo()``; override it to script it."""
    return ScriptedModel.echo()


@pytest.fixture
async def ta_runtime(ta_model: Model) -> AsyncIterator[Context]:
    """A runtime (its root context) on a fresh MemoryStore, whose default model is ``ta_model``.

    The test must also take ``autojump_clock`` (or ``mock_clock``) as a parameter.
    """
    clock = trio.lowlevel.current_clock()
    if not isinstance(clock, trio.testing.MockClock):
        raise RuntimeError(
            "the ta_runtime fixture runs agents in trio's virtual time: add the autojump_clock "
            "fixture to the test's own parameters (pytest-trio takes the clock only from "
            "those, not from fixtures)"
        )
    async with open_runtime(store=MemoryStore(), model=ta_model) as root:
        yield root


@pytest.fixture
async def ta_events(ta_runtime: Context) -> EventCollector[object]:
    """Every event emitted in ``ta_runtime`` from its start, in order."""
    return collect_events(ta_runtime)


@pytest.fixture
async def ta_agent(ta_runtime: Context, ta_events: EventCollector[object]) -> AsyncIterator[Agent]:
    """An agent on ``ta_runtime`` with the default model and every tool; disposed after."""
    handle = await ta_runtime.agents.create()
    yield handle.agent
    await handle.dispose()
