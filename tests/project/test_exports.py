"""Public packages export each name once, sorted, and every exported name resolves."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import trio_agents


def _public_packages() -> list[str]:
    names = ["trio_agents"]
    for info in pkgutil.walk_packages(trio_agents.__path__, "trio_agents."):
        last = info.name.rsplit(".", 1)[-1]
        if info.ispkg and not last.startswith("_"):
            names.append(info.name)
    return sorted(names)


def test_kernel_and_cancel_are_public_packages() -> None:
    """The walk finds the layer-0 packages (the checks below are not vacuous)."""
    assert {"trio_agents", "trio_agents.kernel", "trio_agents.cancel"} <= set(_public_packages())


def _isort_style(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS (``AGENTS``), then Classes, then functions."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


@pytest.mark.parametrize("name", _public_packages())
def test_all_is_sorted_unique_and_resolves(name: str) -> None:
    """__all__ exists, is sorted and duplicate-free, and each name is an attribute."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported, key=_isort_style), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{name}.__all__ lists a name twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"


# -- private modules -------------------------------------------------------------------------------
#
# The convention (trio's): a package's ``__init__.py`` is the one list of what the package
# exports (``from ._x import Name as Name`` and its sorted ``__all__``); a private module lists
# nothing, so no name is written down twice. What a private module offers its siblings is its
# names without a leading underscore; mypy's strict ``no_implicit_reexport`` refuses an import
# of a name through a module that only imported it, and ruff refuses an import nobody uses.

PACKAGE = Path(trio_agents.__file__).parent


def _lists_all(path: Path) -> bool:
    """Whether the module at ``path`` assigns ``__all__`` at its top level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AugAssign | ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return True
    return False


def _private_modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("_*.py")):
        if path.name in {"__init__.py", "__main__.py"} or "__pycache__" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found.append((".".join(parts), path))
    return found


def test_private_modules_are_found() -> None:
    """The walk sees the kernel's private modules (the check below is not vacuous)."""
    assert "trio_agents.kernel._fiber" in dict(_private_modules())


def test_the_check_sees_an_all(tmp_path: Path) -> None:
    """A module that assigns or extends ``__all__`` is seen to list it; one that does not is not."""
    listed, extended, plain = (tmp_path / name for name in ("a.py", "b.py", "c.py"))
    listed.write_text('import x\n\n__all__ = ["f"]\n', encoding="utf-8")
    extended.write_text('__all__: list[str] = []\n__all__ += ["g"]\n', encoding="utf-8")
    plain.write_text('def f() -> None:\n    """__all__ = []"""\n', encoding="utf-8")
    assert [_lists_all(p) for p in (listed, extended, plain)] == [True, True, False]


@pytest.mark.parametrize(("module", "path"), _private_modules(), ids=lambda v: str(v))
def test_a_private_module_lists_no_all(module: str, path: Path) -> None:
    """A private module has no ``__all__``: its package's ``__init__.py`` lists the exports."""
    assert not _lists_all(path), (
        f"{module} lists __all__; drop it: {module.rsplit('.', 1)[0]}'s __init__.py re-exports "
        f"what users call (from ._x import Name as Name, and its __all__)"
    )


# -- what a package offers the layers above it, outside __all__ ----------------------------------

#: The names a public package re-exports outside its ``__all__``: what the layers above it import
#: from it (a package may not import another's private module, ``tests/project/test_layers.py``) and
#: users do not call. Each is named in its package's docstring. A name here that no other
#: package imports any more goes back to its private module.
OFFERED: dict[str, frozenset[str]] = {
    "trio_agents.agent": frozenset(
        {"HOOK_POINTS", "HookPolicy", "TurnSnapshot", "mode_named", "standing_answers"}
    ),
    "trio_agents.cancel": frozenset({"check_cause", "forget_inherited_scopes"}),
    "trio_agents.kernel": frozenset({"config_converter", "current_context"}),
    "trio_agents.mcp": frozenset({"McpError"}),
    "trio_agents.model": frozenset({"ChatMessage", "ModelsPlugin", "OutputSpec", "ToolCallPart"}),
    "trio_agents.session": frozenset(
        {"Ride", "Stored", "check_recordable_cause", "check_session_id", "parse_store_spec"}
    ),
    "trio_agents.shell": frozenset(
        {
            "SANDBOX_POLICIES",
            "SHELL_ROUTES",
            "SupervisedChild",
            "Terminal",
            "job_state",
            "supervisor_available",
        }
    ),
    "trio_agents.tracing": frozenset(
        {
            "approved",
            "chat",
            "compaction",
            "environment",
            "execute_tool",
            "headers",
            "invoke_agent",
            "open_environ_tracing",
            "remote_parent",
            "shell_job",
        }
    ),
    "trio_agents.workspace": frozenset(
        {"ARGUMENTS", "format_plan", "parse_command", "plan_entries", "prompt_commands"}
    ),
}

#: Offered for session backends written outside the package (``docs/sessions.rst``, "Writing a
#: backend"): no other package here imports them.
FOR_BACKENDS = {"trio_agents.session": frozenset({"Stored"})}


def _reexported(package: str) -> set[str]:
    """The names the ``__init__.py`` of ``package`` re-exports (``from ._x import n as n``)."""
    path = PACKAGE.parent.joinpath(*package.split("."), "__init__.py")
    return {
        alias.name
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
        if alias.asname == alias.name
    }


@pytest.mark.parametrize("package", _public_packages())
def test_a_package_reexports_outside_all_only_what_it_offers(package: str) -> None:
    """Every re-export of a public package is in its ``__all__`` or written down in OFFERED."""
    exported = set(importlib.import_module(package).__all__)
    hidden = _reexported(package) - exported
    assert hidden == set(OFFERED.get(package, frozenset())), (
        f"{package} re-exports {sorted(hidden)} outside __all__; OFFERED lists "
        f"{sorted(OFFERED.get(package, frozenset()))}"
    )


@pytest.mark.parametrize("package", sorted(OFFERED))
def test_offered_names_are_importable_named_in_the_docstring_and_not_exported(
    package: str,
) -> None:
    """What a package offers the layers above resolves, stays out of __all__, and its
    docstring names it."""
    module = importlib.import_module(package)
    for name in OFFERED[package]:
        assert hasattr(module, name), f"{package} offers {name}, which it does not define"
        assert name not in module.__all__, f"{package} exports {name}: remove it from OFFERED"
        assert f"``{name}``" in (module.__doc__ or ""), f"{package}'s docstring omits {name}"


def _imported_from_packages() -> set[tuple[str, str]]:
    """Every (package, name) that a module of another package of trio_agents imports from a
    public package: ``from ..pkg import name`` or ``pkg.name`` after ``from .. import pkg``."""
    found: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        own, base = ".".join(parts[:2]), parts[:-1]
        aliases: dict[str, str] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                prefix = base[: len(base) - node.level + 1] if node.level else ()
                module = ".".join((*prefix, node.module) if node.module else prefix)
                for alias in node.names:
                    if module == "trio_agents":
                        aliases[alias.asname or alias.name] = f"trio_agents.{alias.name}"
                    elif module != own:
                        found.add((module, alias.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                package = aliases.get(node.value.id)
                if package is not None and package != own:
                    found.add((package, node.attr))
    return found


def test_every_offered_name_is_used_by_another_package() -> None:
    """An offered name that no other package imports any more goes back to its private module."""
    used = _imported_from_packages()
    unused = sorted(
        f"{package}.{name}"
        for package, names in OFFERED.items()
        for name in names - FOR_BACKENDS.get(package, frozenset())
        if (package, name) not in used
    )
    assert not unused, f"no other package imports {unused}: drop their re-exports"


# -- the size of the public surface ----------------------------------------------------------------

#: The most distinct public names per 1,000 lines of the package (trio has about 5.9).
MAX_NAMES_PER_KLOC = 7.0


def public_names() -> set[str]:
    """The distinct names in the ``__all__`` of the public packages (``trio_agents`` and every
    subpackage whose dotted name has no ``_`` part). A name exported by two packages
    (``trio_agents.Agent``, ``trio_agents.agent.Agent``) counts once; a public subpackage that
    ``trio_agents`` lists (``agent``) is not a name of its own: its names are counted."""
    packages = _public_packages()
    names = {n for p in packages for n in importlib.import_module(p).__all__}
    return names - {p.rsplit(".", 1)[-1] for p in packages if p != "trio_agents"}


def package_lines() -> int:
    """Every physical line of ``trio_agents/**/*.py``: code, docstrings, comments and blanks."""
    return sum(
        len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def test_the_count_sees_the_public_names_and_the_lines() -> None:
    """The count includes names of several layers and every module (it is not vacuous)."""
    names = public_names()
    assert {"Agent", "Context", "UserCancel", "JsonlStore", "ScriptedModel", "main"} <= names
    assert "agent" not in names
    assert package_lines() > sum(1 for _ in PACKAGE.rglob("*.py")) * 10


def test_the_public_surface_has_at_most_7_names_per_1000_lines() -> None:
    """Distinct public names per 1,000 lines of the package stay at or under 7 (issue #38)."""
    names, lines = len(public_names()), package_lines()
    per_kloc = names / lines * 1000
    assert per_kloc <= MAX_NAMES_PER_KLOC, (
        f"{names} public names in {lines} lines: {per_kloc:.2f} per 1,000 lines, over "
        f"{MAX_NAMES_PER_KLOC}; a name only the package and its tests use belongs in a private "
        f"module (see OFFERED)"
    )
