"""The ``--config`` file: every problem reported at once, declared agents, plugins, --watch."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agents.agent import DeclaredAgent
from trio_agents.cli import _options
from trio_agents.cli._config import ConfigFileError, load_config, parse
from trio_agents.cli._options import Settings, attach, open_cli_runtime, resolve_model
from trio_agents.kernel import Context

PLUGIN_SOURCE = """
import attrs

name = "greeter"


@attrs.frozen
class Config:
    greeting: str
    times: int = 1


async def apply(ctx, config):
    ctx.provide("greeting", config.greeting * config.times)
"""


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory holding the plugin module ``cli_greeter``, removed from sys.modules after."""
    monkeypatch.setattr(sys, "path", [*sys.path])
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "cli_greeter.py").write_text(PLUGIN_SOURCE)
    yield tmp_path
    sys.modules.pop("cli_greeter", None)


def _write(directory: Path, text: str) -> Path:
    path = directory / "trio-agents.toml"
    path.write_text(textwrap.dedent(text))
    return path


def _problems(text: str, directory: Path) -> tuple[str, ...]:
    with pytest.raises(ConfigFileError) as caught:
        load_config(_write(directory, text))
    return caught.value.problems


def test_every_problem_is_reported_at_once_with_where_it_is(plugin_dir: Path) -> None:
    """Types, unknown keys, model specs, imports and plugin configs are listed together."""
    problems = _problems(
        """
        model = 3
        colour = "blue"

        [[plugins]]
        module = "no_such_module_anywhere"

        [[plugins]]
        module = "cli_greeter"
        config = { times = "twice", extra = 1 }

        [[agents]]
        id = "a"
        tools = "bash"
        model = "echo?delay=x"

        [[agents]]
        id = "a"
        nickname = "dup"

        [[agents]]
        id = "../outside"
        """,
        plugin_dir,
    )
    expected = [
        r"^model: expected str, got int 3$",
        r"^top level: unknown keys: colour$",
        r"^agents\[0\]\.tools: expected a list, got str 'bash'$",
        r"^agents\[0\]\.model: invalid model spec 'echo\?delay=x'",
        r"^agents\[1\]: unknown keys: nickname$",
        r"^agents\[1\]\.id: 'a' is declared already \(agents\[0\]\)",
        r"^agents\[2\]\.id: invalid session id '\.\./outside': use 1-128 characters",
        r"^plugins\[0\]\.module: cannot import 'no_such_module_anywhere': ModuleNotFoundError",
        r"^plugins\[1\]\.config\.greeting: required field missing$",
        r"^plugins\[1\]\.config: unknown keys: extra$",
    ]
    for pattern in expected:
        assert any(re.search(pattern, p) for p in problems), (pattern, problems)
    assert len(problems) == len(expected) + 1  # and times = "twice" (an invalid int)


def test_the_error_message_lists_the_problems_under_one_heading(tmp_path: Path) -> None:
    """The message counts the problems and names the file, one problem per line."""
    path = _write(tmp_path, 'model = "nope"\nextra = 1\n')
    with pytest.raises(
        ConfigFileError, match=r"^config file '.*trio-agents\.toml' has 2 problems:"
    ):
        load_config(path)


def test_values_are_not_coerced() -> None:
    """A number is not a string and a boolean is not an integer in a config file."""
    with pytest.raises(ConfigFileError) as caught:
        parse({"agents": [{"id": 7, "instructions": True}]})
    assert set(caught.value.problems) == {
        "agents[0].id: expected str, got int 7",
        "agents[0].instructions: expected str, got bool True",
    }


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    """A config path that does not exist says so."""
    with pytest.raises(ConfigFileError, match=r"^config file '.*nope\.toml' does not exist$"):
        load_config(tmp_path / "nope.toml")


def test_a_file_that_is_not_toml_says_where(tmp_path: Path) -> None:
    """A TOML syntax error names the file and the line."""
    with pytest.raises(ConfigFileError, match=r"is not valid TOML: .*line 1"):
        load_config(_write(tmp_path, "model = = 1\n"))


def test_a_module_that_is_not_a_plugin_is_a_problem(plugin_dir: Path) -> None:
    """A module without name and apply, or a missing attr, is reported as such."""
    problems = _problems(
        """
        [[plugins]]
        module = "textwrap"

        [[plugins]]
        module = "cli_greeter"
        attr = "nothing_here"
        """,
        plugin_dir,
    )
    assert re.match(r"^plugins\[0\]: textwrap is not a plugin", problems[0])
    assert problems[1] == "plugins[1].attr: module 'cli_greeter' has no 'nothing_here'"


def test_a_valid_file_gives_model_agents_and_plugins(plugin_dir: Path) -> None:
    """Everything the file declares is there, in order."""
    config = load_config(
        _write(
            plugin_dir,
            """
            model = "echo?delay=0.5"

            [[plugins]]
            module = "cli_greeter"
            config = { greeting = "hi" }

            [[agents]]
            id = "helper"
            instructions = "Be brief."
            tools = ["bash"]
            """,
        )
    )
    assert config.model == "echo?delay=0.5"
    assert config.agents == (DeclaredAgent(id="helper", instructions="Be brief.", tools=["bash"]),)
    assert [p.label for p in config.plugins] == ["cli_greeter"]
    assert config.plugins[0].file == str(plugin_dir / "cli_greeter.py")


def _fiber_named(root: Context, name: str) -> Any:
    return next(f for f in root.fiber.runtime.fibers if f.name == name)


async def test_declared_agents_are_created_and_owned_by_the_agent_loop() -> None:
    """A declared agent is live at start, its fiber is the AgentLoop's child, no handle is given."""
    config = parse({"agents": [{"id": "helper"}, {"id": "other", "model": "echo?delay=1"}]})
    settings = Settings(model=resolve_model(None), store="memory", config=config)
    async with open_cli_runtime(settings, shell=False) as root:
        assert [a.id for a in root.agents.list()] == ["helper", "other"]
        assert _fiber_named(root, "agent:helper").parent is _fiber_named(root, "agent-loop")
        agent, handle = await attach(root, None)
        assert (agent.id, handle) == ("helper", None)
        agent, handle = await attach(root, "other")
        assert (agent.id, handle) == ("other", None)
        agent.prompt("hello")
        await agent.when_idle()
    assert agent.done


async def test_plugins_from_a_module_are_applied_with_their_config(plugin_dir: Path) -> None:
    """The module named in [[plugins]] runs with its config table structured into Config."""
    config = load_config(
        _write(
            plugin_dir,
            """
            [[plugins]]
            module = "cli_greeter"
            config = { greeting = "hi", times = 2 }
            """,
        )
    )
    settings = Settings(model=resolve_model(None), store="memory", config=config)
    async with open_cli_runtime(settings) as root:
        assert root.get("greeting") == "hihi"
        assert root.get("shell") is not None
        assert root.get("tools").get("bash") is not None


async def test_watch_starts_the_watcher_on_the_config_plugins(
    plugin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--watch runs watch_plugins in the background on the directories of the config's plugins."""
    watched: list[list[str]] = []
    started = trio.Event()

    async def fake_watch(ctx: Context, paths: list[str]) -> None:
        watched.append(paths)
        started.set()
        await trio.sleep_forever()

    monkeypatch.setattr(_options, "watch_plugins", fake_watch)
    config = parse({"plugins": [{"module": "cli_greeter", "config": {"greeting": "x"}}]})
    settings = Settings(model=resolve_model(None), store="memory", config=config, watch=True)
    async with open_cli_runtime(settings, shell=False) as root:
        with trio.fail_after(5):
            await started.wait()
        assert root.get("greeting") == "x"
    assert watched == [[str(plugin_dir)]]


def test_numbers_out_of_range_are_listed_with_every_other_problem(tmp_path: Path) -> None:
    """``max_steps = -1``, a negative timeout: each a problem at its field, with the rest."""
    problems = _problems(
        """
        [[agents]]
        max_steps = -1
        tools = "bash"

        [[agents]]
        max_steps = 0

        [[mcp_servers]]
        name = "files"
        command = "true"
        startup_timeout = -3
        call_timeout = 0
        """,
        tmp_path,
    )
    assert set(problems) == {
        "agents[0].tools: expected a list, got str 'bash'",
        "agents[0].max_steps: max_steps is the most model requests per turn, >= 1; got -1",
        "agents[1].max_steps: max_steps is the most model requests per turn, >= 1; got 0",
        "mcp_servers[0].startup_timeout: startup_timeout must be > 0 seconds; got -3.0",
        "mcp_servers[0].call_timeout: call_timeout must be > 0 seconds; got 0.0",
    }


@pytest.mark.parametrize("nested", ["[" * 100_000 + "]" * 100_000, "{a=" * 100_000 + "}" * 100_000])
def test_a_file_nested_too_deeply_is_one_line(tmp_path: Path, nested: str) -> None:
    """A value nested 100,000 deep is one line that names the file, not a RecursionError."""
    with pytest.raises(ConfigFileError) as caught:
        load_config(_write(tmp_path, f"model = {nested}\n"))
    assert re.fullmatch(
        r"config file '.*trio-agents\.toml' nests arrays or tables too deeply to read; "
        r"a configuration needs a few levels",
        str(caught.value),
    )
