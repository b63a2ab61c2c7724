"""Development reload: watch the source files of running plugins and reload on change."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from types import ModuleType

from ._context import Context
from ._errors import ReloadError
from ._fiber import Fiber

log = logging.getLogger("trio_agents")


async def _watchfiles(paths: Iterable[str]) -> AsyncIterator[set[str]]:
    import watchfiles  # an optional dependency: only --watch needs it

    async for batch in watchfiles.awatch(*paths):
        yield {path for _, path in batch}


async def watch_plugins(
    ctx: Context,
    paths: Iterable[str] | None = None,
    *,
    changes: AsyncIterable[set[str]] | None = None,
) -> None:
    """Reload every running plugin whose module's file changes; run it as a task.

    Args:
        ctx: any context of the runtime.
        paths: directories or files to watch; by default the directories of the modules of
            the plugins running now.
        changes: a stream of sets of changed paths, instead of ``watchfiles`` (for tests).
    """
    runtime = ctx.fiber.runtime
    if changes is None:
        if paths is None:
            paths = sorted({os.path.dirname(f) for f in _plugin_files(ctx)})
        changes = _watchfiles(paths)
    async for changed in changes:
        done: set[str] = set()
        for fiber in runtime.fibers:
            module = _module_of(fiber)
            file = getattr(module, "__file__", None)
            if module is None or file is None or module.__name__ in done:
                continue
            if _changed(file, changed):
                done.add(module.__name__)
                try:
                    await ctx.reload(module)
                except ReloadError as exc:
                    log.error("%s", exc)
                else:
                    log.info("reloaded %s", module.__name__)


def _changed(file: str, changed: set[str]) -> bool:
    # Sync on purpose: abspath only joins with the cwd; it never waits on the disk.
    return os.path.abspath(file) in {os.path.abspath(p) for p in changed}


def _module_of(fiber: Fiber) -> ModuleType | None:
    """The live module of ``fiber``'s plugin (the one in ``sys.modules``), if it has one."""
    origin = fiber.spec.origin
    return None if origin is None else sys.modules.get(origin.module)


def _plugin_files(ctx: Context) -> set[str]:
    files = set()
    for fiber in ctx.fiber.runtime.fibers:
        file = getattr(_module_of(fiber), "__file__", None)
        if file is not None:
            files.add(file)
    return files
