"""What a plugin is, and how its configuration is structured.

A plugin is a module or any object with:

- ``name: str``;
- optional ``inject``: the services it requires, by name or by :class:`.ServiceKey`;
- optional ``Config``: an attrs class; a dict config is structured into it with the strict
  policy of ``trio_agents._base._strict`` (no coercion, extra keys rejected, every problem
  reported at once);
- ``async def apply(ctx, config)``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, final

import attrs

from .._base import StrictConverter, count_problems, list_problems
from ._errors import ConfigError, PluginError
from ._origin import PluginOrigin, origin_of
from ._service_key import ServiceKey, service_name

#: The kernel's converter for plugin configuration; never the global one. Strict: a config
#: file's ``3`` is not the string ``"3"``, its ``"bash"`` is not a list of characters.
config_converter = StrictConverter()


class Plugin(Protocol):
    """The shape of a plugin object (a module with the same attributes works too)."""

    name: str

    async def apply(self, ctx: Any, config: Any, /) -> None: ...


def describe_plugin(plugin: object) -> str:
    """A short name for error messages, even for a malformed plugin."""
    name = getattr(plugin, "name", None)
    if isinstance(name, str):
        return repr(name)
    return repr(getattr(plugin, "__name__", type(plugin).__name__))


@final
@attrs.frozen
class PluginSpec:
    """A validated view of a plugin."""

    plugin: object = attrs.field(eq=False)
    name: str
    inject: tuple[str, ...]
    config_type: type | None
    apply: Callable[[Any, Any], Awaitable[None]] = attrs.field(eq=False)
    #: Where the plugin is defined, recorded when it is applied (what reload finds it by).
    origin: PluginOrigin | None = attrs.field(default=None, eq=False)

    @classmethod
    def of(cls, plugin: object) -> PluginSpec:
        """Validate ``plugin`` and read its attributes.

        Raises:
            PluginError: the object lacks ``name`` or ``apply``, or they have the wrong type.
        """
        what = describe_plugin(plugin)
        name = getattr(plugin, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(
                f"plugin {what} has no name; give it a non-empty 'name: str' attribute"
            )
        apply = getattr(plugin, "apply", None)
        if apply is None or not inspect.iscoroutinefunction(apply):
            raise PluginError(
                f"plugin {name!r} needs 'async def apply(ctx, config)'; "
                f"got {type(apply).__name__ if apply is not None else 'nothing'}"
            )
        inject = getattr(plugin, "inject", ())
        if isinstance(inject, str) or not all(isinstance(i, str | ServiceKey) for i in inject):
            raise PluginError(
                f"plugin {name!r}: 'inject' must be a sequence of service names, "
                f"e.g. inject = ('agents',); got {inject!r}"
            )
        config_type = getattr(plugin, "Config", None)
        if config_type is not None and not (
            isinstance(config_type, type) and attrs.has(config_type)
        ):
            raise PluginError(f"plugin {name!r}: 'Config' must be an attrs class")
        names = tuple(service_name(i) for i in inject)
        return cls(plugin, name, names, config_type, apply, origin_of(plugin))

    def structure(self, config: object) -> Any:
        """Turn the config given to ``ctx.plugin`` into what ``apply`` receives.

        Raises:
            ConfigError: with every problem listed, each with its path.
        """
        if self.config_type is None:
            if config is not None:
                raise ConfigError(
                    f"plugin {self.name!r} takes no configuration (it has no Config class); "
                    f"got {config!r}"
                )
            return None
        if isinstance(config, self.config_type):
            return config
        if config is None:
            config = {}
        elif attrs.has(type(config)):
            # The Config class of an older version of this plugin (after a reload).
            config = config_converter.unstructure(config)
        if not isinstance(config, Mapping):
            raise ConfigError(
                f"plugin {self.name!r}: config must be a mapping or a "
                f"{self.config_type.__name__}; got {type(config).__name__}"
            )
        try:
            return config_converter.structure(dict(config), self.config_type)
        except Exception as exc:
            problems = tuple(config_converter.problems(exc, path="config"))
            raise ConfigError(
                f"invalid config for plugin {self.name!r} "
                f"({count_problems(problems)}):{list_problems(problems)}",
                problems,
            ) from exc
