"""The command run in this process: ``trio_agents.cli.main([...])`` with captured output.

The subprocess tests (``tests/cli/test_commands.py``, ``tests/cli/test_chat.py``) pin the
installed entry point; these pin the same behaviour, and the paths a subprocess cannot easily
reach (a model that fails, Ctrl-C at a precise moment, a bug in the command), in-process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import signal
import sys
import textwrap
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path

import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.cli_support import run_cli, use_model
from trio_agents.cli import _demo, _main, _options, main
from trio_agents.cli._logs import CliLog
from trio_agents.cli._run import _turn_of
from trio_agents.model import CallTool, Fail, ModelRequest, ScriptedModel, Wait
from trio_agents.model._stream import ModelEvent
from trio_agents.session import JsonlStore, UserMessage
from trio_agents.shell import LocalShell, tool_bash

pytestmark = pytest.mark.usefixtures("cli_environment")


class CtrlC:
    """A model that presses Ctrl-C (SIGINT to this process) as its turn starts, then waits."""

    name = "ctrl-c"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        signal.raise_signal(signal.SIGINT)
        async with aclosing(ScriptedModel([[Wait(3600)]]).stream(request)) as events:
            async for event in events:
                yield event


# -- run ---------------------------------------------------------------------------------------


def test_run_streams_the_answer_and_names_the_session_file(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """stdout carries the answer alone; stderr names the session file; status 0."""
    status, out, err = run_cli(capsys, "run", "hello there", "--store", str(store))
    (session_file,) = store.glob("*.jsonl")
    assert (status, out) == (0, "hello there\n")
    assert err == f"session {session_file.stem} ({session_file})\n"


def test_run_on_the_memory_store_names_no_file(capsys: pytest.CaptureFixture[str]) -> None:
    """With ``--store memory`` the closing line has the id and no path."""
    status, out, err = run_cli(capsys, "run", "hi", "--store", "memory", "--session", "s1")
    assert (status, out, err) == (0, "hi\n", "session s1\n")


def test_run_of_a_failing_model_is_one_line_and_status_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn that ends with an error prints nothing on stdout and names the error once."""
    use_model(monkeypatch, ScriptedModel([[Fail("the model broke")]]))
    status, out, err = run_cli(capsys, "run", "hi", "--store", "memory")
    assert (status, out) == (1, "")
    assert re.fullmatch(
        r"trio-agents: error: turn t-1 ended with error: .*the model broke.*\n", err
    ), err


def test_run_with_a_turn_that_calls_a_tool_streams_only_the_text(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tool calls are not printed by ``run``; the final text is."""
    use_model(monkeypatch, ScriptedModel([[CallTool("bash", {"command": "echo quiet"})], "done"]))
    status, out, _ = run_cli(capsys, "run", "hi", "--store", "memory")
    assert (status, out) == (0, "done\n")


def test_ctrl_c_during_run_cancels_the_turn_and_exits_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, store: Path
) -> None:
    """SIGINT while the turn runs cancels it with UserCancel (recorded); one line, 130."""
    use_model(monkeypatch, CtrlC())
    status, out, err = run_cli(capsys, "run", "hi", "--session", "c", "--store", str(store))
    assert (status, out) == (130, "")
    assert err == f"trio-agents: cancelled; session c ({store / 'c.jsonl'})\n"
    ended = [json.loads(line) for line in (store / "c.jsonl").read_text().splitlines()][-1]
    assert (ended["type"], ended["stop_reason"]) == ("turn_ended", "cancelled")
    assert ended["cause"] == {"type": "user_cancel"}


def test_a_prompt_whose_turn_never_ran_or_never_ended_has_no_ending() -> None:
    """``run`` reports as cancelled a prompt that no turn claimed, or whose turn has no end."""
    claimed = UserMessage(message_id="m-1", turn_id="t-1", content="hi")
    assert _turn_of((), "m-1") is None
    assert _turn_of((claimed,), "m-1") is None
    assert _turn_of((claimed,), "m-2") is None


# -- errors and interrupts at the entry point -----------------------------------------------


def test_ctrl_c_outside_a_turn_is_interrupted_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C that no command catches ends the command with one line and status 130."""
    monkeypatch.setattr(_demo, "resolve_model", lambda spec: CtrlC())
    status, _, err = run_cli(capsys, "demo", "--store", "memory")
    assert status == 130
    assert err == "trio-agents: interrupted\n"


def test_a_bug_in_a_command_is_not_disguised_as_a_user_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An exception that is neither a TrioAgentsError nor an OSError propagates (a traceback)."""

    async def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(_main, "_command", lambda name: broken)
    with pytest.raises(RuntimeError, match=r"^a bug$"):
        main(["sessions", "list", "--store", "memory"])


def test_os_errors_are_described_with_their_file_when_they_have_one() -> None:
    """``path: reason`` for a file's error, the reason alone otherwise, else the type."""
    assert _main._describe(FileNotFoundError(2, "No such file", "/x")) == "/x: No such file"
    assert _main._describe(OSError(5, "I/O error")) == "I/O error"
    assert _main._describe(OSError()) == "OSError"
    assert _main._describe(_options.CliError("be careful")) == "be careful"


def test_watch_without_watchfiles_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--watch`` when ``watchfiles`` is not installed says how to install it."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "watchfiles" else find_spec(name, *a),
    )
    status, out, err = run_cli(capsys, "run", "hi", "--watch", "--store", "memory")
    assert (status, out) == (1, "")
    assert err == (
        "trio-agents: error: --watch needs the watchfiles package: "
        "pip install 'trio-agents[watch]'\n"
    )


def test_watch_without_plugin_files_watches_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """``--watch`` with no plugin modules to watch runs the command as usual."""
    status, out, _ = run_cli(capsys, "run", "hi", "--watch", "--store", "memory")
    assert (status, out) == (0, "hi\n")


PLUGINS = """
from trio_agents.model import ModelError

name = "{name}"


async def apply(ctx, config):
    raise {error}
"""


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            "ValueError('no greeting')",
            r"plugin cli_failing_\w+ failed to start: ValueError: no greeting",
        ),
        ("ModelError('no model for me')", r"no model for me"),
    ],
)
def test_a_plugin_that_fails_to_start_is_reported_once(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    error: str,
    message: str,
) -> None:
    """A config plugin whose apply raises: one error line (the kernel's log is not repeated)."""
    module = f"cli_failing_{error[:5].lower()}"
    monkeypatch.setattr("sys.path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, module, raising=False)
    (tmp_path / f"{module}.py").write_text(PLUGINS.format(name=module, error=error))
    config = tmp_path / "c.toml"
    config.write_text(f'[[plugins]]\nmodule = "{module}"\n')
    status, out, err = run_cli(capsys, "run", "hi", "--config", str(config), "--store", "memory")
    assert (status, out) == (1, "")
    assert re.fullmatch(rf"trio-agents: error: {message}\n", err), err


# -- sessions ----------------------------------------------------------------------------------


def _store_a_session(store: Path) -> str:
    """A session with tool calls, a failed turn, a cancelled one and a prompt left queued."""

    async def build() -> str:
        model = ScriptedModel(
            [
                [CallTool("bash", {"command": "echo out"})],
                [CallTool("nope", {})],
                "tools [done]",
                [Fail("it [broke]")],
                [Wait(3600)],
                [Wait(3600)],
            ]
        )
        async with ag.open_runtime(store=JsonlStore(store), model=model) as root:
            await root.plugin(LocalShell())
            await root.plugin(tool_bash)
            running = trio.Event()
            root.on(
                ag.AgentStatusChanged, lambda e: e.new is ag.AgentStatus.RUNNING and running.set()
            )
            handle = await root.agents.create(session_id="kept")
            agent: ag.Agent = handle.agent
            for prompt in ("use [the] tools", "fail"):
                agent.prompt(prompt)
                await agent.when_idle()
            for prompt in ("wait", "wait again"):
                running = trio.Event()
                agent.prompt(prompt)
                await running.wait()
                agent.prompt("dropped" if prompt == "wait" else "left [queued]")
                if prompt == "wait":
                    agent.cancel()
                    await agent.when_idle()
            await handle.dispose()
            return agent.id

    session_id: str = trio.run(build)
    return session_id


def test_sessions_show_prints_every_kind_of_record(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """Prompts, answers, tools, turn endings and still-queued prompts, escaped; no dropped ones."""
    session_id = _store_a_session(store)
    status, out, _ = run_cli(capsys, "sessions", "show", session_id, "--store", str(store))
    assert status == 0
    lines = out.splitlines()
    assert lines[:5] == [
        "user: use [the] tools",
        "tool call bash {'command': 'echo out'}",
        "tool result out",
        "[exited with code 0]",
        "tool call nope {}",
    ]
    assert re.fullmatch(r"tool result unknown tool 'nope'.*", lines[5]), lines
    assert lines[6:9] == [
        "agent: tools [done]",
        "turn t-1: completed · 26 in, 2 out tokens (3 requests)",
        "user: fail",
    ]
    assert re.fullmatch(r"turn t-2: error: .*it \[broke\].*", lines[9]), lines
    assert lines[10:14] == [
        "user: wait",
        "turn t-3: cancelled by UserCancel",
        "user: wait again",
        "turn t-4: cancelled by DisposedCancel",
    ]
    assert re.fullmatch(r"queued \(m-\d+\): left \[queued\]", lines[14]), lines
    assert lines[15:] == ["usage: 26 in, 2 out tokens (3 requests)"]


def test_sessions_of_the_memory_store(capsys: pytest.CaptureFixture[str]) -> None:
    """The memory store lists nothing and names no directory for an unknown id."""
    assert run_cli(capsys, "sessions", "list", "--store", "memory") == (
        0,
        "no stored sessions\n",
        "",
    )
    status, _, err = run_cli(capsys, "sessions", "delete", "x", "--store", "memory")
    assert (status, err) == (
        1,
        "trio-agents: error: no stored session 'x'; 'trio-agents sessions list' shows the ids\n",
    )


def test_sessions_list_shows_id_records_and_title(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """Each stored session is a row: its id, how many records, when, its first prompt."""
    assert main(["run", "a [title]", "--session", "one", "--store", str(store)]) == 0
    capsys.readouterr()
    status, out, _ = run_cli(capsys, "sessions", "list", "--store", str(store))
    assert status == 0
    assert re.search(r"one\W+\d+\W+\d{4}-\d\d-\d\d \d\d:\d\d\W+a \[title\]", out), out


# -- demo --------------------------------------------------------------------------------------


def test_demo_runs_again_on_the_same_store(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    """A second run on the store of the first passes too: no session id is fixed."""
    assert run_cli(capsys, "demo", "--store", str(store))[0] == 0
    status, _, err = run_cli(capsys, "demo", "--store", str(store))
    assert (status, err) == (0, "")


def test_demo_walks_the_lifecycle_and_names_the_session_file(
    capsys: pytest.CaptureFixture[str], store: Path
) -> None:
    """Every step is narrated; the cancelled prompt never ran, the later one did."""
    status, out, _ = run_cli(capsys, "demo", "--store", str(store))
    assert status == 0
    for step in ("1. a prompt, streamed", "2. queue, steer and cancel", "6. dispose"):
        assert step in out
    assert re.search(r"(m-\d+) ran: False;  (m-\d+) ran: True", out), out
    assert "another agent asks for its output:" in out
    assert "completion notice injected into the owner:" in out
    assert "live agents after dispose: 0" in out
    # 5.: a child started and ended under the lead, then the lead's budget stopped its turn.
    lead = re.search(
        r"task (s-\w+) started child (s-\w+).*task child \2 ended completed", out, re.S
    )
    assert lead is not None, out
    assert f"turn t-2 ended: cancelled, cause BudgetExhausted(owner_id='{lead[1]}'" in out
    found = re.search(r"session written to (\S+\.jsonl)", out)
    assert found is not None
    assert Path(found[1]).parent == store
    assert Path(found[1]).is_file()


def test_demo_on_memory_with_a_model_spec_writes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--model`` is used as given; with ``--store memory`` no file is named."""
    status, out, err = run_cli(capsys, "demo", "--store", "memory", "--model", "echo?delay=0")
    assert status == 0, err
    assert "model echo, sessions in memory" in out
    assert "session written to" not in out


# -- acp ---------------------------------------------------------------------------------------


def test_acp_answers_on_stdout_and_exits_at_end_of_input(
    capfd: pytest.CaptureFixture[str], stdin_pipe: int
) -> None:
    """A request on stdin is answered in one frame on stdout; end of input ends the server."""
    request = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}
    os.write(stdin_pipe, json.dumps(request).encode() + b"\n")
    os.close(stdin_pipe)
    assert main(["acp", "--store", "memory"]) == 0
    out, _ = capfd.readouterr()
    [line] = out.splitlines()
    answer = json.loads(line)
    assert (answer["id"], answer["result"]["protocolVersion"]) == (7, 1)


# -- the log -----------------------------------------------------------------------------------


def _record(message: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("trio_agents", logging.ERROR, __file__, 1, message, (), exc_info)


def test_the_log_drops_lines_about_the_reported_error_and_its_group(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A line about an exception inside the reported group (or its cause) is not repeated."""
    leaf = ValueError("inner")
    cause = KeyError("why")
    leaf.__cause__ = cause
    log = CliLog()
    log.emit(_record("about the leaf", leaf))
    log.emit(_record("about its cause", cause))
    log.emit(_record("something else", RuntimeError()))
    log.emit(_record("plain"))
    log.publish(ExceptionGroup("reported", [leaf]))
    assert capsys.readouterr().err == textwrap.dedent(
        """\
        trio-agents: error: something else: RuntimeError
        trio-agents: error: plain
        """
    )


def test_the_log_prints_as_lines_come_while_live(capsys: pytest.CaptureFixture[str]) -> None:
    """After go_live each line is printed at once; after hold they wait for publish."""
    log = CliLog()
    log.emit(_record("held"))
    log.go_live()
    log.emit(_record("live"))
    assert capsys.readouterr().err == "trio-agents: error: held\ntrio-agents: error: live\n"
    log.hold()
    log.emit(_record("held again"))
    assert capsys.readouterr().err == ""
    log.publish()
    assert capsys.readouterr().err == "trio-agents: error: held again\n"


def test_an_error_printed_live_is_known_as_shown(capsys: pytest.CaptureFixture[str]) -> None:
    """What a live line was about is remembered, so the command's exit does not print it a
    second time (chat: a session write failure, then the teardown's flush raising it)."""
    printed, held, other = OSError("live"), OSError("held"), OSError("other")
    log = CliLog()
    log.emit(_record("before going live", held))
    log.go_live()
    log.emit(_record("as it happened", printed))
    assert log.shown(printed)
    assert not log.shown(held)  # printed by publish, not live: the exit reports it itself
    assert not log.shown(other)
    assert capsys.readouterr().err.count("trio-agents: error:") == 2


def test_debug_keeps_pythons_own_logging(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With TRIO_AGENTS_DEBUG the handler is not installed: records reach the root logger."""
    monkeypatch.setenv("TRIO_AGENTS_DEBUG", "1")
    logger = logging.getLogger("trio_agents")
    log = CliLog().install()
    try:
        assert log not in logger.handlers
        logger.warning("seen by python")
    finally:
        log.uninstall()
    assert log not in logger.handlers
    assert [r.getMessage() for r in caplog.records] == ["seen by python"]
    log.publish()
    assert capsys.readouterr().err == ""
