"""The API reference (``docs/api.rst``) documents every name of every public ``__all__``, and
nothing else.

A name counts as documented when an autodoc directive (``autoclass``, ``autofunction``,
``autodata``, ``autoexception``, ...) or a plain ``py:`` directive names it, or names the same
object under the package that defines it: ``trio_agents.Agent`` is documented by
``.. autoclass:: trio_agents.agent.Agent``. A subpackage counts when its ``automodule`` is on
the page. The rst is parsed; nothing is built.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

import pytest

import trio_agents
from tests.helpers.paths import ROOT

REFERENCE = ROOT / "docs" / "api.rst"

#: ``.. autoclass:: trio_agents.agent.Agent`` and its options (``:module:``, ``:members:``, ...).
DIRECTIVE = re.compile(
    r"^\.\. (?P<kind>auto\w+|py:\w+):: (?P<name>\S+)\n(?P<options>(?:   :[\w-]+:.*\n)*)", re.M
)
OPTION = re.compile(r"^   :(?P<key>[\w-]+):(?P<value>.*)$", re.M)


def public_modules() -> list[str]:
    """Every public module with an ``__all__``: no part of its dotted name starts with ``_``."""
    names = ["trio_agents"]
    for info in pkgutil.walk_packages(trio_agents.__path__, "trio_agents."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        if hasattr(importlib.import_module(info.name), "__all__"):
            names.append(info.name)
    return sorted(names)


def documented_names(rst: str) -> set[str]:
    """The dotted names the directives of ``rst`` document (``automodule`` gives the module)."""
    found: set[str] = set()
    for directive in DIRECTIVE.finditer(rst):
        options = {m["key"]: m["value"].strip() for m in OPTION.finditer(directive["options"])}
        name = directive["name"]
        if "module" in options:
            name = f"{options['module']}.{name}"
        found.add(name)
        if directive["kind"] == "automodule" and "members" in options and not options["members"]:
            excluded = {n.strip() for n in options.get("exclude-members", "").split(",")}
            module = importlib.import_module(name)
            found.update(f"{name}.{n}" for n in module.__all__ if n not in excluded)
    return found


def resolve(dotted: str) -> object:
    """The object ``dotted`` names: a module, or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise AssertionError(f"{dotted} names nothing importable")


def undocumented(rst: str, modules: list[str]) -> list[str]:
    """The names in the ``__all__`` of ``modules`` that ``rst`` does not document."""
    documented = documented_names(rst)
    objects = {id(resolve(name)) for name in documented}
    missing = []
    for module_name in modules:
        module: ModuleType = importlib.import_module(module_name)
        for name in module.__all__:
            dotted = f"{module_name}.{name}"
            if dotted not in documented and id(getattr(module, name)) not in objects:
                missing.append(dotted)
    return missing


def test_every_layer_is_a_public_module() -> None:
    """The walk finds every layer, the events module and the pytest plugin (not vacuous)."""
    layers = {"kernel", "cancel", "session", "model", "agent", "shell", "mcp", "acp", "cli"}
    expected = {f"trio_agents.{layer}" for layer in layers} | {
        "trio_agents",
        "trio_agents.events",
        "trio_agents.testing",
        "trio_agents.testing.pytest_plugin",
    }
    assert expected <= set(public_modules())


def test_every_public_name_is_in_the_reference() -> None:
    """Each name of each public ``__all__`` is documented in docs/api.rst (or its object is)."""
    missing = undocumented(REFERENCE.read_text(), public_modules())
    assert not missing, f"add these to docs/api.rst (autoclass, autofunction, ...): {missing}"


def test_every_directive_of_the_reference_names_something() -> None:
    """No directive of docs/api.rst names a name that is gone (a stale entry)."""
    for name in documented_names(REFERENCE.read_text()):
        resolve(name)


def public_names(modules: list[str]) -> set[str]:
    """The dotted names of ``modules`` and of every name in their ``__all__``."""
    return set(modules) | {f"{m}.{n}" for m in modules for n in importlib.import_module(m).__all__}


def beyond_the_surface(rst: str, modules: list[str]) -> list[str]:
    """The names that ``rst`` documents and no public ``__all__`` of ``modules`` exports."""
    return sorted(documented_names(rst) - public_names(modules))


def test_the_reference_documents_only_public_names() -> None:
    """docs/api.rst documents exactly the public surface: nothing left it and stayed here."""
    extra = beyond_the_surface(REFERENCE.read_text(), public_modules())
    assert not extra, f"not in any public __all__; remove them from docs/api.rst: {extra}"


def test_a_name_beyond_the_surface_is_reported() -> None:
    """A directive for a name of a private module's ``__all__`` is reported."""
    rst = ".. autoclass:: trio_agents.agent.TurnMark\n\n.. autoclass:: trio_agents.agent.Agent\n"
    assert beyond_the_surface(rst, ["trio_agents.agent"]) == ["trio_agents.agent.TurnMark"]


def test_a_name_left_out_is_reported() -> None:
    """The check fails when a directive is missing, also for its top-level re-export."""
    rst = REFERENCE.read_text()
    without = rst.replace(".. autoclass:: trio_agents.cancel.UserCancel\n", "")
    assert without != rst
    missing = undocumented(without, ["trio_agents", "trio_agents.cancel"])
    assert missing == ["trio_agents.UserCancel", "trio_agents.cancel.UserCancel"]


@pytest.mark.parametrize(
    ("rst", "name"),
    [
        (".. py:data:: Step\n   :module: trio_agents.model\n", "trio_agents.model.Step"),
        (".. automodule:: trio_agents.cancel\n   :members:\n", "trio_agents.cancel.UserCancel"),
    ],
)
def test_the_parser_reads_module_options(rst: str, name: str) -> None:
    """``:module:`` qualifies a plain directive; ``automodule`` with ``:members:`` takes all."""
    assert name in documented_names(rst)
