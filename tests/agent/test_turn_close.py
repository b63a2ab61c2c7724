"""The close of a turn: durable when when_idle returns, in as few scheduler passes as it takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents as ta
from trio_agents.session import (
    JsonlStore,
    SessionFlushed,
    SessionStore,
    SqliteStore,
    StopReason,
    TurnEnded,
)


class TaskSteps(trio.abc.Instrument):
    """Counts the steps of each task, by name, while ``counting``."""

    def __init__(self) -> None:
        self.counting = False
        self.steps: dict[str, int] = {}

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.counting:
            self.steps[task.name] = self.steps.get(task.name, 0) + 1


async def test_a_cancel_on_a_memory_store_reaches_when_idle_in_two_scheduler_passes() -> None:
    """cancel() to when_idle(): one step of the loop, one of the waiter; the flush adds none."""
    steps = TaskSteps()
    async with ta.open_runtime(model=ta.ScriptedModel.echo(delay=60.0)) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("hello")
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.add_instrument(steps)
        try:
            steps.counting = True
            assert agent.cancel()
            await agent.when_idle()
            steps.counting = False
        finally:
            trio.lowlevel.remove_instrument(steps)
        ends = [r for r in agent.session.records if isinstance(r, TurnEnded)]
        assert [(e.stop_reason, e.cause) for e in ends] == [(StopReason.CANCELLED, ta.UserCancel())]
        assert agent.session.statistics().flushed_seq == agent.session.last_seq
    assert sorted(steps.steps.values()) == [1, 1], steps.steps


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_a_cancelled_turns_close_is_durable_when_when_idle_returns(
    kind: str, tmp_path: Path
) -> None:
    """On a store that writes, the close is synced before when_idle returns (awaited flush)."""
    store: SessionStore = (
        JsonlStore(tmp_path / "sessions") if kind == "jsonl" else SqliteStore(tmp_path / "s.db")
    )
    async with ta.open_runtime(store=store, model=ta.ScriptedModel.echo(delay=60.0)) as root:
        agent = (await root.agents.create()).agent
        agent.prompt("hello")
        await trio.testing.wait_all_tasks_blocked()  # the turn waits in its model
        assert agent.cancel()
        await agent.when_idle()
        assert agent.session.statistics().flushed_seq == agent.session.last_seq
        if kind == "jsonl":
            [path] = (tmp_path / "sessions").rglob("*.jsonl")
            last = json.loads(path.read_text().splitlines()[-1])
            assert (last["type"], last["stop_reason"]) == ("turn_ended", "cancelled")
        end = agent.session.records[-1]
        assert isinstance(end, TurnEnded)
        assert (end.stop_reason, end.cause) == (StopReason.CANCELLED, ta.UserCancel())


async def test_a_cancel_on_a_memory_store_emits_session_flushed_for_its_close() -> None:
    """The close flushed without waiting still emits SessionFlushed with the TurnEnded's seq."""
    flushed: list[int] = []
    async with ta.open_runtime(model=ta.ScriptedModel.echo(delay=60.0)) as root:
        root.on(SessionFlushed, lambda e: flushed.append(e.seq))
        agent = (await root.agents.create()).agent
        agent.prompt("hello")
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel()
        await agent.when_idle()
        assert isinstance(agent.session.records[-1], TurnEnded)
        assert flushed[-1:] == [agent.session.last_seq]
