"""The command's workspace: every agent gets the file tools and the plan beside bash, writes
are asked about by default, and a new session's system prompt holds the project
instructions unless ``--no-project-files``."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from tests.helpers.cli_support import run_cli
from tests.helpers.command_support import env_for
from tests.helpers.support import TRIO_AGENTS
from trio_agents.cli._chat_view import ChatView
from trio_agents.cli._config import parse
from trio_agents.cli._options import Settings, open_cli_runtime, resolve_model
from trio_agents.model import CallTool, ScriptedModel
from trio_agents.workspace import project_instructions
from trio_agents.workspace._instructions import INSTRUCTION_FILES, MAX_BYTES, instruction_files

FILE_TOOLS = ("read_file", "write_file", "edit_file", "list_files", "glob", "grep", "plan")


async def test_the_command_gives_file_tools_and_asks_before_writes() -> None:
    """The file tools and plan are registered; write_file and edit_file need approval, the
    readers and plan do not; [approval] allow names a write tool to run it unasked."""
    settings = Settings(model=resolve_model(None), store="memory")
    async with open_cli_runtime(settings) as root:
        tools = root.get("tools")
        assert set(FILE_TOOLS) <= set(tools.names())
        asked = {n for n in FILE_TOOLS if tools.needs_approval(n)}
        assert asked == {"write_file", "edit_file"}
    allowed = Settings(
        model=resolve_model(None),
        store="memory",
        config=parse({"approval": {"allow": ["edit_file"]}}),
    )
    async with open_cli_runtime(allowed) as root:
        tools = root.get("tools")
        assert not tools.needs_approval("edit_file")
        assert tools.needs_approval("write_file")


def test_run_refuses_a_write_without_yes_and_writes_with_it(tmp_path: Path) -> None:
    """`run '!tool write_file ...'` from a pipe writes nothing unless --yes."""

    target = tmp_path / "made.txt"
    prompt = f"!tool write_file {json.dumps({'path': str(target), 'content': 'hi'})}"

    def command(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TRIO_AGENTS), "run", prompt, "--store", "memory", *extra],
            capture_output=True,
            text=True,
            env=env_for(tmp_path),
            cwd=tmp_path,
            timeout=60,
            check=False,
        )

    refused = command()
    assert refused.returncode == 0, refused
    assert not target.exists()
    assert re.search(r"refused write_file .*needs approval", refused.stderr)
    allowed = command("--yes")
    assert allowed.returncode == 0, allowed
    assert target.read_text() == "hi"


def _instructions(store: Path, session_id: str) -> str | None:
    for line in (store / f"{session_id}.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "agent_configured":
            instructions: str | None = record["instructions"]
            return instructions
    raise AssertionError("no agent_configured record")


def test_run_puts_agents_md_in_the_system_prompt_unless_no_project_files(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A new session's AgentConfigured holds AGENTS.md; --no-project-files leaves it out."""
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)
    (work / "AGENTS.md").write_text("Answer in French.\n")
    store = tmp_path / "store"
    monkeypatch.chdir(work)
    assert run_cli(capsys, "run", "hi", "--store", str(store), "--session", "a")[0] == 0
    assert _instructions(store, "a") == (
        f"# Project instructions from {work / 'AGENTS.md'}\n\nAnswer in French."
    )
    assert (
        run_cli(capsys, "run", "hi", "--store", str(store), "--session", "b", "--no-project-files")
    )[0] == 0
    assert _instructions(store, "b") is None


def test_instructions_stop_at_the_repository_root(tmp_path: Path) -> None:
    """Outside a repository the walk goes up past every parent; a .git ends it there, and
    in one directory AGENTS.md comes before CLAUDE.md."""
    top, repo = tmp_path / "top", tmp_path / "top" / "repo"
    cwd = repo / "a" / "b"
    cwd.mkdir(parents=True)
    for directory in (top, repo, cwd):
        for name in INSTRUCTION_FILES:
            (directory / name).write_text(f"{name} of {directory.name}\n")
    assert instruction_files(str(cwd))[:2] == [str(top / "AGENTS.md"), str(top / "CLAUDE.md")]
    (repo / ".git").mkdir()
    assert instruction_files(str(cwd)) == [
        str(repo / "AGENTS.md"),
        str(repo / "CLAUDE.md"),
        str(cwd / "AGENTS.md"),
        str(cwd / "CLAUDE.md"),
    ]


def test_a_long_instruction_file_is_cut_and_says_so(tmp_path: Path) -> None:
    """Only the first MAX_BYTES bytes are kept, with a line naming the file; the given
    instructions come first."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("x" * (MAX_BYTES + 10))
    text = project_instructions(str(tmp_path), "Be brief.")
    assert text is not None
    assert text.startswith("Be brief.\n\n# Project instructions from ")
    assert text.count("x") == MAX_BYTES
    assert text.endswith(f"is not included: it is over {MAX_BYTES} bytes]")
    bare = tmp_path / "bare"
    (bare / ".git").mkdir(parents=True)
    assert project_instructions(str(bare), "Be brief.") == "Be brief."


def test_run_prints_the_plan_compactly_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A plan call shows as one line per entry (done, in progress, to do) on stderr."""
    plan = {
        "entries": [
            {"content": "read", "status": "completed"},
            {"content": "fix", "status": "in_progress", "priority": "high"},
            {"content": "test"},
        ]
    }
    status, out, err = run_cli(capsys, "run", f"!tool plan {json.dumps(plan)}", "--store", "memory")
    assert status == 0
    assert "plan:\n  ✓ read\n  ▸ fix !\n  ○ test\n" in err
    assert "tool plan returned: plan: 1 done, 1 in progress, 1 to do" in out


async def test_chat_shows_a_plan_call_one_line_per_entry() -> None:
    """The chat view prints a plan call as its entries, not as JSON."""
    settings = Settings(model=resolve_model(None), store="memory")
    async with open_cli_runtime(settings) as root:
        plan = {"entries": [{"content": "a", "status": "completed"}, {"content": "b"}]}
        model = ScriptedModel([[CallTool("plan", plan)], "ok"])
        agent = (await root.agents.create(model=model)).agent
        out = io.StringIO()
        view = ChatView(Console(file=out, width=200, highlight=False), agent)
        view.listen(root)
        agent.prompt("go")
        await agent.when_idle()
        view.close()
    assert "→ plan\n  ✓ a\n  ○ b\n← plan: 1 done, 0 in progress, 1 to do\n" in out.getvalue()
