"""The check the slots tests share (tests/agent/test_slots.py, tests/tracing/test_slots.py):
a package's classes take their slots from attrs, never from a hand-written ``__slots__``."""

from __future__ import annotations

import ast
from pathlib import Path


def hand_written_slots(package: Path, at_least: int) -> list[str]:
    """Every ``__slots__ = ...`` in a class body of ``package``'s modules, as ``file:line``;
    ``at_least`` modules must be read, so that the walk is not vacuous."""
    found: list[str] = []
    modules = sorted(package.glob("*.py"))
    assert len(modules) >= at_least, f"{len(modules)} modules in {package}"
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for statement in node.body:
                targets = (
                    statement.targets
                    if isinstance(statement, ast.Assign)
                    else [statement.target]
                    if isinstance(statement, ast.AnnAssign)
                    else []
                )
                if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
                    found.append(f"{path.name}:{statement.lineno}")
    return found
