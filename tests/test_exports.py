"""Public packages export each name once, sorted, and every exported name resolves."""

from __future__ import annotations

import importlib
import pkgutil

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
