"""trio_agents.testing: the fixtures, the event collector, and the plugin as a user loads it."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest
import trio
import trio.testing

import trio_agents as ta
from tests.helpers.paths import ROOT
from trio_agents.kernel import Context
from trio_agents.model import ModelRequest, ScriptedModel, UserText
from trio_agents.testing import EventCollector, collect_events
from trio_agents.testing import pytest_plugin as plugin

pytest_plugins = ["pytester"]

PLUGIN = "trio_agents.testing.pytest_plugin"
PYPROJECT = ROOT / "pyproject.toml"


# -- the fixtures, used here as a user's tests use them ------------------------------------------


async def test_ta_agent_answers_and_the_model_saw_the_prompt(
    ta_agent: ta.Agent,
    ta_model: ScriptedModel,
    ta_events: EventCollector[object],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The default model echoes; its requests hold the prompt; the events hold the agent's."""
    assert await ta_agent.ask("hello") == "hello"
    (request,) = ta_model.requests
    assert isinstance(request, ModelRequest)
    assert [m.content for m in request.messages if isinstance(m, UserText)] == ["hello"]
    created = ta_events.of_type(ta.AgentCreated)
    assert [e.agent_id for e in created] == [ta_agent.id]
    assert ta_events.output_text() == "hello"


async def test_ta_runtime_is_on_a_fresh_memory_store(
    ta_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """The runtime's session store is a MemoryStore with no sessions yet."""
    store = ta_runtime.get("sessions")
    assert isinstance(store, ta.MemoryStore)
    assert await store.list() == []


# -- the collector ----------------------------------------------------------------------------


async def test_wait_for_returns_events_in_order_also_those_already_emitted(
    ta_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """wait_for finds an event emitted before the call, then the next one after it."""
    events = collect_events(ta_runtime, ta.AgentStatusChanged)
    agent = (await ta_runtime.agents.create()).agent
    agent.prompt("hi")
    await agent.when_idle()
    first = await events.wait_for(ta.AgentStatusChanged, lambda e: e.new is ta.AgentStatus.RUNNING)
    second = await events.wait_for(ta.AgentStatusChanged)
    assert (first.new, second.new) == (ta.AgentStatus.RUNNING, ta.AgentStatus.IDLE)
    assert events.events.index(second) == events.events.index(first) + 1


async def test_wait_for_waits_for_an_event_not_yet_emitted(
    ta_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """A waiter blocks until a matching event arrives, and gets exactly that event."""
    events = collect_events(ta_runtime)
    got: list[object] = []

    async def wait() -> None:
        got.append(await events.wait_for(ta.AgentCreated))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        handle = await ta_runtime.agents.create()
    assert got == [ta.AgentCreated(agent_id=handle.agent.id, session_id=handle.agent.id)]


async def test_a_collector_for_one_agent_keeps_only_its_events(
    ta_runtime: Context, autojump_clock: trio.testing.MockClock
) -> None:
    """``agent=`` filters on the events' agent_id; clear() forgets what was kept."""
    one = (await ta_runtime.agents.create()).agent
    two = (await ta_runtime.agents.create()).agent
    only_two = collect_events(ta_runtime, ta.AgentOutput, agent=two)
    one.prompt("from one")
    two.prompt("from two")
    await one.when_idle()
    await two.when_idle()
    assert {e.agent_id for e in only_two.events} == {two.id}
    assert only_two.output_text() == "from two"
    only_two.clear()
    assert len(only_two) == 0


# -- the plugin, loaded the way a user's project loads it -----------------------------------------


def test_the_entry_point_is_named_like_its_module() -> None:
    """pyproject registers the plugin under its module's name (so ``-p`` cannot load it twice)."""
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["pytest11"]
    assert entry_points == {PLUGIN: PLUGIN}
    assert plugin.__name__ == PLUGIN
    assert {"ta_agent", "ta_events", "ta_model", "ta_runtime"} <= set(plugin.__all__)


def test_the_kit_itself_does_not_import_pytest() -> None:
    """Programs may use collect_events without pytest installed; only the plugin needs it."""
    code = "import sys, trio_agents.testing; print('pytest' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


USER_TESTS = '''
import pytest
import trio_agents as ta
from trio_agents.testing import CallTool, ScriptedModel


@ta.tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@pytest.fixture
def ta_model():
    return ScriptedModel([[CallTool("add", {"a": 2, "b": 3})], "the sum is 5"])


async def test_the_agent_adds(ta_runtime, ta_model, autojump_clock):
    ta_runtime.get("tools").register(add)
    agent = (await ta_runtime.agents.create(tools=["add"])).agent
    assert await agent.ask("what is 2 + 3?") == "the sum is 5"
    first, second = ta_model.requests
    assert [tool.name for tool in first.tools] == ["add"]
    assert second.messages[-1].content == "5"


async def test_each_test_gets_a_fresh_script(ta_agent, ta_model, autojump_clock):
    assert ta_model.replies_left == 2
    assert await ta_agent.ask("what is 2 + 3?") == "the sum is 5"
    assert ta_model.requests[1].messages[-1].is_error  # no add tool in this test
    with pytest.raises(ta.TurnFailedError, match="ended error"):
        await ta_agent.ask("again")
'''


@pytest.fixture
def user_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project directory with trio_mode on, as the testing page tells users to set it."""
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    return pytester


def test_a_user_test_file_runs_with_the_fixtures(user_project: pytest.Pytester) -> None:
    """A user's module overrides ``ta_model`` with a script, and its tests pass."""
    user_project.makepyfile(test_user=USER_TESTS)
    result = user_project.runpytest_subprocess("-p", PLUGIN, "-p", "no:randomly", "-q")
    result.assert_outcomes(passed=2)


def test_ta_runtime_without_a_mock_clock_fails_with_the_fix(user_project: pytest.Pytester) -> None:
    """Forgetting autojump_clock fails the test with an error that names it."""
    user_project.makepyfile(
        test_user="async def test_no_clock(ta_runtime):\n    pass\n",
    )
    result = user_project.runpytest_inprocess("-p", PLUGIN, "-p", "no:randomly", "-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*add the autojump_clock fixture to the test's own parameters*"])
