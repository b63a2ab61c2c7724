"""Signals to the installed ``trio-agents``: SIGTERM and SIGHUP tear down like SIGINT (every
job process gone, sessions flushed, status 128 + signum); SIGKILL of the command still ends
its jobs (Linux, the per-job supervisor); plugin teardown that fails, hangs, or a plugin that
exits at import, each end with one line naming the plugin.

Every wait is for a file the job writes or for the process to exit, with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.command_support import Command, acp_prompt, env_for
from tests.helpers.supervision_support import DEADLINE, wait_until
from tests.helpers.support import TRIO_AGENTS, alive, family
from trio_agents.cli._main import _TEARDOWN
from trio_agents.kernel import open_root
from trio_agents.shell._child import supervisor_available

linux_only = pytest.mark.skipif(not supervisor_available(), reason="needs the job supervisor")


def family_pids(directory: Path) -> list[int]:
    wait_until((directory / "sh").exists, "the job to start")
    return [int((directory / n).read_text()) for n in ("sh", "sleep", "setsid", "double")]


@pytest.fixture
def job_dir(tmp_path: Path) -> Iterator[Path]:
    """Where the job writes its pids; whatever is still alive at the end is killed."""
    directory = tmp_path / "job"
    directory.mkdir()
    yield directory
    for name in ("sh", "sleep", "setsid", "double"):
        path = directory / name
        if path.exists():
            for pid in alive([int(path.read_text())]):
                os.kill(pid, signal.SIGKILL)


def start(kind: str, tmp_path: Path, job_dir: Path, *extra: str) -> Command:
    """``run``, ``chat`` (prompts from a pipe) or ``acp``, running the family as a bash call."""
    store = tmp_path / "sessions"
    prompt = f"!bash {family(job_dir)}"
    if kind == "run":
        command = Command(tmp_path, "run", prompt, "--yes", "--store", str(store), *extra)
        command.stdin.close()  # run reads piped stdin to its end before it starts the turn
    elif kind == "chat":
        command = Command(tmp_path, "chat", "--store", str(store), *extra)
        command.stdin.write(prompt.encode() + b"\ny\n")  # y: the answer to "allow bash?"
        command.stdin.flush()
    else:
        command = Command(tmp_path, "acp", "--allow-bash", "--store", str(store), *extra)
        acp_prompt(command, prompt)
    return command


def stored_records(tmp_path: Path) -> list[dict[str, Any]]:
    (path,) = (tmp_path / "sessions").glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- SIGTERM and SIGHUP tear down like SIGINT -------------------------------------------------


ENDINGS = [
    (kind, signum)
    for kind in ("run", "chat", "acp")
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
    # chat's own Ctrl-C cancels the turn and chats on (tests/cli/test_chat.py).
    if (kind, signum) != ("chat", signal.SIGINT)
]


@linux_only
@pytest.mark.parametrize(("kind", "signum"), ENDINGS)
def test_a_signal_ends_every_job_process_and_flushes_the_session(
    kind: str, signum: signal.Signals, tmp_path: Path, job_dir: Path
) -> None:
    """The shell, its sleep, a setsid sleep and an orphan are all gone when the command has
    exited with 128 + signum, and the interrupted turn is closed in the stored session."""
    command = start(kind, tmp_path, job_dir)
    try:
        pids = family_pids(job_dir)
        assert alive(pids) == pids
        command.process.send_signal(signum)
        status = command.wait()
    finally:
        command.close()
    expected = 130 if (signum is signal.SIGINT and kind == "run") else 128 + signum
    assert status == expected, command.stderr
    assert alive(pids) == []
    assert "Traceback" not in command.stderr
    ended = [r for r in stored_records(tmp_path) if r.get("type") == "turn_ended"]
    assert [r["stop_reason"] for r in ended] == ["cancelled"]


@linux_only
@pytest.mark.parametrize("kind", ["run", "acp"])
def test_sigkill_of_the_command_still_ends_its_jobs(
    kind: str, tmp_path: Path, job_dir: Path
) -> None:
    """Nothing runs the command's teardown, yet every job process goes: the supervisor sees
    its control socket close and ends the job."""
    command = start(kind, tmp_path, job_dir)
    try:
        pids = family_pids(job_dir)
        command.process.kill()
        command.wait()
    finally:
        command.close()
    wait_until(lambda: alive(pids) == [], "every job process to end")


def test_sigterm_says_so_in_one_line(tmp_path: Path) -> None:
    """The last line names the signal; the status is 143."""
    command = Command(tmp_path, "chat", "--store", "memory")
    try:
        command.stdin.write(b"hello\n")
        command.stdin.flush()
        command.stdout.readline()  # the greeting: the command is up
        command.process.send_signal(signal.SIGTERM)
        assert command.wait() == 143
    finally:
        command.close()
    assert command.stderr.splitlines()[-1] == "trio-agents: terminated (SIGTERM)"


# -- plugin teardown ---------------------------------------------------------------------------

FAULTY = """
name = "faulty"

async def apply(ctx, config):
    async def boom():
        raise RuntimeError("the flux capacitor is stuck")
    ctx.defer(boom)
"""

HANGING = """
import os
import trio

name = "hanging"

async def apply(ctx, config):
    async def hang():
        with open(os.environ["HANG_MARK"], "w") as f:
            f.write("tearing down")
        with trio.CancelScope(shield=True):
            await trio.sleep_forever()
    ctx.defer(hang)
"""

QUITTER = """
import sys
sys.exit(3)
"""


def config_with(tmp_path: Path, module: str, source: str) -> Path:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    path = tmp_path / "trio-agents.toml"
    path.write_text(f'[[plugins]]\nmodule = "{module}"\n')
    return path


def run_command(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        capture_output=True,
        text=True,
        env={**env_for(tmp_path), **env},
        timeout=DEADLINE,
        stdin=subprocess.DEVNULL,
    )


def test_a_teardown_that_raises_is_one_line_naming_the_plugin(tmp_path: Path) -> None:
    """Which plugin, what error; status 1; no exception-group traceback."""
    config = config_with(tmp_path, "faulty_plugin", FAULTY)
    done = run_command(tmp_path, "run", "hi", "--store", "memory", "--config", str(config))
    assert (done.returncode, done.stdout) == (1, "hi")
    [line] = done.stderr.splitlines()
    assert re.fullmatch(
        r"trio-agents: error: plugin 'faulty' failed to tear down \(faulty#\d+\): "
        r"RuntimeError: the flux capacitor is stuck",
        line,
    )


def test_a_plugin_that_exits_at_import_is_named(tmp_path: Path) -> None:
    """sys.exit(3) in a plugin module is a problem of the config file, with where it is."""
    config = config_with(tmp_path, "quitter_plugin", QUITTER)
    done = run_command(tmp_path, "run", "hi", "--store", "memory", "--config", str(config))
    assert done.returncode == 1
    assert "plugins[0].module: importing 'quitter_plugin' called sys.exit(3)" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("first", "second"),
    [(None, signal.SIGINT), (signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGINT)],
)
def test_a_hanging_teardown_is_forced_out_by_a_second_signal(
    tmp_path: Path, first: signal.Signals | None, second: signal.Signals
) -> None:
    """A signal during a teardown that does not end gives it FORCE_GRACE seconds, then the
    process exits with the status of the first signal and a line naming the stuck plugin."""
    config = config_with(tmp_path, "hanging_plugin", HANGING)
    mark = tmp_path / "mark"
    os.environ["HANG_MARK"] = str(mark)
    command = Command(tmp_path, "chat", "--store", "memory", "--config", str(config))
    try:
        if first is None:
            command.stdin.close()  # end of input: the chat leaves and tears down
        else:
            command.stdout.readline()  # the greeting
            command.process.send_signal(first)
        wait_until(mark.exists, "the plugin's teardown to begin")
        command.process.send_signal(second)
        status = command.wait()
    finally:
        command.close()
    assert status == 128 + (first or second)
    lines = command.stderr.splitlines()
    assert re.fullmatch(
        r"trio-agents: the teardown did not end within 3 s of the second signal; exiting now "
        r"\(still tearing down: plugin 'hanging' \(hanging#\d+\)\)",
        lines[-2],
    )


# The agent's scope hangs at teardown after a record was appended: the agent is still live
# (its registry entry detaches after its scope), so the forced exit is what writes the record.
HELD_AGENT = """
import os
import trio
from trio_agents.session import UserMessage

name = "hanging"
inject = ("agents",)

async def apply(ctx, config):
    agent = (await ctx.agents.create(session_id="held")).agent
    agent.prompt("before the teardown")
    await agent.when_idle()

    async def hang():
        agent.session.append(
            UserMessage(message_id="m-late", content="during the teardown", turn_id="t-late")
        )
        with open(os.environ["HANG_MARK"], "w") as f:
            f.write("tearing down")
        with trio.CancelScope(shield=True):
            await trio.sleep_forever()

    ctx.agents.scope_of(agent).defer(hang)
"""


def test_a_forced_exit_writes_what_it_can_of_the_live_sessions(tmp_path: Path) -> None:
    """On a JSONL store, a session whose agent is stuck in its teardown when the second signal
    forces the exit is on disk with every record, the one appended during the hang too."""
    config = config_with(tmp_path, "held_agent", HELD_AGENT)
    mark = tmp_path / "mark"
    os.environ["HANG_MARK"] = str(mark)
    store = tmp_path / "sessions"
    command = Command(tmp_path, "chat", "--store", str(store), "--config", str(config))
    try:
        command.stdout.readline()  # the greeting
        command.process.send_signal(signal.SIGTERM)
        wait_until(mark.exists, "the agent's teardown to begin")
        command.process.send_signal(signal.SIGINT)
        status = command.wait()
    finally:
        command.close()
    assert status == 128 + signal.SIGTERM, command.stderr
    assert "Traceback" not in command.stderr
    lines = (store / "held.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    said = [r["content"] for r in records if r.get("type") == "user_message"]
    assert said == ["before the teardown", "during the teardown"]


def test_the_cli_reads_the_kernels_wording_of_a_failed_teardown() -> None:
    """``_main`` finds the fiber of a teardown failure by the kernel's group message."""
    import trio

    from trio_agents.kernel import Context

    class Faulty:
        name = "faulty"

        async def apply(self, ctx: Context, config: None) -> None:
            async def boom() -> None:
                raise RuntimeError("boom")

            ctx.defer(boom)

    async def main() -> BaseException:
        async with open_root() as root:
            fiber = await root.plugin(Faulty())
            try:
                await fiber.dispose()
            except BaseException as exc:
                return exc
        raise AssertionError("the teardown did not fail")

    error = trio.run(main)
    assert isinstance(error, BaseExceptionGroup)
    found = _TEARDOWN.fullmatch(error.message)
    assert found is not None
    assert found[1].startswith("faulty#")
