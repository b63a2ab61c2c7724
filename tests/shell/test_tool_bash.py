"""``tool_bash``: the bash tools for agents, the owner policy, notices, agent-owned jobs."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
import trio_agents.shell._tool_bash as tool_bash_module
from tests.helpers.support import marker, processes_with, read_fifo, shell_of
from trio_agents.agent._tools import tools_plugin
from trio_agents.kernel import Context, FiberState, ListenerFailed
from trio_agents.model import ScriptedModel
from trio_agents.session import ToolCallEnded
from trio_agents.shell import (
    JobDone,
    JobStatus,
    LocalShell,
    ShellExecRequest,
    tool_bash,
)


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        yield root


async def invoke(
    root: Context, name: str, agent: ag.Agent | None, **arguments: Any
) -> ag.ToolResult:
    tools: ag.ToolRegistry = root.get("tools")
    with trio.fail_after(10):
        return await tools.invoke(name, arguments, agent)


async def background(root: Context, agent: ag.Agent | None, command: str) -> str:
    result = await invoke(root, "bash", agent, command=command, run_in_background=True)
    assert not result.is_error, result.content
    assert re.fullmatch(r"bash-\d+", result.content)
    return result.content


def first_completion(root: Context) -> trio.Event:
    """An event set when the first JobDone is emitted."""
    first = trio.Event()
    root.on(JobDone, lambda event: first.set())
    return first


async def new_agent(root: Context) -> ag.Agent:
    agent: ag.Agent = (await root.agents.create()).agent
    return agent


REFUSED = r"^job bash-\d+ belongs to another session$"


# -- the tools -----------------------------------------------------------------------------------


async def test_tools_are_registered(root: Context) -> None:
    """Applying tool_bash registers bash, bash_output and bash_kill."""
    names = root.get("tools").names()
    assert {"bash", "bash_output", "bash_kill"} <= set(names)


async def test_foreground_bash_returns_output_and_exit_code(root: Context) -> None:
    """The merged output, then the exit status; a non-zero exit is an error result."""
    agent = await new_agent(root)
    ok = await invoke(root, "bash", agent, command="echo hi")
    assert (ok.content, ok.is_error) == ("hi\n[exited with code 0]", False)
    failed = await invoke(root, "bash", agent, command="echo oops >&2; exit 2")
    assert (failed.content, failed.is_error) == ("oops\n[exited with code 2]", True)


async def test_foreground_bash_gets_no_stdin(root: Context) -> None:
    """`cat` returns at once with empty output."""
    result = await invoke(root, "bash", None, command="cat")
    assert result.content == "[exited with code 0]"


async def test_foreground_timeout_kills_the_command(root: Context) -> None:
    """A command over its timeout is killed; the model is told so."""
    tag = marker()
    result = await invoke(root, "bash", None, command=f"sleep 1000 # {tag}", timeout=0.3)
    assert result.is_error
    assert re.fullmatch(r"\[timed out after 0\.3 s; killed \(exit code -15\)\]", result.content)
    assert processes_with(tag) == []


async def test_timeout_above_the_maximum_is_refused_before_running(root: Context) -> None:
    """An error result that has not started anything."""
    result = await invoke(root, "bash", None, command="true", timeout=601)
    assert result.is_error
    assert not result.started
    assert re.match(r"^timeout 601 s exceeds the maximum of 600 s", result.content)


async def test_output_over_the_cap_carries_a_marker() -> None:
    """The model sees that output was dropped, and how much."""
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell(), {"output_cap": 100})
        await root.plugin(tool_bash)
        result = await invoke(root, "bash", None, command="yes abc | head -c 5000; echo END")
        job = await background(root, None, "yes abc | head -c 5000; echo END")
        done = first_completion(root)
        with trio.fail_after(10):
            await done.wait()
        read = await invoke(root, "bash_output", None, job_id=job)
    marker_line = "[... 4904 bytes of earlier output dropped (over the output cap) ...]"
    assert result.content.startswith(marker_line + "\n")
    assert result.content.endswith("abc\nEND\n[exited with code 0]")
    assert read.content.startswith(marker_line + "\n")


async def test_background_bash_answers_at_once_with_the_job_id(root: Context) -> None:
    """The job id comes back while the command is still running."""
    agent = await new_agent(root)
    job = await background(root, agent, f"sleep 1000 # {marker()}")
    assert job == "bash-1"
    assert shell_of(root).read_output(job).status is JobStatus.RUNNING
    read = await invoke(root, "bash_output", agent, job_id=job)
    assert read.content == "[running]"
    killed = await invoke(root, "bash_kill", agent, job_id=job)
    assert killed.content == "bash-1 killed"
    again = await invoke(root, "bash_kill", agent, job_id=job)
    assert again.content == "bash-1 had already ended"


async def test_unknown_job_is_an_error(root: Context) -> None:
    """A job id that was never given is reported, not treated as unowned."""
    result = await invoke(root, "bash_output", None, job_id="bash-42")
    assert result.is_error
    assert re.match(r"^no job 'bash-42'", result.content)


# -- ownership -----------------------------------------------------------------------------------


async def test_the_calling_agent_is_stamped_as_owner(root: Context) -> None:
    """The executor holds the calling agent's id as the job's owner token."""
    agent = await new_agent(root)
    job = await background(root, agent, "true")
    assert shell_of(root).owner_of(job) == agent.id
    unowned = await background(root, None, "true")
    assert shell_of(root).owner_of(unowned) is None


async def test_another_agent_cannot_read_or_kill_a_job(root: Context) -> None:
    """Both bash_output and bash_kill are refused to a different session; the job runs on."""
    owner, other = await new_agent(root), await new_agent(root)
    job = await background(root, owner, f"echo secret; sleep 1000 # {marker()}")
    for tool in ("bash_output", "bash_kill"):
        refused = await invoke(root, tool, other, job_id=job)
        assert refused.is_error
        assert re.fullmatch(REFUSED, refused.content)
    assert shell_of(root).read_output(job).status is JobStatus.RUNNING


async def test_a_caller_without_agent_cannot_reach_an_owned_job(root: Context) -> None:
    """No agent is not a wildcard."""
    owner = await new_agent(root)
    job = await background(root, owner, f"sleep 1000 # {marker()}")
    for tool in ("bash_output", "bash_kill"):
        refused = await invoke(root, tool, None, job_id=job)
        assert re.fullmatch(REFUSED, refused.content)
    assert shell_of(root).read_output(job).status is JobStatus.RUNNING


async def test_an_unowned_job_is_open_to_every_caller(root: Context) -> None:
    """A job started without an agent can be read and killed by anyone."""
    agent = await new_agent(root)
    job = await background(root, None, f"sleep 1000 # {marker()}")
    assert (await invoke(root, "bash_output", agent, job_id=job)).content == "[running]"
    assert (await invoke(root, "bash_kill", agent, job_id=job)).content == f"{job} killed"


async def test_an_empty_string_owner_is_a_real_owner(root: Context) -> None:
    """Owner "" refuses every agent and the caller with no agent (it is not "unowned")."""
    shell = shell_of(root)
    agent = await new_agent(root)
    with trio.fail_after(10):
        task = await shell.start(
            shell.resolve(ShellExecRequest(f"sleep 1000 # {marker()}", owner="", background=True))
        )
    for caller in (agent, None):
        for tool in ("bash_output", "bash_kill"):
            refused = await invoke(root, tool, caller, job_id=task.id)
            assert re.fullmatch(REFUSED, refused.content)
    assert shell.read_output(task.id).status is JobStatus.RUNNING


async def test_ownership_persists_after_the_job_ended(root: Context) -> None:
    """A finished job is still its owner's: others stay refused, the owner reads it."""
    owner, other = await new_agent(root), await new_agent(root)
    done = first_completion(root)
    job = await background(root, owner, "echo finished")
    with trio.fail_after(10):
        await done.wait()
    assert re.fullmatch(REFUSED, (await invoke(root, "bash_output", other, job_id=job)).content)
    read = await invoke(root, "bash_output", owner, job_id=job)
    assert read.content == "finished\n[exited with code 0]"


async def test_ownership_survives_a_reload_of_tool_bash(root: Context, tmp_path: Path) -> None:
    """After reloading tool_bash the executor still holds the token: the fence holds."""
    owner, other = await new_agent(root), await new_agent(root)
    tag = marker()
    started = tmp_path / "started"
    os.mkfifo(started)
    job = await background(root, owner, f"echo before; echo up > {started}; sleep 1000 # {tag}")
    with trio.fail_after(10):
        # "before" is in the job's pipe before anything is killed (the shell wrote it first),
        # so the output read after the kill below holds it whatever the scheduling.
        assert await read_fifo(started) == "up\n"
        new = await root.reload(tool_bash_module)
    assert [f.name for f in new] == ["tool-bash"]
    assert {"bash", "bash_output", "bash_kill"} <= set(root.get("tools").names())
    for tool in ("bash_output", "bash_kill"):
        assert re.fullmatch(REFUSED, (await invoke(root, tool, other, job_id=job)).content)
    assert (await invoke(root, "bash_kill", owner, job_id=job)).content == f"{job} killed"
    read = await invoke(root, "bash_output", owner, job_id=job)
    assert read.content == "before\n[killed (exit code -15)]"
    assert processes_with(tag) == []


async def test_tool_bash_reloads_again_and_again_by_its_public_name() -> None:
    """The program of issue #19: ``reload(ta.shell.tool_bash)`` twice, then by its first
    fiber; each time the live tool-bash is replaced and its tools answer."""
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell())
        first = await root.plugin(tool_bash)
        replaced = [first]
        for target in (tool_bash, tool_bash, first):
            with trio.fail_after(10):
                (new,) = await root.reload(target)
            assert replaced[-1].state is FiberState.DISPOSED
            assert new.plugin is sys.modules[tool_bash_module.__name__].tool_bash
            result = await invoke(root, "bash", None, command="echo alive")
            assert result.content == "alive\n[exited with code 0]"
            replaced.append(new)
        assert len({f.id for f in replaced}) == 4


# -- completion notices and agent-owned jobs -----------------------------------------------------


async def test_completion_notice_is_injected_into_the_owner(root: Context) -> None:
    """The owning agent finds the notice in its inbox; other agents do not."""
    owner, other = await new_agent(root), await new_agent(root)
    done = first_completion(root)
    job = await background(root, owner, "exit 3")
    with trio.fail_after(10):
        await done.wait()
    [queued] = owner.queued()
    assert queued.lane == "next_step"
    assert queued.content == (
        f"background job {job} ended: exited with code 3; read its output with "
        f'bash_output(job_id="{job}")'
    )
    assert other.queued() == ()


async def test_notice_after_a_reload_reaches_the_owner(root: Context) -> None:
    """The reloaded tool_bash listens again: a job started before the reload still notifies."""
    owner = await new_agent(root)
    tag = marker()
    job = await background(root, owner, f"sleep 1000 # {tag}")
    with trio.fail_after(10):
        await root.reload(tool_bash_module)
    await shell_of(root).kill(job)
    assert [m.content.split(":")[0] for m in owner.queued()] == [f"background job {job} ended"]


async def test_disposing_the_owner_kills_its_jobs_only(root: Context) -> None:
    """The agent's scope owns its jobs: disposal kills and awaits them, others run on."""
    handle = await root.agents.create()
    survivor = await new_agent(root)
    failures: list[ListenerFailed] = []
    root.on(ListenerFailed, failures.append)
    mine, theirs = marker(), marker()
    job = await background(root, handle.agent, f"sleep 1000 # {mine}")
    other_job = await background(root, survivor, f"sleep 1000 # {theirs}")
    with trio.fail_after(10):
        await handle.dispose()
    assert shell_of(root).read_output(job).status is JobStatus.KILLED
    assert processes_with(mine) == []
    assert shell_of(root).read_output(other_job).status is JobStatus.RUNNING
    assert failures == []


async def test_disposing_the_owner_kills_its_jobs_without_tool_bash(root: Context) -> None:
    """The tie to the agent's scope does not depend on tool_bash being loaded."""
    handle = await root.agents.create()
    tag = marker()
    job = await background(root, handle.agent, f"sleep 1000 # {tag}")
    [fiber] = [f for f in root.fiber.runtime.fibers if f.name == "tool-bash"]
    with trio.fail_after(10):
        await fiber.dispose()
        await handle.dispose()
    assert shell_of(root).read_output(job).status is JobStatus.KILLED
    assert processes_with(tag) == []


async def test_leaving_the_runtime_leaves_no_process_behind() -> None:
    """Agent-owned and unowned jobs, running at exit, are all gone afterwards."""
    owned, unowned = marker(), marker()
    async with ag.open_runtime() as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        agent = await new_agent(root)
        await background(root, agent, f"sleep 1000 & sleep 1000 # {owned}")
        await background(root, None, f"sleep 1000 # {unowned}")
        assert processes_with(owned) != []
        assert processes_with(unowned) != []
    assert processes_with(owned) == []
    assert processes_with(unowned) == []


# -- through the agent loop ----------------------------------------------------------------------


async def test_agent_runs_bash_end_to_end(root: Context) -> None:
    """`!bash echo hi` on the echo model: the session records a ToolResult with the output."""
    agent = (await root.agents.create(model=ScriptedModel.echo())).agent
    agent.prompt("!bash echo hi")
    with trio.fail_after(10):
        await agent.when_idle()
    results = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
    assert [(r.name, r.content, r.is_error) for r in results] == [
        ("bash", "hi\n[exited with code 0]", False)
    ]


async def test_cancelling_the_turn_kills_the_foreground_command(
    root: Context, tmp_path: Path
) -> None:
    """A foreground bash cancelled with its turn kills the command; the result says it ran."""
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    tag = marker()
    agent = (await root.agents.create(model=ScriptedModel.echo())).agent
    agent.prompt(f"!bash echo ready > {fifo}; sleep 1000 # {tag}")
    with trio.fail_after(10):
        assert await read_fifo(fifo) == "ready\n"
        assert processes_with(tag) != []
        assert agent.cancel() is True
        await agent.when_idle()
    assert processes_with(tag) == []
    [result] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
    assert (result.is_error, result.started) == (True, True)


async def test_a_background_job_of_a_disposed_agent_is_killed_at_once(root: Context) -> None:
    """A job cannot be tied to an agent that is gone, so it is not left running."""
    handle = await root.agents.create()
    agent = handle.agent
    with trio.fail_after(10):
        await handle.dispose()
    tag = marker()
    result = await invoke(
        root, "bash", agent, command=f"sleep 1000 # {tag}", run_in_background=True
    )
    assert result.is_error
    assert result.content == f"agent {agent.id} is closing; bash-1 was killed"
    assert shell_of(root).read_output("bash-1").status is JobStatus.KILLED
    assert processes_with(tag) == []


async def test_an_unowned_job_notifies_nobody(root: Context) -> None:
    """Without an owner there is no agent to tell: no inbox changes."""
    agents = [await new_agent(root), await new_agent(root)]
    done = first_completion(root)
    await background(root, None, "exit 1")
    with trio.fail_after(10):
        await done.wait()
    await trio.testing.wait_all_tasks_blocked()
    assert [agent.queued() for agent in agents] == [(), ()]


async def test_a_completion_without_an_agents_service_is_dropped_quietly() -> None:
    """The notice looks agents up with ctx.get (it runs on the shell's fiber): with no agents
    service it is simply not delivered, and no listener fails."""
    async with ag.open_runtime(core=False) as root:
        await root.plugin(tools_plugin)
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        failures: list[ListenerFailed] = []
        root.on(ListenerFailed, failures.append)
        done = first_completion(root)
        shell = shell_of(root)
        with trio.fail_after(10):
            await shell.start(shell.resolve(ShellExecRequest("true", owner="a", background=True)))
            await done.wait()
        assert failures == []
        read = await invoke(root, "bash_output", None, job_id="bash-1")
        assert re.fullmatch(REFUSED, read.content)
