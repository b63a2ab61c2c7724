"""An agent created with a model object is not resumed on another model without a word
(issue 34, item 3): its session cannot hold the object, so a resume must be given a model."""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agents as ta
from trio_agents.model import ScriptedModel

REFUSED = (
    r"^agent 'a1' was created with a model object \('scripted'\), which its session cannot "
    r"hold; pass a model to resume it: agents\.resume\('a1', model=\.\.\.\) \(model=None runs "
    r"it on the runtime's default\)$"
)


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ta.SessionStore:
    return ta.MemoryStore() if request.param == "memory" else ta.JsonlStore(tmp_path)


async def test_resume_without_a_model_is_refused_and_changes_nothing(
    store: ta.SessionStore,
) -> None:
    """Created with a ScriptedModel object, disposed, resumed with no model=: a
    ModelRequiredError saying how to pass one; nothing is live or recorded."""
    async with ta.open_runtime(store=store) as root:
        model = ScriptedModel(["first answer", "second answer"])
        handle = await root.agents.create(model=model, session_id="a1")
        assert await handle.agent.ask("one") == "first answer"
        stored = handle.agent.session.records
        await handle.dispose()
        with pytest.raises(ta.ModelRequiredError, match=REFUSED):
            await root.agents.resume("a1")
        assert root.agents.list() == ()
        assert root.sessions.live() == ()
        resumed = await root.agents.resume("a1", model=model)
        assert resumed.agent.session.records == stored  # the refusal recorded nothing


async def test_resume_with_the_model_object_again_keeps_the_conversation(
    store: ta.SessionStore,
) -> None:
    """The same resume given model= works: the agent answers on that model, with its history,
    and the next resume still asks for a model."""
    async with ta.open_runtime(store=store) as root:
        model = ScriptedModel(["first answer", "second answer"])
        handle = await root.agents.create(model=model, session_id="a1")
        await handle.agent.ask("one")
        await handle.dispose()
        resumed = await root.agents.resume("a1", model=model)
        assert resumed.agent.model is model
        assert await resumed.agent.ask("two") == "second answer"
        assert [m.content for m in model.requests[1].messages] == ["one", "first answer", "two"]
        await resumed.dispose()
        with pytest.raises(ta.ModelRequiredError, match=REFUSED):
            await root.agents.resume("a1")


async def test_resume_with_a_spec_or_the_default_is_recorded_and_needs_no_model_after(
    store: ta.SessionStore,
) -> None:
    """model="echo" or model=None is a choice the session can hold: recorded, so the next
    resume without model= works again."""
    async with ta.open_runtime(store=store) as root:
        handle = await root.agents.create(model=ScriptedModel(["x"]), session_id="a1")
        await handle.dispose()
        for choice in ("echo", None):
            moved = await root.agents.resume("a1", model=choice)
            await moved.dispose()
            again = await root.agents.resume("a1")
            assert not again.agent.config.model_object
            assert again.agent.config.model == choice
            await again.dispose()


async def test_an_agent_on_the_default_model_still_resumes_on_the_new_default(
    store: ta.SessionStore,
) -> None:
    """Created with no model (the runtime's default, itself an object): a runtime with another
    default resumes it on that default, as before."""
    first = ScriptedModel(["from the first runtime"])
    async with ta.open_runtime(store=store, model=first) as root:
        handle = await root.agents.create(session_id="a1")
        await handle.agent.ask("one")
        await handle.dispose()
    async with ta.open_runtime(store=store) as root:
        resumed = await root.agents.resume("a1")
        assert resumed.agent.model is root.models.default
