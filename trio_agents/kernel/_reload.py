"""Reload: replace the fibers of a plugin with fibers of its freshly imported code.

Rules:
- The target is a module, a plugin object or a fiber. It names a stable key, the plugin's
  origin (module name, attribute name; see :mod:`._origin`), never an object: the reference a
  user first applied, the fiber ``ctx.plugin`` returned and the module all keep working after
  any number of reloads, by this runtime or anyone else, and always reload the live version.
- The fibers replaced are the live ones whose recorded origin the key covers (a module covers
  all its plugins), only the topmost of each nested group.
- The module now in ``sys.modules`` under that name is executed anew from its source into a
  *new* module object; the old module object is kept untouched, so a failure can restore it
  exactly.
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
from ._fiber import Fiber
from ._origin import PluginOrigin, origin_of
from ._plugin import describe_plugin

if TYPE_CHECKING:
    from ._runtime import Runtime


def _key_of(runtime: Runtime, target: object) -> PluginOrigin:
    """The origin that reloading ``target`` (a module, a plugin or a fiber) replaces.

    Raises:
        ReloadError: ``target`` is not a module, nor defined at the top level of one.
    """
    if isinstance(target, ModuleType):
        return PluginOrigin(target.__name__, None)
    if isinstance(target, Fiber):
        if target.spec.origin is None:
            raise ReloadError(
                f"fiber {target.id!r} applies plugin {target.name!r}, which is not defined at "
                f"the top level of a module, so reload() cannot find its new code; define it "
                f"at the top level of a module"
            )
        return target.spec.origin
    # A running fiber's origin was recorded when it was applied, before anyone else could
    # have reloaded (or importlib.reload-ed) its module.
    for fiber in runtime.fibers:
        if fiber.plugin is target and fiber.spec.origin is not None:
            return fiber.spec.origin
    origin = origin_of(target)
    if origin is None:
        raise ReloadError(
            f"cannot find the module that defines {target!r}; reload() takes a module, a "
            f"plugin defined at the top level of a module, or a fiber of one"
        )
    return origin


def _live_module(key: PluginOrigin, target: object) -> ModuleType:
    module = sys.modules.get(key.module)
    if module is not None:
        return module
    if isinstance(target, ModuleType):
        return target
    raise ReloadError(
        f"module {key.module!r} of plugin {describe_plugin(target)} is not imported (it is "
        f"not in sys.modules); import it again, or pass the module itself to reload()"
    )


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
    key = _key_of(runtime, target)
    module = _live_module(key, target)
    covered = {f for f in runtime.fibers if f.spec.origin is not None and key.covers(f.spec.origin)}
    old = [
        f for f in runtime.fibers if f in covered and not any(a in covered for a in _ancestors(f))
    ]
    fresh = _fresh(module)

    def successor(fiber: Fiber) -> object:
        origin = fiber.spec.origin
        assert origin is not None
        if origin.attribute is None:
            return fresh
        if origin.attribute not in vars(fresh):
            raise ReloadError(
                f"reloaded {module.__name__!r} no longer defines {origin.attribute!r}; the "
                f"previous version was restored"
            )
        return vars(fresh)[origin.attribute]

    plan = [(f.parent, f, f._raw_config) for f in old]
    for fiber in reversed(old):
        await fiber.dispose()
    new: list[Fiber] = []
    try:
        for parent, fiber, raw in plan:
            assert parent is not None
            new.append(await parent.context.plugin(successor(fiber), raw))
    except Exception as exc:
        for fiber in reversed(new):
            await fiber.dispose()
        sys.modules[module.__name__] = module
        for parent, fiber, raw in plan:
            assert parent is not None
            await parent.context.plugin(fiber.plugin, raw)
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
