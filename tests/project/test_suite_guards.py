"""The suite's own guards: a failed bus listener fails the test, and no listener asserts.

The bus contains a listener's exception (it is logged and reported as ``ListenerFailed``), so an
``assert`` inside a listener can never fail a test by itself: the ``listener_failures`` fixture
of conftest.py turns the failure into a test failure, and the scan below refuses such asserts
in the first place (record what the listener saw, assert after).
"""

from __future__ import annotations

import ast
from pathlib import Path

import attrs
import pytest

from tests.helpers.paths import TESTS
from tests.helpers.support import ListenerFailures
from trio_agents.kernel import ListenerFailed, open_root

#: Calls that register a listener, and the position of the listener among their arguments.
REGISTRATIONS = {"on": 1, "on_job_done": 0}


@attrs.frozen
class Ping:
    n: int


@pytest.mark.listener_failures
async def test_a_failing_listener_is_seen_by_the_guard(
    listener_failures: ListenerFailures,
) -> None:
    """The guard sees a listener the bus contained (so a new log wording cannot disable it)."""
    reported: list[ListenerFailed] = []

    def broken(event: Ping) -> None:
        raise RuntimeError("boom")

    async with open_root() as root:
        root.on(ListenerFailed, reported.append)
        root.on(Ping, broken)
        root.emit(Ping(1))
    assert len(reported) == 1
    assert [r.getMessage() for r in listener_failures.records] == [
        f"listener {reported[0].listener} failed on Ping"
    ]


def _functions(tree: ast.AST) -> dict[str, list[ast.AST]]:
    found: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(node.name, []).append(node)
    return found


def _name_of(listener: ast.expr) -> str | None:
    """The function a listener argument names: ``fn``, ``self.fn``, or a factory ``make(...)``."""
    if isinstance(listener, ast.Call):
        listener = listener.func
    if isinstance(listener, ast.Name):
        return listener.id
    if isinstance(listener, ast.Attribute):
        return listener.attr
    return None


def listener_asserts(source: str) -> tuple[int, list[str]]:
    """How many listener registrations ``source`` has, and each assert inside a listener."""
    tree = ast.parse(source)
    functions = _functions(tree)
    count, problems = 0, []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        position = REGISTRATIONS.get(node.func.attr)
        if position is None or len(node.args) <= position:
            continue
        count += 1
        listener = node.args[position]
        bodies: list[ast.AST] = [listener] if isinstance(listener, ast.Lambda) else []
        bodies += functions.get(_name_of(listener) or "", [])
        for body in bodies:
            problems += [
                f"line {a.lineno}: assert in listener registered on line {node.lineno}"
                for a in ast.walk(body)
                if isinstance(a, ast.Assert)
            ]
    return count, problems


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "node_modules" not in p.parts)


def test_the_scan_finds_listener_registrations() -> None:
    """The scan sees the suite's listeners (it is not vacuous)."""
    assert sum(listener_asserts(p.read_text(encoding="utf-8"))[0] for p in _test_files()) > 50


def test_the_scan_finds_an_assert_in_a_listener() -> None:
    """An assert in a named listener, a method listener or a factory's listener is found."""
    source = (
        "def on_status(event):\n    assert event.ok\n"
        "def make(tag):\n    def listener(event):\n        assert tag\n    return listener\n"
        "class Probe:\n    def _on(self, event):\n        assert event\n"
        "root.on(Status, on_status)\nroot.on(Status, make('a'))\n"
        "root.on(Status, self._on)\nshell.on_job_done(on_status)\n"
    )
    assert listener_asserts(source) == (
        4,
        [
            "line 2: assert in listener registered on line 10",
            "line 5: assert in listener registered on line 11",
            "line 9: assert in listener registered on line 12",
            "line 2: assert in listener registered on line 13",
        ],
    )


@pytest.mark.parametrize("path", _test_files(), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_assert_inside_a_bus_listener(path: Path) -> None:
    """A listener records what it saw and the test asserts after: the bus contains a failing
    assert, so one inside a listener cannot fail the test where it stands."""
    _, problems = listener_asserts(path.read_text(encoding="utf-8"))
    assert problems == []
