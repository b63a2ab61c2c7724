"""The documentation's runnable examples print what the page says they print.

An example is a ``.. code-block:: python`` that ends in ``trio.run(main)`` and is followed,
after a paragraph ending in "prints:", by a ``.. code-block:: text`` with the expected output.
Each runs as a real subprocess in a fresh directory (with the files the page's paragraph names
prepared by ``SETUP``).

A test file is a ``.. code-block:: python`` with ``def test_`` functions, followed the same way
by the last line ``pytest -q`` prints (its timing left out). It runs under pytest in a fresh
directory holding the page's first ``.. code-block:: ini`` as ``pytest.ini``. The README's
example test runs the same way and must pass.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

DOCS = ROOT / "docs"
BLOCK = re.compile(r"^\.\. code-block:: (?P<lang>\w+)\n\n(?P<body>(?:(?:   .*)?\n)+)", re.M)
#: Stands for the page's first python block (the MCP server, or the crashing worker, that the
#: page's example starts).
FIRST_BLOCK = "<the page's first python block>"
#: Stands for the page's second python block (the plugin module beside the first one).
SECOND_BLOCK = "<the page's second python block>"
#: Stands for mcp.rst's first python block (its MCP server), for the pages that start it too.
MCP_SERVER = "<mcp.rst's first python block>"
#: Files an example reads, by page.
SETUP = {
    "tools.rst": {"notes.txt": "one\ntwo\nthree\n"},
    "mcp.rst": {"greet_server.py": FIRST_BLOCK},
    "howto-resume.rst": {"worker.py": FIRST_BLOCK},
    "howto-providers.rst": {"greet_server.py": MCP_SERVER},
    "howto-plugins.rst": {"counter.py": FIRST_BLOCK, "count_tool.py": SECOND_BLOCK},
}


def first_block(page: str) -> str:
    """The first ``.. code-block:: python`` of ``page``, dedented."""
    return first_block_of(page, "python")


def first_block_of(page: str, lang: str) -> str:
    """The first ``.. code-block:: <lang>`` of ``page``, dedented."""
    return nth_block_of(page, lang, 0)


def nth_block_of(page: str, lang: str, index: int) -> str:
    """The ``.. code-block:: <lang>`` of ``page`` at ``index`` (from 0), dedented."""
    blocks = [b["body"] for b in BLOCK.finditer((DOCS / page).read_text()) if b["lang"] == lang]
    if len(blocks) <= index:
        raise AssertionError(f"{page} has no {lang} block number {index + 1}")
    return textwrap.dedent(blocks[index])


def _followed_by_output(text: str) -> list[tuple[str, str]]:
    """Each (python block, text block) pair of ``text`` joined by a paragraph ending "prints:"."""
    found = []
    for code, output in itertools.pairwise(BLOCK.finditer(text)):
        between = text[code.end() : output.start()]
        if (
            code["lang"] == "python"
            and output["lang"] == "text"
            and between.rstrip().endswith("prints:")
        ):
            found.append((textwrap.dedent(code["body"]), textwrap.dedent(output["body"])))
    return found


def example_test_files() -> list[tuple[str, str, str]]:
    """The pages' example test files, with the summary line each is said to end with."""
    return [
        (page.name, code, output)
        for page in sorted(DOCS.glob("*.rst"))
        for code, output in _followed_by_output(page.read_text())
        if re.search(r"^(async )?def test_", code, re.M)
    ]


def examples() -> list[tuple[str, str, str]]:
    found = []
    for page in sorted(DOCS.glob("*.rst")):
        text = page.read_text()
        blocks = list(BLOCK.finditer(text))
        for code, output in itertools.pairwise(blocks):
            between = text[code.end() : output.start()]
            if (
                code["lang"] == "python"
                and output["lang"] == "text"
                and "trio.run(main)" in code["body"]
                and between.rstrip().endswith("prints:")
            ):
                found.append(
                    (page.name, textwrap.dedent(code["body"]), textwrap.dedent(output["body"]))
                )
    return found


def test_the_pages_have_runnable_examples() -> None:
    """The collector finds the examples (an empty list would make the test below vacuous)."""
    assert "tools.rst" in {page for page, _, _ in examples()}


@pytest.mark.parametrize(("page", "code", "expected"), examples())
def test_an_example_prints_what_its_page_says(
    page: str, code: str, expected: str, tmp_path: Path
) -> None:
    for name, content in SETUP.get(page, {}).items():
        source = {FIRST_BLOCK: (page, 0), SECOND_BLOCK: (page, 1), MCP_SERVER: ("mcp.rst", 0)}
        if content in source:
            content = nth_block_of(source[content][0], "python", source[content][1])
        (tmp_path / name).write_text(content)
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected.strip()


README = DOCS.parent / "README.md"
FENCE = re.compile(r"^```python\n(?P<body>.*?)^```$", re.M | re.S)


def _run_test_file(
    code: str, ini: str, where: Path
) -> tuple[str, subprocess.CompletedProcess[str]]:
    """Run ``code`` as a test module under pytest in ``where``; the summary line and the run."""
    (where / "pytest.ini").write_text(ini)
    (where / "test_example.py").write_text(code)
    done = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"),
            # Installed, the plugin loads itself; named, it also loads from a source checkout.
            *("-p", "trio_agents.testing.pytest_plugin", "test_example.py"),
        ],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return re.sub(r" in [0-9.]+s$", "", last), done


def test_the_readme_example_test_passes(tmp_path: Path) -> None:
    """The README's example test (its one python block with a test) passes with the kit."""
    (code,) = [m["body"] for m in FENCE.finditer(README.read_text()) if "def test_" in m["body"]]
    summary, done = _run_test_file(code, "[pytest]\ntrio_mode = true\n", tmp_path)
    assert summary == "1 passed", done.stdout + done.stderr


def test_the_pages_have_example_test_files() -> None:
    """The testing page's test files are found (the test below is not vacuous)."""
    assert "testing.rst" in {page for page, _, _ in example_test_files()}


@pytest.mark.parametrize(("page", "code", "expected"), example_test_files())
def test_an_example_test_file_passes_as_its_page_says(
    page: str, code: str, expected: str, tmp_path: Path
) -> None:
    summary, done = _run_test_file(code, first_block_of(page, "ini"), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary == expected.strip()
