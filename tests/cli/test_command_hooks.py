"""Command hooks: ``[[hooks]]`` in the config file, real commands, the installed command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import TRIO_AGENTS, Tools, alive, gone, read_fifo
from trio_agents.cancel import HookCancel
from trio_agents.cli._command_hooks import CommandHooks, HookEntry
from trio_agents.cli._config import ConfigFileError, parse
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import ToolCallEnded, TurnEnded


def _run(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        input="",
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_a_command_hook_vetoes_bash_through_the_installed_command(
    store: Path, tmp_path: Path
) -> None:
    """Exit 2 blocks the call with the command's stderr; the event reached it on stdin."""
    config = tmp_path / "trio-agents.toml"
    seen = tmp_path / "event.json"
    config.write_text(
        textwrap.dedent(
            f"""
            [[hooks]]
            event = "pre_tool"
            match = "bash"
            command = "cat > {seen}; echo 'no shell today' >&2; exit 2"
            """
        )
    )
    marker = tmp_path / "ran"
    result = _run(
        "run",
        f"!bash touch {marker}",
        "--yes",
        "--config",
        str(config),
        "--store",
        str(store),
        "--session",
        "s",
        home=tmp_path,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    assert "tool call 'bash' was blocked by a hook: no shell today" in result.stdout
    event = json.loads(seen.read_text())
    assert {k: event[k] for k in ("event", "tool", "arguments", "agent_id", "session_id")} == {
        "event": "pre_tool",
        "tool": "bash",
        "arguments": {"command": f"touch {marker}"},
        "agent_id": "s",
        "session_id": "s",
    }
    lines = (store / "s.jsonl").read_text().splitlines()[1:]
    ended = [json.loads(line) for line in lines if '"tool_result"' in line]
    assert [(e["is_error"], e["started"]) for e in ended] == [(True, False)]


def test_a_bad_hooks_table_is_one_problem_each() -> None:
    """Unknown and synchronous points, a bad match, policy and timeout are listed at once."""
    with pytest.raises(ConfigFileError) as caught:
        parse(
            {
                "hooks": [
                    {"event": "prompt_accepted", "command": "true"},
                    {"event": "turn_start", "command": "true", "match": "x"},
                    {"event": "pre_tool", "command": "true", "match": "(", "policy": "maybe"},
                    {"event": "pre_tool", "command": "true", "timeout": 0},
                    {"event": "nowhere", "command": "true"},
                ]
            }
        )
    problems = caught.value.problems
    assert [p.split(":", 1)[0] for p in problems] == [
        "hooks[0].event",
        "hooks[1].match",
        "hooks[2].match",
        "hooks[2].policy",
        "hooks[3].timeout",
        "hooks[4].event",
    ]
    assert re.match(r"^hooks\[0\]\.event: 'prompt_accepted' runs synchronously", problems[0])


def test_a_hooks_table_is_structured() -> None:
    """A valid table becomes a HookEntry; an integer timeout is seconds."""
    config = parse({"hooks": [{"event": "post_tool", "command": "true", "timeout": 3}]})
    assert config.hooks == (HookEntry("post_tool", "true", timeout=3),)


async def test_a_command_hook_is_killed_at_its_timeout(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The command's process group is killed at its limit; the hook failed, closed."""
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    command = f"sleep 1000 & echo $! > {fifo}; wait"
    entry = HookEntry("pre_tool", command, timeout=10, policy="fail_closed")
    model = ScriptedModel([[CallTool("nothing", {})], [Say("ok")]])

    async with ag.open_runtime(model=model) as root:
        await root.plugin(CommandHooks((entry,)))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        pid = int(await read_fifo(fifo))
        assert alive([pid]) == [pid]
        # The clock moves by hand only, once the command is surely running.
        mock_clock.jump(10)
        await agent.when_idle()
        [ended] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
        [turn] = [r for r in agent.session.records if isinstance(r, TurnEnded)]
        mock_clock.rate = 1.0  # real time from here: the kernel ends the killed sleep
        await gone(alive, [pid])
    assert ended.content.startswith("tool call 'nothing' was blocked by a hook: hook hooks[0]")
    assert ended.content.endswith("failed (timed out after 10 s) and fails closed")
    assert turn.stop_reason.value == "completed"


async def test_a_running_command_hook_is_killed_with_its_agent(tmp_path: Path) -> None:
    """Disposing the agent cancels its turn, and the hook's process group with it."""
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    entry = HookEntry("turn_start", f"sleep 1000 & echo $! > {fifo}; wait", timeout=1000)
    async with ag.open_runtime() as root:
        await root.plugin(CommandHooks((entry,)))
        handle = await root.agents.create()
        handle.agent.prompt("go")
        pid = int(await read_fifo(fifo))
        assert alive([pid]) == [pid]
        await handle.dispose()
        await gone(alive, [pid])
        [turn] = [r for r in handle.agent.session.records if isinstance(r, TurnEnded)]
    assert turn.stop_reason.value == "cancelled"


VETO_PLUGIN = """
from trio_agents.cancel import HookCancel

name = "no-secrets"
inject = ("hooks",)


def no_secrets(event):
    return HookCancel("it names a secret") if "secret" in event.content else None


async def apply(ctx, config):
    await ctx.hooks.add("prompt_accepted", no_secrets)
"""


def test_a_refused_prompt_is_one_line_of_the_installed_command(store: Path, tmp_path: Path) -> None:
    """``run`` with a prompt a plugin's prompt_accepted hook vetoes: one line, nothing stored."""
    (tmp_path / "no_secrets_plugin.py").write_text(VETO_PLUGIN)
    config = tmp_path / "trio-agents.toml"
    config.write_text('[[plugins]]\nmodule = "no_secrets_plugin"\n')
    args = ("--config", str(config), "--store", str(store), "--session", "s")
    result = _run("run", "the secret", *args, home=tmp_path, cwd=tmp_path)
    assert result.returncode == 1, result
    assert re.fullmatch(
        r"(?s).*trio-agents: error: agent s refused the message: it names a secret \(a "
        r"prompt_accepted hook vetoed it; nothing was queued\)\n",
        result.stderr,
    ), result.stderr
    assert "Traceback" not in result.stderr
    if (store / "s.jsonl").exists():
        assert "the secret" not in (store / "s.jsonl").read_text()


@attrs.frozen
class TextParams:
    text: str


def _echo() -> ag.Tool:
    async def run(call: ag.ToolContext, params: TextParams) -> str:
        return f"echoed {params.text}"

    return ag.Tool("echo", "Echo the text.", TextParams, run)


@pytest.mark.parametrize(
    ("event", "command", "content"),
    [
        (
            "pre_tool",
            """echo '{"decision": "block", "reason": "policy"}'""",
            "blocked by a hook: policy",
        ),
        ("pre_tool", """echo '{"arguments": {"text": "edited"}}'""", "echoed edited"),
        ("pre_tool", """echo '{"result": "instead"}'""", "instead"),
        ("post_tool", """echo '{"result": "replaced", "is_error": true}'""", "replaced"),
        ("post_tool", "echo just some text", "echoed hi"),
        ("post_tool", "echo '[1, 2]'", "echoed hi"),
    ],
)
async def test_a_command_answers_on_stdout(event: str, command: str, content: str) -> None:
    """On exit 0, a JSON object on stdout vetoes, edits the arguments or the result."""
    model = ScriptedModel([[CallTool("echo", {"text": "hi"})], [Say("ok")]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(Tools(_echo()))
        await root.plugin(CommandHooks((HookEntry(event, command),)))
        agent = (await root.agents.create()).agent
        assert await agent.ask("go") == "ok"
        [ended] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
    assert ended.content.endswith(content)


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (
            "echo oops >&2; exit 1",
            r"^CommandHookError: command 'echo oops >&2; exit 1' exited 1: oops$",
        ),
        ("echo '{not json'", r"^CommandHookError: its stdout starts with '\{' but is not JSON: "),
    ],
)
async def test_a_failing_command_is_contained_and_fails_open(command: str, error: str) -> None:
    """Another exit status, or stdout that is not JSON, is a failure the policy lets through."""
    failed: list[ag.HookFailed] = []
    async with ag.open_runtime() as root:
        root.on(ag.HookFailed, failed.append)
        await root.plugin(CommandHooks((HookEntry("turn_start", command),)))
        agent = (await root.agents.create()).agent
        assert await agent.ask("go") == "go"
    [failure] = failed
    assert re.match(error, failure.error), failure.error


async def test_the_event_a_command_reads_is_plain_json(tmp_path: Path) -> None:
    """A pre_model request is its size and tools; a turn_end stop reason is its value."""
    out = tmp_path / "events"
    entries = tuple(HookEntry(e, f"cat >> {out}; echo >> {out}") for e in ("pre_model", "turn_end"))
    async with ag.open_runtime() as root:
        await root.plugin(CommandHooks(entries))
        agent = (await root.agents.create(session_id="a")).agent
        await agent.ask("go")
    pre, end = (json.loads(line) for line in out.read_text().splitlines())
    assert pre == {
        "event": "pre_model",
        "agent_id": "a",
        "session_id": "a",
        "turn_id": "t-1",
        "request": {"messages": 1, "tools": []},
    }
    assert end == {
        "event": "turn_end",
        "agent_id": "a",
        "session_id": "a",
        "turn_id": "t-1",
        "stop_reason": "completed",
        "answer": "go",
    }


async def test_exit_2_without_stderr_still_says_why(tmp_path: Path) -> None:
    """A silent exit 2 vetoes with the command named; post_model reads the calls as JSON."""
    out = tmp_path / "event"
    entries = (HookEntry("post_model", f"cat > {out}; exit 2"),)
    model = ScriptedModel([[CallTool("echo", {"text": "hi"})]])
    async with ag.open_runtime(model=model) as root:
        await root.plugin(CommandHooks(entries))
        agent = (await root.agents.create()).agent
        with pytest.raises(ag.TurnFailedError) as caught:
            await agent.ask("go")
    assert caught.value.record.cause == HookCancel(f"command 'cat > {out}; exit 2' exited 2")
    calls = json.loads(out.read_text())["calls"]
    assert calls == [{"call_id": "call-1", "name": "echo", "arguments": {"text": "hi"}}]
