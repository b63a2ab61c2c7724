"""The suite is laid out like the code: ``tests/<layer>/test_<concept>.py``, one folder per
package of ``trio_agents``, support code in the ``tests.helpers`` package, and no test module
importing another (what two of them share lives in ``tests/helpers``)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import ROOT, TESTS

#: Folders of tests that are not one package's: the repository's own checks (docs, exports,
#: layers) and the long stress runs, which cross every layer.
OTHER_FOLDERS = {"project", "stress"}


def _packages() -> set[str]:
    code = ROOT / "trio_agents"
    return {p.name.lstrip("_") for p in code.iterdir() if (p / "__init__.py").is_file()}


def _test_modules() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def test_the_scans_see_the_suite() -> None:
    """The walk finds the suite's modules and the code's packages (the checks are not vacuous)."""
    assert len(_test_modules()) > 150
    assert {"kernel", "agent", "session", "acp", "cli", "base"} <= _packages()


def test_every_test_module_sits_in_the_folder_of_a_layer() -> None:
    """A test module is ``tests/<folder>/test_<concept>.py``, its folder named for a package of
    the code (``base`` for ``trio_agents/_base``) or one of OTHER_FOLDERS."""
    allowed = _packages() | OTHER_FOLDERS
    misplaced = [
        str(p.relative_to(TESTS))
        for p in _test_modules()
        if len(p.relative_to(TESTS).parts) != 2 or p.parent.name not in allowed
    ]
    assert misplaced == []


def test_every_folder_of_tests_is_a_package() -> None:
    """Each folder holding test modules has an ``__init__.py``: modules of the same name in two
    folders (``agent/test_config.py``, ``kernel/test_config.py``) import as different modules."""
    folders = {p.parent for p in _test_modules()} | {TESTS, TESTS / "helpers"}
    assert sorted(str(f) for f in folders if not (f / "__init__.py").is_file()) == []


def test_no_test_module_imports_another() -> None:
    """What two test modules share is in ``tests.helpers``, never imported from a test module."""
    offenders = [
        f"{p.relative_to(TESTS)} imports {name}"
        for p in _test_modules()
        for name in _imported_modules(p)
        if name.rsplit(".", 1)[-1].startswith("test_")
    ]
    assert offenders == []


def test_support_code_lives_in_the_helpers_package() -> None:
    """Beside the test modules, a folder of the suite holds only its ``__init__.py``; the root
    holds ``conftest.py`` and the package marker."""
    stray = [
        str(p.relative_to(TESTS))
        for p in TESTS.glob("*/*.py")
        if p.parent.name not in {"helpers", "typing"}
        and p.name != "__init__.py"
        and not p.name.startswith("test_")
    ]
    stray += [p.name for p in TESTS.glob("*.py") if p.name not in {"__init__.py", "conftest.py"}]
    assert stray == []
