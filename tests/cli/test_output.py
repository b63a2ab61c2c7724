"""``trio-agents run --output-schema FILE``: the installed command, in a real subprocess, on
the embedded echo model (which answers with the prompt, so the prompt is the answer)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli_support import run_cli, use_model
from tests.helpers.support import TRIO_AGENTS
from trio_agents.model import CallTool, Say, ScriptedModel

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "score": {"type": "integer", "minimum": 0}},
    "required": ["ok"],
}


def command(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    return subprocess.run(
        [str(TRIO_AGENTS), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def test_run_prints_the_validated_json_on_stdout(tmp_path: Path, schema_file: Path) -> None:
    """An accepted answer is one line of JSON on stdout, status 0."""
    done = command(
        "run",
        "--store",
        "memory",
        "--output-schema",
        str(schema_file),
        '{"score": 3, "ok": true}',
        home=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, '{"score": 3, "ok": true}\n')
    assert done.stderr.startswith("session s-")


def test_run_with_an_answer_the_schema_refuses_fails_in_one_line(
    tmp_path: Path, schema_file: Path
) -> None:
    """Refused past the retries: nothing on stdout, one line naming the problem, status 1."""
    done = command(
        "run",
        "--store",
        "memory",
        "--output-schema",
        str(schema_file),
        '{"ok": true, "score": -1}',
        home=tmp_path,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines()[-1].startswith(
        "trio-agents: error: turn t-1 ended with error: the model's final answer was refused 3 "
        "times (output_retries=2); the last one: "
    )


@pytest.mark.usefixtures("cli_environment")
def test_run_answers_through_the_final_answer_tool_quietly(
    capsys: pytest.CaptureFixture[str], schema_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's streamed text is not printed: stdout is the typed answer only."""
    use_model(
        monkeypatch,
        ScriptedModel([[Say("Thinking out loud."), CallTool("final_answer", {"ok": False})]]),
    )
    status, out, _ = run_cli(
        capsys, "run", "--store", "memory", "--output-schema", str(schema_file), "judge"
    )
    assert (status, out) == (0, '{"ok": false}\n')


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, r"cannot read .*missing\.json: No such file or directory"),
        ("{", r".*schema\.json is not JSON \(Expecting property name"),
        ('{"type": "array"}', r".*schema\.json: an output schema describes a JSON object"),
        ("[]", r".*schema\.json holds no JSON Schema object$"),
    ],
)
@pytest.mark.usefixtures("cli_environment")
def test_a_bad_schema_file_is_one_line_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None, problem: str
) -> None:
    """A schema file that cannot be used is refused in one line, status 1, no session."""
    path = tmp_path / ("missing.json" if content is None else "schema.json")
    if content is not None:
        path.write_text(content)
    status, out, err = run_cli(capsys, "run", "--output-schema", str(path), "x")
    assert (status, out) == (1, "")
    assert re.match(rf"^trio-agents: error: --output-schema: {problem}", err)
    assert not (tmp_path / "home").exists()


@pytest.mark.usefixtures("cli_environment")
def test_output_schema_with_remote_is_refused(
    capsys: pytest.CaptureFixture[str], schema_file: Path
) -> None:
    """A remote worker cannot check the schema: the pair is refused before anything runs."""
    status, out, err = run_cli(
        capsys,
        "run",
        "--remote",
        "postgresql://127.0.0.1:1/none",
        "--output-schema",
        str(schema_file),
        "x",
    )
    assert (status, out) == (1, "")
    assert re.match(r"^trio-agents: error: --output-schema does not work with --remote", err)
