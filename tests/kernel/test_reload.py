"""Reload: real plugin modules written to tmp_path, imported, rewritten and reloaded."""

from __future__ import annotations

import functools
import importlib
import itertools
import logging
import sys
import textwrap
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_agents.kernel import Context, FiberState, PluginReloaded, ReloadError, _watch, open_root

_names = itertools.count()

# A plugin whose every application records (version, config) on the 'journal' service,
# which a separate fiber provides: that state must survive the reload.
TEMPLATE = """
import attrs

name = "greeter"
inject = ("journal",)
VERSION = {version}


@attrs.frozen
class Config:
    greeting: str = "hi"


async def apply(ctx, config):
    ctx.journal.append((VERSION, config.greeting, ctx.fiber.id))
    {extra}
"""


class Journal:
    """The plugin the 'journal' service comes from."""

    name = "journal"

    def __init__(self) -> None:
        self.entries: list[tuple[object, ...]] = []

    async def apply(self, ctx: Context, config: None) -> None:
        ctx.provide("journal", self.entries)


class ModuleFile:
    """A plugin module on disk that a test rewrites."""

    def __init__(self, directory: Path) -> None:
        self.name = f"reload_plugin_{next(_names)}"
        self.path = directory / f"{self.name}.py"

    def write(self, version: int, extra: str = "pass", raw: str | None = None) -> None:
        source = raw if raw is not None else TEMPLATE.format(version=version, extra=extra)
        self.path.write_text(textwrap.dedent(source), encoding="utf-8")

    def load(self) -> types.ModuleType:
        return importlib.import_module(self.name)


@pytest.fixture
def plugin_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleFile]:
    monkeypatch.syspath_prepend(str(tmp_path))
    file = ModuleFile(tmp_path)
    file.write(1)
    yield file
    sys.modules.pop(file.name, None)


async def test_reload_replaces_fibers_with_the_new_code(plugin_file: ModuleFile) -> None:
    """New code runs under the same parent with the same config; PluginReloaded says so."""
    module = plugin_file.load()
    journal = Journal()
    events: list[PluginReloaded] = []
    async with open_root() as root:
        root.on(PluginReloaded, events.append)
        await root.plugin(journal)
        old = await root.plugin(module, {"greeting": "hello"})
        plugin_file.write(2)
        (new,) = await root.reload(module)
        assert old.state is FiberState.DISPOSED
        assert new.state is FiberState.ACTIVE
        assert new.parent is root.fiber
        assert sys.modules[plugin_file.name] is new.plugin is not module
        # A second reload starts from the module now in use.
        plugin_file.write(3)
        (third,) = await root.reload(new.plugin)
    assert [(v, g) for v, g, _ in journal.entries] == [(1, "hello"), (2, "hello"), (3, "hello")]
    assert events[0] == PluginReloaded(
        plugin="greeter",
        module=plugin_file.name,
        old_fiber_ids=(old.id,),
        new_fiber_ids=(new.id,),
    )
    assert events[1].new_fiber_ids == (third.id,)


# A plugin object whose one effect journals its set-up and its teardown, with its version.
COUNTED = """
import contextlib

VERSION = {version}


class Counted:
    name = "counted"
    inject = ("journal",)

    async def apply(self, ctx, config):
        await ctx.effect(self.effect(ctx.journal))

    @contextlib.asynccontextmanager
    async def effect(self, journal):
        version = VERSION  # this version's, even if importlib.reload rebinds the global
        journal.append(("set up", version))
        try:
            yield
        finally:
            journal.append(("torn down", version))


plugin = Counted()
"""


def cycles(*versions: int) -> list[tuple[str, int]]:
    """The journal of versions set up and torn down one after the other."""
    return [(step, v) for v in versions for step in ("set up", "torn down")]


def live(root: Context, name: str) -> list[Any]:
    return [f for f in root.fiber.runtime.fibers if f.name == name]


async def test_reload_by_the_first_reference_any_number_of_times(
    plugin_file: ModuleFile,
) -> None:
    """The object first applied, its first fiber, the live fiber and the first module object
    all reload the live version, every time: each reload tears its effect down, sets it up."""
    plugin_file.write(0, raw=COUNTED.format(version=1))
    module = plugin_file.load()
    reference = module.plugin
    journal = Journal()
    async with open_root() as root:
        await root.plugin(journal)
        first = await root.plugin(reference)
        targets = [reference, reference, reference, first, None, module]
        for version, target in enumerate(targets, start=2):
            plugin_file.write(0, raw=COUNTED.format(version=version))
            (current,) = live(root, "counted")
            (new,) = await root.reload(current if target is None else target)
            assert current.state is FiberState.DISPOSED
            assert live(root, "counted") == [new]
            assert new.plugin is sys.modules[plugin_file.name].plugin
            assert journal.entries[-2:] == [("torn down", version - 1), ("set up", version)]
    assert journal.entries == cycles(1, 2, 3, 4, 5, 6, 7)


async def test_reload_after_another_runtime_reloaded_the_module(plugin_file: ModuleFile) -> None:
    """A module reloaded elsewhere (sys.modules holds a newer module) reloads the live fiber."""
    plugin_file.write(0, raw=COUNTED.format(version=1))
    reference = plugin_file.load().plugin
    mine, theirs = Journal(), Journal()
    async with open_root() as root:
        await root.plugin(mine)
        await root.plugin(reference)
        async with open_root() as other:
            await other.plugin(theirs)
            await other.plugin(reference)
            plugin_file.write(0, raw=COUNTED.format(version=2))
            await other.reload(reference)
        assert sys.modules[plugin_file.name].plugin is not reference
        plugin_file.write(0, raw=COUNTED.format(version=3))
        (new,) = await root.reload(reference)
        assert new.plugin is sys.modules[plugin_file.name].plugin
    assert mine.entries == cycles(1, 3)
    assert theirs.entries == cycles(1, 2)


async def test_reload_after_importlib_reload_of_the_module(
    plugin_file: ModuleFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """importlib.reload rebinds the module's attributes in place: the fiber's origin, recorded
    when it was applied, still finds it."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no stale .pyc within one second
    plugin_file.write(0, raw=COUNTED.format(version=1))
    module = plugin_file.load()
    reference = module.plugin
    journal = Journal()
    async with open_root() as root:
        await root.plugin(journal)
        await root.plugin(reference)
        plugin_file.write(0, raw=COUNTED.format(version=2))
        importlib.reload(module)
        assert module.plugin is not reference
        plugin_file.write(0, raw=COUNTED.format(version=3))
        (new,) = await root.reload(reference)
        assert new.plugin is sys.modules[plugin_file.name].plugin
    assert journal.entries == cycles(1, 3)


async def test_reload_by_a_fiber_of_a_module_plugin_reloads_its_module(
    plugin_file: ModuleFile,
) -> None:
    """The fiber of a module plugin names the module: the live module's fibers are replaced."""
    module = plugin_file.load()
    journal = Journal()
    async with open_root() as root:
        await root.plugin(journal)
        first = await root.plugin(module)
        for version in (2, 3):
            plugin_file.write(version)
            (new,) = await root.reload(first)
            assert new.plugin is sys.modules[plugin_file.name]
    assert [v for v, _, _ in journal.entries] == [1, 2, 3]


async def test_syntax_error_keeps_the_old_plugin_running(plugin_file: ModuleFile) -> None:
    """If the new code does not import, nothing is replaced and ReloadError says why."""
    module = plugin_file.load()
    async with open_root() as root:
        await root.plugin(Journal())
        old = await root.plugin(module)
        plugin_file.write(2, raw="def broken(:\n")
        with pytest.raises(
            ReloadError,
            match=rf"^reloading '{plugin_file.name}' failed while importing it, so nothing was "
            r"replaced: SyntaxError: ",
        ):
            await root.reload(module)
        assert old.state is FiberState.ACTIVE
        assert sys.modules[plugin_file.name] is module


async def test_failing_apply_restores_the_old_plugin(plugin_file: ModuleFile) -> None:
    """If the new code's apply raises, the old code is applied again and ReloadError raised."""
    module = plugin_file.load()
    journal = Journal()
    async with open_root() as root:
        await root.plugin(journal)
        old = await root.plugin(module, {"greeting": "yo"})
        plugin_file.write(2, extra='raise RuntimeError("v2 broken")')
        with pytest.raises(
            ReloadError,
            match=rf"^reloading '{plugin_file.name}' failed while applying it; the previous "
            r"version is running again: RuntimeError: v2 broken$",
        ):
            await root.reload(module)
        assert old.state is FiberState.DISPOSED
        (running,) = (f for f in root.fiber.children if f.name == "greeter")
        assert running.plugin is module
        assert running.state is FiberState.ACTIVE
        assert sys.modules[plugin_file.name] is module
    assert [(v, g) for v, g, _ in journal.entries] == [(1, "yo"), (2, "yo"), (1, "yo")]


async def test_a_failing_second_plugin_tears_down_the_first_new_one(
    plugin_file: ModuleFile,
) -> None:
    """Reloading a module of two plugins whose second apply fails: the first new fiber is torn
    down again and both old plugins run again, each effect set up and torn down in turn."""
    two = (
        COUNTED
        + """
class Second(Counted):
    name = "second"

    async def apply(self, ctx, config):
        await super().apply(ctx, config)
        {extra}


second = Second()
"""
    )
    plugin_file.write(0, raw=two.format(version=1, extra="pass"))
    module = plugin_file.load()
    journal = Journal()
    async with open_root() as root:
        await root.plugin(journal)
        await root.plugin(module.plugin)
        await root.plugin(module.second)
        plugin_file.write(0, raw=two.format(version=2, extra='raise RuntimeError("no")'))
        with pytest.raises(ReloadError, match=r"failed while applying it; .*RuntimeError: no$"):
            await root.reload(module)
        assert [f.plugin for f in live(root, "counted") + live(root, "second")] == [
            module.plugin,
            module.second,
        ]
        assert sys.modules[plugin_file.name] is module

    def pair(version: int) -> list[tuple[str, int]]:
        return [("set up", version)] * 2 + [("torn down", version)] * 2

    # The old pair (torn down newest first); the new pair, whose second apply failed; the
    # old pair again, until the runtime ends.
    assert journal.entries == pair(1) + pair(2) + pair(1)


async def test_state_on_another_fiber_survives_a_reload(plugin_file: ModuleFile) -> None:
    """The service's provider is not the reloaded plugin, so its state is untouched."""
    module = plugin_file.load()
    journal = Journal()
    async with open_root() as root:
        provider = await root.plugin(journal)
        await root.plugin(module)
        service = root.get("journal")
        plugin_file.write(2)
        await root.reload(module)
        assert provider.state is FiberState.ACTIVE
        assert root.get("journal") is service
        assert len(service) == 2


async def test_reload_of_a_plugin_object_and_only_top_fibers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object plugin is reloaded by its attribute name; nested fibers of it go with the top."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"reload_obj_{next(_names)}"
    source = """
        VERSION = {v}
        LOG = []

        class Nested:
            name = "nested"

            async def apply(self, ctx, config):
                LOG.append(VERSION)
                if ctx.fiber.parent.name != "nested":
                    await ctx.plugin(self)

        plugin = Nested()
    """
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source.format(v=1)), encoding="utf-8")
    module = importlib.import_module(name)
    try:
        async with open_root() as root:
            top = await root.plugin(module.plugin)
            assert len(top.children) == 1
            path.write_text(textwrap.dedent(source.format(v=2)), encoding="utf-8")
            (new,) = await root.reload(module.plugin)
            assert sys.modules[name].LOG == [2, 2]
            assert len(new.children) == 1
            assert top.state is FiberState.DISPOSED
            path.write_text("VERSION = 3\n", encoding="utf-8")
            with pytest.raises(
                ReloadError,
                match=rf"^reloaded '{name}' no longer defines 'plugin'; the previous "
                r"version was restored$",
            ):
                await root.reload(new.plugin)
            assert sys.modules[name].plugin is new.plugin
            (restored,) = (f for f in root.fiber.children if f.name == "nested")
            assert restored.plugin is new.plugin
            assert restored.state is FiberState.ACTIVE
    finally:
        sys.modules.pop(name, None)


async def test_reload_refuses_targets_without_a_source_module() -> None:
    """Objects with no defining module, and modules with no file, cannot be reloaded."""
    async with open_root() as root:
        with pytest.raises(
            ReloadError,
            match=r"^cannot find the module that defines 3; reload\(\) takes a module, a "
            r"plugin defined at the top level of a module, or a fiber of one$",
        ):
            await root.reload(3)
        fiber = await root.plugin(Journal())
        with pytest.raises(
            ReloadError,
            match=rf"^fiber '{fiber.id}' applies plugin 'journal', which is not defined at the "
            r"top level of a module, so reload\(\) cannot find its new code; define it at "
            r"the top level of a module$",
        ):
            await root.reload(fiber)
        with pytest.raises(
            ReloadError, match=r"^module 'nowhere' has no source file to reload from$"
        ):
            await root.reload(types.ModuleType("nowhere"))


async def test_reload_of_a_plugin_whose_module_is_no_longer_imported(
    plugin_file: ModuleFile,
) -> None:
    """Reloading needs the module in sys.modules; the error says to import it again."""
    plugin_file.write(0, raw=COUNTED.format(version=1))
    reference = plugin_file.load().plugin
    del sys.modules[plugin_file.name]
    async with open_root() as root:
        with pytest.raises(
            ReloadError,
            match=rf"^module '{plugin_file.name}' of plugin 'counted' is not imported \(it "
            r"is not in sys.modules\); import it again, or pass the module itself to reload\(\)$",
        ):
            await root.reload(reference)


async def changes_from(channel: trio.MemoryReceiveChannel[set[str]]) -> AsyncIterator[set[str]]:
    async for batch in channel:
        yield batch


async def test_watch_plugins_reloads_a_changed_module(
    plugin_file: ModuleFile, caplog: pytest.LogCaptureFixture
) -> None:
    """A change to a running plugin's file reloads it; a failed reload is logged, not fatal."""
    module = plugin_file.load()
    journal = Journal()
    send, receive = trio.open_memory_channel[set[str]](0)
    async with open_root() as root:
        await root.plugin(journal)
        await root.plugin(module)
        root.start_soon(
            functools.partial(_watch.watch_plugins, changes=changes_from(receive)), root
        )
        await send.send({"/somewhere/else.py"})
        await trio.testing.wait_all_tasks_blocked()
        assert len(journal.entries) == 1
        plugin_file.write(2)
        await send.send({str(plugin_file.path)})
        await trio.testing.wait_all_tasks_blocked()
        assert [v for v, _, _ in journal.entries] == [1, 2]
        plugin_file.write(3, raw="this is not python\n")
        with caplog.at_level(logging.ERROR, logger="trio_agents"):
            await send.send({str(plugin_file.path)})
            await trio.testing.wait_all_tasks_blocked()
        assert any("failed while importing it" in r.getMessage() for r in caplog.records)
        (greeter,) = (f for f in root.fiber.children if f.name == "greeter")
        assert greeter.state is FiberState.ACTIVE


async def test_watch_plugins_defaults_to_watchfiles_on_the_plugin_directories(
    plugin_file: ModuleFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without changes=, the watcher asks watchfiles about the running plugins' directories."""
    import watchfiles

    module = plugin_file.load()
    journal = Journal()
    watched: list[tuple[str, ...]] = []
    batches: trio.MemoryReceiveChannel[Any]
    feed, batches = trio.open_memory_channel[Any](0)

    async def fake_awatch(*paths: str) -> AsyncIterator[set[tuple[object, str]]]:
        watched.append(paths)
        async for batch in batches:
            yield batch

    monkeypatch.setattr(watchfiles, "awatch", fake_awatch)
    async with open_root() as root:
        await root.plugin(journal)
        await root.plugin(module)
        root.start_soon(_watch.watch_plugins, root)
        plugin_file.write(2)
        await feed.send({(watchfiles.Change.modified, str(plugin_file.path))})
        await trio.testing.wait_all_tasks_blocked()
    assert watched == [(str(plugin_file.path.parent),)]
    assert [v for v, _, _ in journal.entries] == [1, 2]
