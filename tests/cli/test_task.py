"""``[[agent_definitions]]`` in the config file reach the installed command's agent: its model
(the echo model's ``!tool task {...}``) starts a child from one, and the child's session is
stored under the parent."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import trio

from tests.helpers.support import TRIO_AGENTS
from trio_agents.agent import Budget
from trio_agents.cli import main
from trio_agents.cli._config import ConfigFileError, parse

CONFIG = """\
[[agent_definitions]]
name = "reviewer"
description = "Reviews things"
model = "echo"
"""


async def trio_agents(*args: str, home: Path) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    with trio.fail_after(60):
        return await trio.run_process(
            [str(TRIO_AGENTS), *args], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )  # fmt: skip


async def test_run_starts_a_child_from_a_config_definition(tmp_path: Path) -> None:
    """The command's agent is given task when definitions exist; the child answers."""
    config = tmp_path / "agents.toml"
    config.write_text(CONFIG)
    store = tmp_path / "sessions"
    prompt = "!tool task " + json.dumps({"agent": "reviewer", "prompt": "looks good"})
    done = await trio_agents(
        "run", prompt, "--session", "lead", "--config", str(config), "--store", str(store),
        home=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    match = re.fullmatch(
        r"tool task returned: looks good\n\n\[(s-[0-9a-f]+): 1 model requests, \d+ input and "
        r"2 output tokens\]\n",
        out,
    )
    assert match is not None, out
    child = store / f"{match[1]}.jsonl"
    configured = json.loads(child.read_text().splitlines()[1])  # after the header line
    assert configured["type"] == "agent_configured"
    assert (configured["parent_id"], configured["cwd"]) == ("lead", os.getcwd())


async def test_a_bad_definition_is_a_listed_config_problem(tmp_path: Path) -> None:
    """A definition without a description, and one with an unknown model, are refused in one
    message before anything runs."""
    config = tmp_path / "agents.toml"
    config.write_text(
        '[[agent_definitions]]\nname = "a"\nmodel = "nope:x"\ndescription = "d"\n'
        '[[agent_definitions]]\nname = "b"\n'
    )
    done = await trio_agents(
        "run", "x", "--config", str(config), "--store", "memory", home=tmp_path
    )
    assert done.returncode == 1
    err = done.stderr.decode()
    assert re.search(
        r"^  - agent_definitions\[1\]\.description: required field missing$", err, re.M
    )
    assert re.search(r"^  - agent_definitions\[0\]\.model: unknown model spec 'nope:x'", err, re.M)


def test_chat_shows_a_childs_work_indented_and_agents_lists_live_children(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    store: Path,
    tmp_path: Path,
    stdin_pipe: int,
) -> None:
    """A foreground child's start, answer and end are indented lines under the call; /agents
    lists a running background child under the lead; leaving disposes it."""
    monkeypatch.setenv("COLUMNS", "200")
    config = tmp_path / "agents.toml"
    config.write_text(
        CONFIG
        + '[[agent_definitions]]\nname = "slow"\ndescription = "s"\nmodel = "echo?delay=30"\n'
    )
    fore = json.dumps({"agent": "reviewer", "prompt": "fine"})
    back = json.dumps({"agent": "slow", "prompt": "later", "background": True})
    lines = f"!tool task {fore}\n!tool task {back}\n/agents\n/quit\n"
    os.write(stdin_pipe, lines.encode())
    os.close(stdin_pipe)
    args = ["chat", "--store", str(store), "--session", "lead", "--config", str(config)]
    assert main(args) == 0
    out = capsys.readouterr().out
    expected = [
        r"  ↳ reviewer (s-[0-9a-f]+) started\n",
        r"    fine\n",
        r"  ↳ \1 ended completed\n",
        r"  ↳ slow (s-[0-9a-f]+) started in the background\n",
        r"you> /agents\nlead  idle  echo\n  \2  running, turn t-1  echo\n",
        r"you> /quit\n  ↳ \2 ended cancelled by ParentCancel\(parent_id='lead'\)\n",
    ]
    assert re.search(".*".join(expected), out, re.S), out


def test_a_definitions_budget_table_is_read_and_a_bad_one_listed() -> None:
    """``budget = {...}`` of an ``[[agent_definitions]]`` table becomes the definition's
    Budget; an unknown limit is a listed problem naming the table."""
    good = parse(
        {"agent_definitions": [{"name": "r", "description": "d", "budget": {"tokens": 100}}]}
    )
    assert good.definitions[0].budget == Budget(tokens=100)
    bad = {"agent_definitions": [{"name": "r", "description": "d", "budget": {"tokenz": 1}}]}
    with pytest.raises(ConfigFileError, match=r"agent_definitions\[0\]: unknown budget limit"):
        parse(bad)
