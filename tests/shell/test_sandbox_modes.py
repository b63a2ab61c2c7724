"""The sandbox per mode and per agent, with the real bubblewrap: ``plan`` runs bash read-only,
an agent's own policy (and its children's) holds its commands tighter, neither loosens the
shell's; ``[[agents]] sandbox`` in the config file; ``acp --sandbox`` does not ask about bash."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import trio_agents.agent as ag
from tests.helpers.cli_support import run_cli
from tests.helpers.sandbox_support import require_bwrap
from tests.helpers.support import TRIO_AGENTS
from trio_agents.kernel import Context
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import ToolCallEnded
from trio_agents.shell import LocalShell, SandboxShell, ShellRequestError, tool_bash
from trio_agents.shell._sandbox import stricter

acp = pytest.importorskip("acp")


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def commands(*lines: str) -> ScriptedModel:
    """One turn per line: run it with bash, then say ``ok``."""
    replies: list[Sequence[CallTool | Say]] = []
    for line in lines:
        replies += [[CallTool("bash", {"command": line})], [Say("ok")]]
    return ScriptedModel(replies)


@asynccontextmanager
async def sandboxed(
    model: ScriptedModel, policy: str = "workspace-write", sandboxes: dict[str, str] | None = None
) -> AsyncIterator[Context]:
    async with ag.open_runtime(model=model) as root:
        await root.plugin(SandboxShell(), SandboxShell.Config(policy=policy))
        await root.plugin(tool_bash, {"sandboxes": sandboxes or {}})
        yield root


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def results(agent: ag.Agent, count: int) -> list[ToolCallEnded]:
    for n in range(count):
        agent.prompt(f"go {n}")
        await agent.when_idle()
    return [r for r in agent.session.records if isinstance(r, ToolCallEnded)]


async def test_plan_mode_runs_bash_read_only_in_a_sandbox(tmp_path: Path) -> None:
    """Sandboxed, plan does not refuse bash: it reads, and its write fails read-only; back in
    ask the same write works (workspace-write)."""
    (tmp_path / "notes.txt").write_text("hello\n")
    model = commands("cat notes.txt", "touch planned", "touch asked")
    async with sandboxed(model) as root:
        agent = (await root.agents.create(cwd=tmp_path)).agent
        agent.set_mode("plan")
        read, planned = await results(agent, 2)
        agent.set_mode("ask")
        *_, asked = await results(agent, 1)
    assert (read.is_error, read.content.splitlines()[0]) == (False, "hello")
    assert planned.is_error
    assert "Read-only file system" in planned.content
    assert not (tmp_path / "planned").exists()
    assert not asked.is_error
    assert (tmp_path / "asked").exists()


async def test_without_a_sandbox_plan_still_refuses_bash(tmp_path: Path) -> None:
    """On LocalShell, bash is not sandboxed: plan refuses it before it runs."""
    async with ag.open_runtime(model=commands("touch made")) as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        agent = (await root.agents.create(cwd=tmp_path)).agent
        agent.set_mode("plan")
        [ended] = await results(agent, 1)
    assert re.match(r"^tool 'bash' is not available in the 'plan' mode", ended.content)
    assert not (tmp_path / "made").exists()


async def test_an_agents_own_policy_holds_it_and_its_children(tmp_path: Path) -> None:
    """sandboxes={"ro": "read-only"}: agent ro and its child cannot write; another agent can."""
    async with sandboxed(commands("touch by-ro"), sandboxes={"ro": "read-only"}) as root:
        ro = (await root.agents.create(session_id="ro", cwd=tmp_path)).agent
        [denied] = await results(ro, 1)
        child = (
            await root.agents.create(commands("touch by-child"), parent=ro, cwd=tmp_path)
        ).agent
        [child_denied] = await results(child, 1)
        other = (await root.agents.create(commands("touch by-other"), cwd=tmp_path)).agent
        [allowed] = await results(other, 1)
    assert "Read-only file system" in denied.content
    assert "Read-only file system" in child_denied.content
    assert not allowed.is_error
    assert names(tmp_path) == ["by-other"]


async def test_a_mode_or_an_agent_never_loosens_the_shells_policy(tmp_path: Path) -> None:
    """A read-only shell stays read-only for an agent in edit mode whose own policy is
    danger-full-access."""
    async with sandboxed(
        commands("touch made"), "read-only", sandboxes={"loose": "danger-full-access"}
    ) as root:
        agent = (await root.agents.create(session_id="loose", cwd=tmp_path)).agent
        agent.set_mode("edit")
        [ended] = await results(agent, 1)
    assert "Read-only file system" in ended.content
    assert not (tmp_path / "made").exists()


def test_stricter_orders_the_policies() -> None:
    """read-only beats workspace-write beats danger-full-access; None asks nothing."""
    assert stricter("workspace-write", "read-only") == "read-only"
    assert stricter("read-only", "danger-full-access") == "read-only"
    assert stricter("workspace-write", None) == "workspace-write"


async def test_a_request_with_an_unknown_policy_is_refused() -> None:
    """ShellExecRequest(policy="open") is a ShellRequestError naming the policies."""
    from trio_agents.shell import ShellExecRequest

    async with sandboxed(commands()) as root:
        shell = root.get("shell")
        with pytest.raises(ShellRequestError, match=r"^policy is one of read-only, "):
            shell.resolve(ShellExecRequest("true", policy="open"))


def test_a_bad_sandbox_of_an_agent_is_refused_by_tool_bash() -> None:
    """ToolBash.Config refuses a policy that is no policy, naming the agent."""
    with pytest.raises(ValueError, match=r"^the sandbox of agent 'a' is one of read-only, "):
        tool_bash.Config(sandboxes={"a": "open"})


def test_a_declared_agents_sandbox_holds_its_commands(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[[agents]] sandbox = "read-only" under --sandbox workspace-write: that agent's bash
    runs unasked and cannot write."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nid = "reader"\nsandbox = "read-only"\n')
    status, out, err = run_cli(
        capsys,
        "run",
        "--store",
        "memory",
        "--config",
        str(config),
        "--sandbox",
        "workspace-write",
        "!bash touch made",
    )
    assert "touch: cannot touch 'made': Read-only file system" in out, out + err
    assert not (tmp_path / "made").exists()
    assert status == 0


def test_a_declared_agents_unknown_sandbox_is_a_config_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """agents[0].sandbox = "open" is one problem at its place, before anything starts."""
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nid = "x"\nsandbox = "open"\n')
    status, _, err = run_cli(capsys, "run", "--store", "memory", "--config", str(config), "hi")
    assert status != 0
    assert re.search(r"agents\[0\]\.sandbox: 'open' is not a policy; use one of read-only", err)


class Recorder:
    """An ACP client that counts the permission requests (and rejects them)."""

    def __init__(self) -> None:
        self.asked = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        return None

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        self.asked += 1
        return acp.RequestPermissionResponse(outcome=acp.schema.DeniedOutcome(outcome="cancelled"))


def test_acp_with_a_sandbox_runs_bash_unasked_and_plan_read_only(tmp_path: Path) -> None:
    """``trio-agents acp --sandbox workspace-write``: bash runs without a permission request;
    in plan it still runs, read-only."""

    async def main() -> None:
        recorder = Recorder()
        async with acp.spawn_agent_process(
            recorder,
            str(TRIO_AGENTS),
            "acp",
            "--store",
            "memory",
            "--sandbox",
            "workspace-write",
            transport_kwargs={"stderr": None},
            env=dict(os.environ),
        ) as (conn, _):
            await conn.initialize(protocol_version=1)
            session = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            text = [acp.text_block("!bash touch asked")]
            assert (await conn.prompt(session_id=session, prompt=text)).stop_reason == "end_turn"
            await conn.set_session_mode(session_id=session, mode_id="plan")
            text = [acp.text_block("!bash touch planned")]
            assert (await conn.prompt(session_id=session, prompt=text)).stop_reason == "end_turn"
        assert recorder.asked == 0

    asyncio.run(asyncio.wait_for(main(), 30))
    assert (tmp_path / "asked").exists()
    assert not (tmp_path / "planned").exists()
