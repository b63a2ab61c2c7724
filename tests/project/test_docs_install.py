"""Every ``pip install`` line in the docs and the README works from a checkout: trio-agents
is not on PyPI, so it is installed as ``.`` (with extras that pyproject declares), and every
other package named is one the project's own dependency groups install. No network."""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.paths import ROOT

ROOT = ROOT
PAGES = [*sorted((ROOT / "docs").glob("*.rst")), ROOT / "README.md"]
# What follows "pip install" up to the end of the command: the end of the line, the end of
# inline code, a comment, or the next command of a shell line.
_LINE = re.compile(r"pip install\s+(.+?)(?=``|`|\s#|&&|;|\||\)|$)", re.MULTILINE)
_CHECKOUT = re.compile(r"\.(?:\[([A-Za-z0-9_,-]+)\])?")


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def install_lines() -> list[tuple[str, str]]:
    """Each install command in the pages, with where it is (``page:line``)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _LINE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.name}:{line}", match.group(1).strip()))
    return found


def problems_of(command: str, extras: set[str], groups: dict[str, list[str]]) -> list[str]:
    """What would not work from a checkout in the arguments ``command`` of one pip install."""
    # A group's entries are requirement strings or {include-group = ...} tables.
    known = {
        canonicalize_name(Requirement(r).name)
        for rs in groups.values()
        for r in rs
        if isinstance(r, str)
    }
    problems = []
    words = iter(shlex.split(command))
    for word in words:
        if word in ("-e", "--editable", "-U", "--upgrade"):
            continue
        if word == "--group":
            group = next(words, "")
            if group not in groups:
                problems.append(f"no dependency group {group!r} in pyproject.toml")
            continue
        checkout = _CHECKOUT.fullmatch(word)
        if checkout is not None:
            missing = set((checkout.group(1) or "").split(",")) - extras - {""}
            problems.extend(f"no extra {extra!r} in pyproject.toml" for extra in sorted(missing))
            continue
        name = canonicalize_name(Requirement(word).name)
        if name == "trio-agents":
            problems.append(f"{word!r} is not on PyPI; install the checkout: pip install -e .")
        elif name not in known:
            problems.append(f"{word!r} is not a package of the project's dependency groups")
    return problems


def test_the_collector_finds_the_install_lines() -> None:
    """The lines of the tutorial, the testing and MCP pages and the README are all found."""
    where = {place.split(":")[0] for place, _ in install_lines()}
    assert {"tutorial.rst", "testing.rst", "mcp.rst", "README.md"} <= where


@pytest.mark.parametrize(("place", "command"), install_lines())
def test_every_install_line_works_from_a_checkout(place: str, command: str) -> None:
    """The line installs the checkout (with declared extras) and known packages only."""
    project = _pyproject()
    extras = set(project["project"]["optional-dependencies"])  # type: ignore[index]
    groups = project["dependency-groups"]
    assert isinstance(groups, dict)
    assert problems_of(command, extras, groups) == [], place


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        ("trio-agents", r"^'trio-agents' is not on PyPI; install the checkout: pip install -e \.$"),
        ("'trio-agents[mcp]'", r"^'trio-agents\[mcp\]' is not on PyPI"),
        ("-e '.[mcp,nope]'", r"^no extra 'nope' in pyproject\.toml$"),
        ("-e . --group nope", r"^no dependency group 'nope' in pyproject\.toml$"),
        ("left-pad", r"^'left-pad' is not a package of the project's dependency groups$"),
    ],
)
def test_a_line_that_would_fail_is_caught(command: str, problem: str) -> None:
    """The check refuses the package name, an unknown extra or group, an unknown package."""
    project = _pyproject()
    extras = set(project["project"]["optional-dependencies"])  # type: ignore[index]
    groups = project["dependency-groups"]
    assert isinstance(groups, dict)
    [found] = problems_of(command, extras, groups)
    assert re.match(problem, found)
