"""A disposed agent leaves nothing alive: its agent, session and fiber are freed.

A long-lived runtime creates and disposes agents all day; whatever one of them leaves behind
is kept for the runtime's life. Each test holds only weak references to what the agent was
made of, drops its own strong ones, collects, and checks every one is dead, on every store
backend (a store keeps its bookkeeping of a session on the session, never in a map of its own
that would keep the session alive).
"""

from __future__ import annotations

import gc
import logging
import sys
import time
import types
import weakref
from pathlib import Path

import pytest

import trio_agents as ta
from tests.helpers.checkpoints import cancelled_at_step
from tests.helpers.session_files import HEADER, good_line, write
from tests.helpers.store_backends import BACKENDS, Factory
from trio_agents.kernel import Context, Fiber
from trio_agents.session import JsonlStore, Session, SessionWriteError


def _fiber_of(root: Context, agent: ta.Agent) -> Fiber:
    """The agent's fiber (a child fiber of the runtime, or of its parent's scope)."""
    todo = list(root.fiber.children)
    while todo:
        fiber = todo.pop()
        if fiber.name == f"agent:{agent.id}":
            return fiber
        todo.extend(fiber.children)
    raise AssertionError(f"no fiber for agent {agent.id}")


def _refs(root: Context, agent: ta.Agent) -> dict[str, weakref.ref[object]]:
    return {
        "agent": weakref.ref(agent),
        "session": weakref.ref(agent.session),
        "fiber": weakref.ref(_fiber_of(root, agent)),
    }


def _alive(refs: dict[str, weakref.ref[object]]) -> list[str]:
    _wait_for_worker_threads()
    gc.collect()
    return [name for name, ref in refs.items() if ref() is not None]


def _wait_for_worker_threads() -> None:
    """A trio worker thread that has just handed back its result still holds, until it
    returns from the job, the task that asked (and so that task's context: an agent's fiber,
    whose store ran a query in a thread). Wait until no worker thread is inside a job."""
    deadline = time.monotonic() + 30
    while any(_in_job(frame) for frame in sys._current_frames().values()):
        assert time.monotonic() < deadline, "a trio worker thread stays in its job"
        time.sleep(0.001)


def _in_job(frame: types.FrameType | None) -> bool:
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_handle_job" and code.co_filename.endswith("_thread_cache.py"):
            return True
        frame = frame.f_back
    return False


@pytest.fixture(params=sorted(BACKENDS))
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    return BACKENDS[request.param](request, tmp_path)


async def test_an_agent_created_and_disposed_is_freed(make_store: Factory) -> None:
    async with ta.open_runtime(store=make_store(), model=ta.ScriptedModel.echo()) as root:
        handle = await root.agents.create()
        refs = _refs(root, handle.agent)
        await handle.dispose()
        del handle
        assert _alive(refs) == []


async def test_an_agent_disposed_after_turns_is_freed(make_store: Factory) -> None:
    async with ta.open_runtime(store=make_store(), model=ta.ScriptedModel.echo()) as root:
        handle = await root.agents.create()
        for text in ("one", "two"):
            handle.agent.prompt(text)
            await handle.agent.when_idle()
        refs = _refs(root, handle.agent)
        await handle.dispose()
        del handle
        assert _alive(refs) == []


async def test_a_child_agent_and_its_parent_are_freed(make_store: Factory) -> None:
    async with ta.open_runtime(store=make_store(), model=ta.ScriptedModel.echo()) as root:
        parent = await root.agents.create()
        child = await root.agents.create(parent=parent.agent)
        refs = _refs(root, parent.agent)
        refs |= {f"child {k}": v for k, v in _refs(root, child.agent).items()}
        await parent.dispose()  # disposes the child first
        del parent, child
        assert _alive(refs) == []


async def test_a_resumed_agent_is_freed_and_so_is_the_first_one(make_store: Factory) -> None:
    async with ta.open_runtime(store=make_store(), model=ta.ScriptedModel.echo()) as root:
        first = await root.agents.create()
        refs = {f"first {k}": v for k, v in _refs(root, first.agent).items()}
        session_id = first.agent.id
        await first.dispose()
        again = await root.agents.resume(session_id)
        refs |= _refs(root, again.agent)
        await again.dispose()
        del first, again
        assert _alive(refs) == []


async def test_creations_cancelled_at_every_checkpoint_leave_nothing_alive(
    make_store: Factory,
) -> None:
    """The roll-back paths (the fiber torn down, the session abandoned) free what they made:
    cancel the caller at step k of create for every k, then count what is alive."""
    async with ta.open_runtime(store=make_store(), model=ta.ScriptedModel.echo()) as root:
        before = _census()
        for k in range(1, 400):
            handle, cancelled, fired = await cancelled_at_step(
                k, lambda: root.agents.create(session_id="a")
            )
            if cancelled:
                continue
            assert handle is not None
            await handle.dispose()
            del handle
            if not fired:
                break
            await root.agents.store.delete("a")
        else:
            raise AssertionError("the creation never completed")
        assert k > 5  # the cancel hit real checkpoints
        assert _census() == before


def _census() -> dict[str, int]:
    """How many agents, sessions and fibers are alive."""
    gc.collect()
    kinds = {ta.Agent: "agents", Session: "sessions", Fiber: "fibers"}
    counts = dict.fromkeys(kinds.values(), 0)
    for obj in gc.get_objects():
        kind = kinds.get(type(obj))
        if kind is not None:
            counts[kind] += 1
    return counts


async def test_an_agent_whose_final_flush_failed_is_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store keeps a failed end's error for later callers; that error (its traceback)
    must not keep the session, and through it the agent, alive."""
    # The error is logged with its traceback: pytest's log capture would keep it (and the
    # frames it holds) for the report, which an application's log handler does not.
    logger = logging.getLogger("trio_agents")
    monkeypatch.setattr(logger, "propagate", False)
    monkeypatch.setattr(logger, "handlers", [logging.NullHandler()])
    path = tmp_path / "s.jsonl"
    write(path, HEADER % "s" + good_line(0) + "torn")
    async with ta.open_runtime(store=JsonlStore(tmp_path), model=ta.ScriptedModel.echo()) as root:
        handle = await root.agents.resume("s")
        refs = _refs(root, handle.agent)
        with path.open("ab") as f:  # another writer appended: the repair refuses
            f.write(b" and more")
        with pytest.raises(BaseExceptionGroup) as caught:
            await handle.dispose()
        assert caught.group_contains(SessionWriteError, match="changed since it was read")
        del handle, caught
        assert _alive(refs) == []


async def test_a_disposed_agent_is_freed_without_the_collector(make_store: Factory) -> None:
    """Nothing of a disposed agent is in a reference cycle: it is freed when its last
    reference goes, not by a pass of the cyclic garbage collector (which a runtime creating
    and disposing agents all day would otherwise pay for, in proportion to what it holds)."""
    async with ta.open_runtime(store=make_store(), model=ta.ScriptedModel.echo()) as root:
        for warm_up in (True, False):  # the first agent builds what later ones share
            gc.collect()
            gc.disable()
            try:
                handle = await root.agents.create()
                handle.agent.prompt("one")
                await handle.agent.when_idle()
                refs = _refs(root, handle.agent)
                await handle.dispose()
                del handle
                _wait_for_worker_threads()
                alive = [name for name, ref in refs.items() if ref() is not None]
            finally:
                gc.enable()
            if not warm_up:
                assert alive == []
