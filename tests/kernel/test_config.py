"""Plugin shape and configuration: every problem reported at once, with where it is."""

from __future__ import annotations

import enum
import types
from typing import Any, Literal

import attrs
import pytest

from trio_agents.kernel import ConfigError, Context, open_root
from trio_agents.kernel._errors import PluginError
from trio_agents.kernel._plugin import PluginSpec, describe_plugin


@attrs.frozen
class Config:
    """A plugin configuration."""

    retries: int
    label: str = "default"


@attrs.frozen
class OldConfig:
    """What an older version of the plugin called its configuration."""

    retries: int
    label: str


_Config = Config


class Configured:
    """A plugin with a Config class that records what it received."""

    name = "configured"
    Config = Config

    def __init__(self) -> None:
        self.received: list[Any] = []

    async def apply(self, ctx: Context, config: _Config) -> None:
        self.received.append(config)


async def test_dict_config_is_structured_into_the_config_class() -> None:
    """A dict config arrives in apply as a Config instance; an instance passes through."""
    plugin = Configured()
    given = Config(retries=2)
    async with open_root() as root:
        await root.plugin(plugin, {"retries": 3})
        await root.plugin(plugin, given)
        await root.plugin(plugin, OldConfig(retries=4, label="old"))
    assert plugin.received[0] == Config(retries=3)
    assert plugin.received[1] is given
    assert plugin.received[2] == Config(retries=4, label="old")


async def test_all_config_problems_are_reported_at_once() -> None:
    """Type errors and unknown keys come together in ConfigError.problems."""
    async with open_root() as root:
        with pytest.raises(
            ConfigError, match=r"^invalid config for plugin 'configured' \(2 problems\):\n"
        ) as info:
            await root.plugin(Configured(), {"retries": "many", "colour": 1, "size": 2})
    assert info.value.problems == (
        "expected int, got str 'many' @ config.retries",
        "unknown keys: colour, size @ config",
    )
    assert isinstance(info.value, ValueError)
    assert root.fiber.children == ()


@attrs.frozen
class ShellConfig:
    """A plugin configuration with one field of each JSON kind."""

    label: str = "default"
    tools: list[str] = attrs.Factory(list)
    retries: int = 0
    verbose: bool = False
    timeout: float = 1.0


class Shell(Configured):
    """A plugin whose Config has str, list[str], int, bool and float fields."""

    name = "shell-like"
    Config = ShellConfig  # type: ignore[assignment]


async def test_values_of_the_wrong_type_are_refused_not_coerced() -> None:
    """3 is not "3", "bash" is not a list of letters, "5" not 5, "false" not False: all listed."""
    config = {"label": 3, "tools": "bash", "retries": "5", "verbose": "false"}
    async with open_root() as root:
        with pytest.raises(
            ConfigError, match=r"^invalid config for plugin 'shell-like' \(4 problems\):\n"
        ) as info:
            await root.plugin(Shell(), config)
    assert info.value.problems == (
        "expected str, got int 3 @ config.label",
        "expected a list, got str 'bash' @ config.tools",
        "expected int, got str '5' @ config.retries",
        "expected bool, got str 'false' @ config.verbose",
    )
    assert root.fiber.children == ()


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"label": 3}, "expected str, got int 3 @ config.label"),
        ({"tools": "bash"}, "expected a list, got str 'bash' @ config.tools"),
        ({"tools": ["ls", 2]}, "expected str, got int 2 @ config.tools[1]"),
        ({"retries": "5"}, "expected int, got str '5' @ config.retries"),
        ({"retries": 1.5}, "expected int, got float 1.5 @ config.retries"),
        ({"retries": True}, "expected int, got bool True @ config.retries"),
        ({"verbose": "false"}, "expected bool, got str 'false' @ config.verbose"),
        ({"verbose": 0}, "expected bool, got int 0 @ config.verbose"),
        ({"timeout": "2"}, "expected float, got str '2' @ config.timeout"),
    ],
)
async def test_each_wrong_type_is_one_problem(config: dict[str, Any], problem: str) -> None:
    """Each strictness rule, alone, is one problem with its path (no coercion)."""
    async with open_root() as root:
        with pytest.raises(ConfigError) as info:
            await root.plugin(Shell(), config)
    assert info.value.problems == (problem,)


async def test_json_numbers_and_arrays_are_structured() -> None:
    """2.0 is an integer, 2 a float, a tuple an array (the JSON view, not Python's)."""
    plugin = Shell()
    async with open_root() as root:
        await root.plugin(plugin, {"retries": 2.0, "timeout": 2, "tools": ("ls",)})
    assert plugin.received == [ShellConfig(retries=2, timeout=2.0, tools=["ls"])]
    assert type(plugin.received[0].retries) is int
    assert type(plugin.received[0].timeout) is float


class Mode(enum.StrEnum):
    """A string enum in a configuration."""

    FAST = "fast"
    SLOW = "slow"


@attrs.frozen
class ModeConfig:
    """A configuration with an enum and a Literal."""

    mode: Mode = Mode.FAST
    level: Literal[1, 2] = 1


class Moded(Configured):
    """A plugin whose Config has a StrEnum and a Literal field."""

    name = "moded"
    Config = ModeConfig  # type: ignore[assignment]


async def test_enums_and_literals_are_matched_with_their_type() -> None:
    """A StrEnum field gets its member; True is not the Literal 1, nor "2" the Literal 2."""
    plugin = Moded()
    async with open_root() as root:
        await root.plugin(plugin, {"mode": "slow", "level": 2})
        with pytest.raises(ConfigError) as info:
            await root.plugin(plugin, {"mode": "medium", "level": True})
    assert plugin.received == [ModeConfig(Mode.SLOW, 2)]
    assert type(plugin.received[0].mode) is Mode
    assert info.value.problems == (
        "invalid value for type, expected Mode: 'medium' is not a valid Mode @ config.mode",
        "expected one of 1, 2, got bool True @ config.level",
    )


async def test_missing_required_field_is_one_problem() -> None:
    """A missing field without a default is reported with its path (singular wording)."""
    async with open_root() as root:
        with pytest.raises(
            ConfigError, match=r"^invalid config for plugin 'configured' \(1 problem\):\n  - "
        ) as info:
            await root.plugin(Configured())
    assert len(info.value.problems) == 1
    assert "config.retries" in info.value.problems[0]


async def test_config_must_be_a_mapping_or_the_config_class() -> None:
    """A list (or other non-mapping) config is refused, naming the expected types."""
    async with open_root() as root:
        with pytest.raises(
            ConfigError,
            match=r"^plugin 'configured': config must be a mapping or a Config; got list$",
        ):
            await root.plugin(Configured(), [1, 2])


async def test_plugin_without_config_class_refuses_a_config() -> None:
    """Configuring a plugin that has no Config class is an error."""

    class Bare:
        name = "bare"

        async def apply(self, ctx: Context, config: None) -> None:
            assert config is None

    async with open_root() as root:
        with pytest.raises(
            ConfigError,
            match=r"^plugin 'bare' takes no configuration \(it has no Config class\); "
            r"got \{'x': 1\}$",
        ):
            await root.plugin(Bare(), {"x": 1})
        await root.plugin(Bare())


async def test_a_module_is_a_plugin() -> None:
    """A module with name and apply is applied like an object."""
    applied: list[str] = []
    module = types.ModuleType("mod_plugin")

    async def apply(ctx: Context, config: None) -> None:
        applied.append(ctx.fiber.name)

    module.name = "from-module"  # type: ignore[attr-defined]
    module.apply = apply  # type: ignore[attr-defined]
    async with open_root() as root:
        fiber = await root.plugin(module)
        assert fiber.plugin is module
    assert applied == ["from-module"]


class _Shape:
    def __init__(self, **attributes: object) -> None:
        self.__dict__.update(attributes)


async def _apply(ctx: Context, config: None) -> None:
    pass


def _sync_apply(ctx: Context, config: None) -> None:
    pass


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (
            _Shape(apply=_apply),
            r"^plugin '_Shape' has no name; give it a non-empty 'name: str' attribute$",
        ),
        (
            _Shape(name="", apply=_apply),
            r"^plugin '' has no name; give it a non-empty 'name: str' attribute$",
        ),
        (_Shape(name="x"), r"^plugin 'x' needs 'async def apply\(ctx, config\)'; got nothing$"),
        (
            _Shape(name="x", apply=_sync_apply),
            r"^plugin 'x' needs 'async def apply\(ctx, config\)'; got function$",
        ),
        (
            _Shape(name="x", apply=_apply, inject="agents"),
            r"^plugin 'x': 'inject' must be a sequence of service names, "
            r"e\.g\. inject = \('agents',\); got 'agents'$",
        ),
        (
            _Shape(name="x", apply=_apply, inject=("ok", 3)),
            r"^plugin 'x': 'inject' must be a sequence of service names",
        ),
        (
            _Shape(name="x", apply=_apply, Config=dict),
            r"^plugin 'x': 'Config' must be an attrs class$",
        ),
    ],
)
async def test_plugin_shape_errors_say_what_to_fix(plugin: object, message: str) -> None:
    """Malformed plugins raise PluginError (a TypeError) before any fiber exists."""
    async with open_root() as root:
        with pytest.raises(PluginError, match=message):
            await root.plugin(plugin)
        assert root.fiber.children == ()


def test_describe_plugin_names_even_malformed_objects() -> None:
    """describe_plugin prefers name, then __name__, then the type name."""
    assert describe_plugin(_Shape(name="n")) == "'n'"
    assert describe_plugin(types.ModuleType("modname")) == "'modname'"
    assert describe_plugin(3) == "'int'"
    spec = PluginSpec.of(_Shape(name="n", apply=_apply, inject=["a", "b"]))
    assert (spec.name, spec.inject, spec.config_type) == ("n", ("a", "b"), None)


def _positive(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be > 0; got {value!r}")


@attrs.frozen
class LimitsConfig:
    """A configuration whose numbers have validators."""

    timeout: float = attrs.field(validator=_positive)
    steps: int = attrs.field(default=1, validator=_positive)
    label: str = "x"


class Limited:
    """A plugin with validated numbers in its configuration."""

    name = "limited"
    Config = LimitsConfig

    async def apply(self, ctx: Context, config: LimitsConfig) -> None:
        pass


async def test_every_validator_refusal_is_a_problem_at_its_field() -> None:
    """Two refused numbers and a type problem: three problems, each at its field."""
    async with open_root() as root:
        with pytest.raises(ConfigError) as info:
            await root.plugin(Limited(), {"timeout": -1, "steps": 0, "label": 3})
    assert info.value.problems == (
        "expected str, got int 3 @ config.label",
        "timeout must be > 0; got -1.0 @ config.timeout",
        "steps must be > 0; got 0 @ config.steps",
    )
