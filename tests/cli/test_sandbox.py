"""``--sandbox`` and the config file's ``sandbox``: the command's shell runs under bubblewrap,
a sandboxed ``bash`` is not asked about, a missing bubblewrap is one line, and SIGKILL of the
installed command leaves no process of a sandboxed job behind."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli_support import run_cli
from tests.helpers.sandbox_support import bomb, require_bwrap
from tests.helpers.supervision_support import DEADLINE, wait_until
from tests.helpers.support import TRIO_AGENTS, marker, processes_with
from trio_agents.cli._config import ConfigFileError, Sandbox, parse


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    require_bwrap()


def test_sandboxed_bash_runs_unasked_and_cannot_write_outside(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --sandbox read-only`` without ``--yes``: bash is not refused (it cannot leave
    the sandbox), and its write fails on the read-only file system."""
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(
        capsys, "run", "--store", "memory", "--sandbox", "read-only", "!bash touch made"
    )
    assert "touch: cannot touch 'made': Read-only file system" in out
    assert "refused" not in out + err
    assert not (tmp_path / "made").exists()
    assert status == 0


def test_without_a_sandbox_bash_is_still_refused_in_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sandbox danger-full-access`` is no sandbox: bash needs ``--yes`` as before."""
    monkeypatch.chdir(tmp_path)
    _, _out, err = run_cli(
        capsys, "run", "--store", "memory", "--sandbox", "danger-full-access", "!bash touch made"
    )
    assert re.search(
        r"^trio-agents: refused bash: touch made \(tool 'bash' needs approval\)", err, re.M
    )
    assert not (tmp_path / "made").exists()


def test_approval_ask_still_asks_about_a_sandboxed_bash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sandbox lifts only the default: ``[approval] ask = ["bash"]`` still asks."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "agents.toml"
    config.write_text('sandbox = "workspace-write"\n[approval]\nask = ["bash"]\n')
    _, _, err = run_cli(
        capsys, "run", "--store", "memory", "--config", str(config), "!bash touch made"
    )
    assert re.search(
        r"^trio-agents: refused bash: touch made \(tool 'bash' needs approval\)", err, re.M
    )
    assert not (tmp_path / "made").exists()


def test_a_missing_bwrap_is_one_line_and_nothing_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No bwrap on PATH: the command ends with one line saying how to fix it; the command
    never runs unsandboxed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    status, _out, err = run_cli(
        capsys, "run", "--store", "memory", "--sandbox", "workspace-write", "!bash touch made"
    )
    assert status == 1
    assert re.fullmatch(
        r"trio-agents: error: the workspace-write sandbox needs bubblewrap, and 'bwrap' was "
        r"not found; install it \(.*\) or run without the sandbox "
        r"\(--sandbox danger-full-access\)\n",
        err,
    )
    assert not (tmp_path / "made").exists()


def test_the_config_file_chooses_the_sandbox_and_the_option_wins(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sandbox = "read-only"`` in the file sandboxes bash; ``--sandbox workspace-write``
    overrides it."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "agents.toml"
    config.write_text('sandbox = "read-only"\n')
    common = ("run", "--store", "memory", "--config", str(config))
    _, out, _ = run_cli(capsys, *common, "!bash touch first")
    assert "touch: cannot touch 'first': Read-only file system" in out
    _, out, _ = run_cli(capsys, *common, "--sandbox", "workspace-write", "!bash touch second")
    assert "Read-only" not in out
    assert (tmp_path / "second").exists()


def test_a_sandbox_table_resolves_writable_against_the_file(tmp_path: Path) -> None:
    """``[sandbox]``: the policy defaults to workspace-write; ``writable`` is relative to the
    file's directory."""
    config = parse({"sandbox": {"writable": ["shared"], "network": True}}, path=tmp_path / "c")
    assert config.sandbox == Sandbox(
        policy="workspace-write", writable=[str(tmp_path / "shared")], network=True
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("none", r"sandbox\.policy: 'none' is not a policy; use one of read-only, "),
        ({"policy": "x"}, r"sandbox\.policy: 'x' is not a policy; "),
        (3, r"sandbox: a policy name or a table; got 3 "),
    ],
)
def test_a_bad_sandbox_key_is_a_config_problem(value: object, problem: str) -> None:
    """An unknown policy, or a value that is neither a name nor a table, is listed."""
    with pytest.raises(ConfigFileError, match=r"^the configuration has 1 problem:\n  - " + problem):
        parse({"sandbox": value})


def test_sigkill_of_the_command_leaves_no_process_of_a_sandboxed_job(tmp_path: Path) -> None:
    """Nothing runs the command's teardown, yet the supervisor and bwrap's --die-with-parent
    end every process of the job: 20 children, a setsid'd one and an orphan."""
    tag = marker()
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path), "NO_COLOR": "1"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    process = subprocess.Popen(
        [str(TRIO_AGENTS), "run", "--sandbox", "workspace-write", "--yes", "--store", "memory",
         f"!bash {bomb(tag)}; wait"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=env,
    )  # fmt: skip
    try:
        wait_until(lambda: len(processes_with(tag)) >= 22, "the job's 22 processes")
        process.kill()
        process.wait(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    wait_until(lambda: processes_with(tag) == [], "every process of the job to end")
