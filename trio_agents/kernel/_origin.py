"""Where a plugin is defined: the stable key that reload finds the live version by.

Rules:
- A module plugin's origin is ``(module name, None)``; a plugin object's origin is
  ``(module name, attribute name)``: the module named by its ``__module__`` and the top-level
  attribute of that module that holds it.
- The attribute is looked up in the module now in ``sys.modules`` and, failing that, in the
  namespace its ``apply`` was defined in (the version of the module the object comes from):
  after a reload the module in ``sys.modules`` is a new object, but the reference a user holds
  (``ta.shell.tool_bash``) still names the same attribute of the same module.
- The origin is recorded when the plugin is applied, so a later reload of the module by anyone
  (another runtime, ``importlib.reload``, ``--watch``) does not change what a fiber is.
- A plugin that is not a top-level attribute of its module has no origin and cannot be
  reloaded by reference.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import final

import attrs


@final
@attrs.frozen
class PluginOrigin:
    """The module a plugin comes from, and the attribute holding it (``None``: the module)."""

    module: str
    attribute: str | None

    def covers(self, other: PluginOrigin) -> bool:
        """Whether reloading this origin replaces plugins of origin ``other``."""
        return self.module == other.module and self.attribute in (None, other.attribute)


def origin_of(plugin: object) -> PluginOrigin | None:
    """The origin of ``plugin``, or ``None`` if it is not a top-level attribute of its module."""
    if isinstance(plugin, ModuleType):
        return PluginOrigin(plugin.__name__, None)
    module = getattr(plugin, "__module__", None)
    if not isinstance(module, str):
        return None
    for namespace in _namespaces(plugin, module):
        for attribute, value in namespace.items():
            if value is plugin:
                return PluginOrigin(module, attribute)
    return None


def _namespaces(plugin: object, module: str) -> Iterator[Mapping[str, object]]:
    live = sys.modules.get(module)
    current = None if live is None else vars(live)
    if current is not None:
        yield current
    apply = getattr(plugin, "apply", None)
    defined_in = getattr(getattr(apply, "__func__", apply), "__globals__", None)
    if (
        isinstance(defined_in, dict)
        and defined_in is not current
        and defined_in.get("__name__") == module
    ):
        yield defined_in
