"""Reload: replace the fibers of a plugin with fibers of its freshly imported code.

Rules:
- The module is executed anew from its source into a *new* module object; the old module
  object is kept untouched, so a failure can restore it exactly.
- Import failure: nothing was disposed; the old plugin keeps running; :class:`ReloadError`.
- Otherwise every fiber of the old plugin is disposed (newest first) and the new plugin is
  applied under the same parents with the same configs (oldest first). If one apply fails,
  the new fibers are disposed, the old plugin is applied again, and :class:`ReloadError` is
  raised.
- State that must survive a reload lives on another fiber (a service, for instance).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from ._errors import ReloadError
from ._events import PluginReloaded

if TYPE_CHECKING:
    from ._fiber import Fiber
    from ._runtime import Runtime

__all__ = ["module_of", "reload"]


def module_of(target: object) -> ModuleType:
    """The module that defines plugin ``target`` (or ``target`` itself if it is a module)."""
    if isinstance(target, ModuleType):
        return target
    name = getattr(target, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None or not any(v is target for v in vars(module).values()):
        raise ReloadError(
            f"cannot find the module that defines {target!r}; pass the module itself to reload()"
        )
    return module


def _fresh(module: ModuleType) -> ModuleType:
    spec = module.__spec__
    if spec is None or spec.origin is None or spec.loader is None:
        raise ReloadError(f"module {module.__name__!r} has no source file to reload from")
    fresh = importlib.util.module_from_spec(spec)
    try:
        with open(spec.origin, encoding="utf-8") as f:
            source = f.read()
        # Compiled from source, not from the bytecode cache: a file rewritten within the
        # cache's mtime resolution must still be seen.
        code = compile(source, spec.origin, "exec")
        sys.modules[module.__name__] = fresh
        exec(code, fresh.__dict__)
    except BaseException as exc:
        sys.modules[module.__name__] = module
        if not isinstance(exc, Exception):
            raise
        raise ReloadError(
            f"reloading {module.__name__!r} failed while importing it, so nothing was "
            f"replaced: {type(exc).__name__}: {exc}"
        ) from exc
    return fresh


async def reload(runtime: Runtime, target: object) -> tuple[Fiber, ...]:
    """See :meth:`Context.reload`."""
    module = module_of(target)
    names = {id(v): k for k, v in vars(module).items()}
    if target is module:
        replaced = {id(f.plugin) for f in runtime.fibers if id(f.plugin) in names}
        replaced |= {id(f.plugin) for f in runtime.fibers if f.plugin is module}
    else:
        replaced = {id(target)}
    old = [
        f
        for f in runtime.fibers
        if id(f.plugin) in replaced and not any(id(a.plugin) in replaced for a in _ancestors(f))
    ]
    fresh = _fresh(module)

    def successor(plugin: object) -> object:
        if plugin is module:
            return fresh
        attr = names[id(plugin)]
        if attr not in vars(fresh):
            raise ReloadError(
                f"reloaded {module.__name__!r} no longer defines {attr!r}; the previous "
                f"version was restored"
            )
        return vars(fresh)[attr]

    plan = [(f.parent, f.plugin, f._raw_config) for f in old]
    for fiber in reversed(old):
        await fiber.dispose()
    new: list[Fiber] = []
    try:
        for parent, plugin, raw in plan:
            assert parent is not None
            new.append(await parent.context.plugin(successor(plugin), raw))
    except Exception as exc:
        for fiber in reversed(new):
            await fiber.dispose()
        sys.modules[module.__name__] = module
        for parent, plugin, raw in plan:
            assert parent is not None
            await parent.context.plugin(plugin, raw)
        if isinstance(exc, ReloadError):
            raise
        raise ReloadError(
            f"reloading {module.__name__!r} failed while applying it; the previous version "
            f"is running again: {type(exc).__name__}: {exc}"
        ) from exc
    runtime.bus.emit(
        PluginReloaded(
            plugin=", ".join(sorted({f.name for f in new})) or module.__name__,
            module=module.__name__,
            old_fiber_ids=tuple(f.id for f in old),
            new_fiber_ids=tuple(f.id for f in new),
        )
    )
    return tuple(new)


def _ancestors(fiber: Fiber) -> list[Fiber]:
    found = []
    parent = fiber.parent
    while parent is not None:
        found.append(parent)
        parent = parent.parent
    return found
