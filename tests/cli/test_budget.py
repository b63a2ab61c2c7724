"""Budgets at the front ends: ``run --max-*`` and its ``stopped:`` line, the config file's
``[[agents]] budget`` and ``[prices]``, the cost in ``sessions show``, and the ACP stop
reason of a prompt stopped by a spent budget."""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agents as ta
import trio_agents.agent as ag
from tests.helpers.acp_support import CWD, Client
from tests.helpers.cli_support import run_cli
from trio_agents.acp import AcpBridge
from trio_agents.cli import main
from trio_agents.session import JsonlStore, MemoryStore

cli = pytest.mark.usefixtures("cli_environment")


@cli
def test_run_says_which_budget_stopped_the_turn(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--max-requests 1``: the tool's result is never sent to the model; one line says
    which budget and what was spent, and the status is 1."""
    store = str(tmp_path / "s")
    status, _, err = run_cli(
        capsys, "run", "--store", store, "--session", "b", "--yes", "--max-requests", "1",
        "!bash echo hi",
    )  # fmt: skip
    assert status == 1
    assert re.search(
        r"^trio-agents: stopped: requests budget 1 spent \(1\); session b ", err, re.M
    ), err


@cli
def test_a_resumed_session_keeps_the_budget_run_gave_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The budget of the first ``run`` is recorded: a later ``run`` of the session without
    options is stopped by it."""
    store = str(tmp_path / "s")
    first = run_cli(capsys, "run", "--store", store, "--session", "b", "--max-tokens", "5", "a b c")
    assert first[0] == 0
    status, _, err = run_cli(capsys, "run", "--store", store, "--session", "b", "more")
    assert status == 1
    assert re.search(r"^trio-agents: stopped: tokens budget 5 spent \(6\); ", err, re.M), err


@cli
def test_a_negative_limit_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``--max-turns -1`` is refused in one line, status 1."""
    status, _, err = run_cli(capsys, "run", "--store", "memory", "--max-turns", "-1", "x")
    assert status == 1
    assert err.strip().splitlines()[-1] == "trio-agents: error: --max-turns is a limit >= 0; got -1"


@cli
def test_the_config_file_gives_budgets_and_prices_and_show_prints_costs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``[[agents]] budget`` limits the declared agent, ``[prices]`` costs its requests, and
    ``sessions show`` prints each turn's cost."""
    config = tmp_path / "agents.toml"
    config.write_text(
        textwrap.dedent(
            """
            [[agents]]
            id = "helper"
            budget = { output_tokens = 2, cost = 100 }

            [prices]
            echo = { input = 1000000, output = 2000000 }
            """
        )
    )
    store = str(tmp_path / "s")
    common = ("--store", store, "--config", str(config), "--no-project-files")
    assert run_cli(capsys, "run", *common, "one two three")[0] == 0
    status, _, err = run_cli(capsys, "run", *common, "four")
    assert status == 1
    assert re.search(r"stopped: output_tokens budget 2 spent \(3\)", err), err
    status, out, _ = run_cli(capsys, "sessions", "show", "--store", store, "helper")
    assert status == 0
    cost = r"^turn t-1: completed · (\d+) in, 3 out tokens \(1 request\), \$(\d+\.\d{4})$"
    found = re.search(cost, out, re.M)
    assert found is not None, out
    # $1 per input token and $2 per output token (a million of each cost a million).
    assert float(found[2]) == int(found[1]) + 2 * 3
    assert re.search(r"^turn t-2: cancelled by BudgetExhausted\(", out, re.M), out


@cli
def test_a_bad_budget_in_the_config_file_is_a_problem_at_its_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A negative limit in ``[[agents]] budget`` is reported where it is."""
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nid = "a"\nbudget = { tokens = -1 }\n')
    status, _, err = run_cli(capsys, "run", "--store", "memory", "--config", str(config), "x")
    assert status == 1
    assert re.search(r"agents\[0\]\.budget: .*budget tokens must be >= 0", err), err


@cli
def test_run_options_do_not_override_a_declared_agents_budget(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``--max-*`` for an agent declared in the config file is refused in one line."""
    config = tmp_path / "agents.toml"
    config.write_text('[[agents]]\nid = "a"\n')
    args = ("run", "--store", "memory", "--config", str(config), "--max-turns", "1", "x")
    status, _, err = run_cli(capsys, *args)
    assert status == 1
    assert re.search(r"^trio-agents: error: agent 'a' is declared in the config file", err, re.M)


async def test_an_acp_prompt_stopped_by_a_budget_answers_the_matching_stop_reason() -> None:
    """A token budget answers ``max_tokens``; a turns budget ``max_turn_requests``."""
    store = MemoryStore()
    async with ag.open_runtime(store=store) as root:
        for session_id, budget in (("tok", ta.Budget(tokens=1)), ("turn", ta.Budget(turns=0))):
            handle = await root.agents.create(session_id=session_id, budget=budget)
            handle.agent.prompt("spend it")
            await handle.agent.when_idle()
            await handle.dispose()
        ours, theirs = trio.testing.memory_stream_pair()
        fiber = await root.plugin(AcpBridge(ours))
        client = Client(theirs)
        await client.initialize()
        answers = {}
        for session_id in ("tok", "turn"):
            params = {"sessionId": session_id, "cwd": CWD, "mcpServers": []}
            await client.until(await client.request("session/load", params))
            _, response = await client.until(await client.prompt(session_id, "more"))
            answers[session_id] = response["result"]["stopReason"]
        assert answers == {"tok": "max_tokens", "turn": "max_turn_requests"}
        await fiber.dispose()


async def _spent_session(store: Path, session_id: str) -> None:
    """A stored session whose ``tokens=2`` budget its first turn spent."""
    async with ag.open_runtime(store=JsonlStore(store)) as root:
        handle = await root.agents.create(session_id=session_id, budget=ta.Budget(tokens=2))
        handle.agent.prompt("a b c")
        await handle.agent.when_idle()
        await handle.dispose()


@cli
def test_chat_says_which_budget_stopped_a_turn(
    capsys: pytest.CaptureFixture[str], store: Path, stdin_pipe: int
) -> None:
    """In ``chat`` a turn stopped by a spent budget is one line naming it."""
    trio.run(_spent_session, store, "talk")
    os.write(stdin_pipe, b"more\n")
    os.close(stdin_pipe)
    assert main(["chat", "--store", str(store), "--session", "talk"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^turn t-2 stopped: tokens budget 2 spent \(6\)$", out, re.M), out


@cli
def test_budget_options_are_refused_with_remote(capsys: pytest.CaptureFixture[str]) -> None:
    """A remote run is a worker's: ``--max-*`` with ``--remote`` is one line, status 1."""
    args = ("run", "--remote", "host=nowhere", "--max-tokens", "5", "x")
    status, _, err = run_cli(capsys, *args)
    assert status == 1
    assert err.strip().splitlines()[-1] == (
        "trio-agents: error: --max-* options are not taken with --remote (a worker runs it)"
    )
