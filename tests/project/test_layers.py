"""Layering (DESIGN.md §2): a module imports only from its own layer or below."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "trio_agents"

# ``_base`` is the private base layer below the kernel: state tables, the strict converter and
# its wording, tag registries, the one-shot signal. Every layer may import it.
LAYERS = {
    "_base": -1,
    "kernel": 0,
    "cancel": 0,
    "session": 1,
    "model": 1,
    # Tracing's instrumentation points are called from model (1) up to acp and mcp (3).
    "tracing": 1,
    "agent": 2,
    "shell": 3,
    "acp": 3,
}
LAYERS["mcp"] = 3
# The workspace tools (files, plan, project instructions) sit beside the shell.
LAYERS["workspace"] = 3
# Workers and their clients (the work queue) run agents on the PostgreSQL store.
LAYERS["workers"] = 3
LAYERS["cli"] = 4
# The testing kit (fixtures, collectors) uses every layer below, beside the command.
LAYERS["testing"] = 4
# ``python -m trio_agents`` is the command's other entry point: the top layer.
LAYERS["__main__"] = 4
# The package root, the shared event namespace and the error base sit beside the layers.
EXEMPT = {"__init__", "events", "_errors"}


def _layer_of(top: str) -> int | None:
    """The layer of ``trio_agents.<top>``, or None for an exempt (base) module."""
    if top in EXEMPT:
        return None
    if top not in LAYERS:
        raise AssertionError(f"trio_agents.{top} is not in the layer table of DESIGN.md §2")
    return LAYERS[top]


def _imported(path: Path) -> list[tuple[int, str]]:
    """Every (line, 'trio_agents.<top>') that the module at ``path`` imports."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = parts[:-1]  # the package a relative import starts from (also for __init__)
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join((*base, node.module) if node.module else base)
                if not node.module:
                    found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
                    continue
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return [(line, m) for line, m in found if m == "trio_agents" or m.startswith("trio_agents.")]


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_package_has_layered_modules() -> None:
    """The walk finds the kernel and cancel packages (the check is not vacuous)."""
    names = {p.relative_to(PACKAGE).parts[0] for p in _modules()}
    assert {"kernel", "cancel"} <= names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_go_only_to_the_same_or_a_lower_layer(path: Path) -> None:
    """No module imports from a higher layer."""
    top = path.relative_to(PACKAGE).with_suffix("").parts[0]
    own = _layer_of(top)
    if own is None:
        return
    bad = []
    for line, module in _imported(path):
        parts = module.split(".")
        if len(parts) < 2:
            bad.append(f"line {line}: imports the package root 'trio_agents'")
            continue
        target = _layer_of(parts[1])
        if target is not None and target > own:
            bad.append(f"line {line}: {module} (layer {target}) from layer {own}")
    assert not bad, f"{path.relative_to(PACKAGE)} breaks the layering: " + "; ".join(bad)


def test_relative_imports_are_resolved_to_their_package() -> None:
    """The checker resolves ``from ..cancel import x`` inside kernel/ to trio_agents.cancel."""
    imported = {m for _, m in _imported(PACKAGE / "kernel" / "_fiber.py")}
    assert "trio_agents.cancel" in imported
    assert "trio_agents.kernel._stack" in imported
    assert _layer_of("agent") == 2
    with pytest.raises(AssertionError, match=r"^trio_agents\.nowhere is not in the layer table"):
        _layer_of("nowhere")


# -- private modules stay in their package -------------------------------------------------------

#: Private modules any package may import: the base layer, and the error base beside the layers.
SHARED_PRIVATE = {"_base", "_errors"}


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def _private_targets(path: Path) -> list[tuple[int, str]]:
    """Every (line, module) the module at ``path`` imports that is private (a ``_x`` part),
    ``from pkg import _x`` included."""
    found = [(line, m) for line, m in _imported(path) if _is_private(m)]
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, node.module))
            if module.startswith("trio_agents.") and not _is_private(module):
                found += [
                    (node.lineno, f"{module}.{a.name}") for a in node.names if a.name[:1] == "_"
                ]
    return found


def _cross_package_private(path: Path) -> list[str]:
    """What the module at ``path`` imports from another package's private modules."""
    own = path.relative_to(PACKAGE).with_suffix("").parts[0]
    bad = []
    for line, module in _private_targets(path):
        top = module.split(".")[1]
        if top != own and top not in SHARED_PRIVATE:
            bad.append(f"line {line}: {module}")
    return bad


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_packages_private_module(path: Path) -> None:
    """A package uses another's public names, or the base layer ``trio_agents._base``."""
    bad = _cross_package_private(path)
    assert not bad, (
        f"{path.relative_to(PACKAGE)} imports another package's private module: "
        + "; ".join(bad)
        + " (import the package's public name, or move the shared piece to trio_agents._base)"
    )


def test_the_private_import_check_sees_relative_and_absolute_forms() -> None:
    """The check resolves ``from ..x._y import``, ``from ..x import _y`` and absolute forms."""
    imported = {m for _, m in _private_targets(PACKAGE / "kernel" / "_fiber.py")}
    assert "trio_agents.kernel._stack" in imported
    assert not _cross_package_private(PACKAGE / "kernel" / "_stack.py")
