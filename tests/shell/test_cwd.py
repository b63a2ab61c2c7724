"""Shell commands run in the working directory of the agent that asked for them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

import trio_agents.agent as ag
from trio_agents.kernel import Context
from trio_agents.session import MemoryStore
from trio_agents.shell import JobDone, LocalShell, tool_bash


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    """The test's directory with symlinks resolved, as ``pwd -P`` prints it."""
    return tmp_path.resolve()


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with ag.open_runtime(store=MemoryStore()) as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        yield root


async def pwd(root: Context, agent: ag.Agent | None, **extra: object) -> str:
    tools: ag.ToolRegistry = root.get("tools")
    with trio.fail_after(10):
        result = await tools.invoke("bash", {"command": "pwd -P", **extra}, agent)
    assert not result.is_error, result.content
    return result.content.splitlines()[0]


async def test_bash_runs_in_the_agents_cwd(root: Context, tmp: Path) -> None:
    """Two agents with different directories each see their own in ``pwd``."""
    first, second = tmp / "first", tmp / "second"
    first.mkdir()
    second.mkdir()
    a = (await root.agents.create(cwd=str(first))).agent
    b = (await root.agents.create(cwd=str(second))).agent
    assert await pwd(root, a) == str(first)
    assert await pwd(root, b) == str(second)


async def test_resumed_agent_keeps_its_cwd_for_bash(root: Context, tmp: Path) -> None:
    """The directory is part of the recorded configuration: a resume runs bash there too."""
    handle = await root.agents.create(cwd=str(tmp))
    agent_id = handle.agent.id
    await handle.dispose()
    resumed = (await root.agents.resume(agent_id)).agent
    assert resumed.cwd == str(tmp)
    assert await pwd(root, resumed) == str(tmp)


async def test_background_job_runs_in_the_agents_cwd(root: Context, tmp: Path) -> None:
    """A background job starts in the agent's directory as well."""
    agent = (await root.agents.create(cwd=str(tmp))).agent
    tools: ag.ToolRegistry = root.get("tools")
    done = trio.Event()
    root.on(JobDone, lambda event: done.set())
    with trio.fail_after(10):
        started = await tools.invoke(
            "bash", {"command": "pwd -P", "run_in_background": True}, agent
        )
        await done.wait()
        output = await tools.invoke("bash_output", {"job_id": started.content}, agent)
    assert output.content == f"{tmp}\n[exited with code 0]"
