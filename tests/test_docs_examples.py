"""The documentation's runnable examples print what the page says they print.

An example is a ``.. code-block:: python`` that ends in ``trio.run(main)`` and is followed,
after a paragraph ending in "prints:", by a ``.. code-block:: text`` with the expected output.
Each runs as a real subprocess in a fresh directory (with the files the page's paragraph names
prepared by ``SETUP``).
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

DOCS = Path(__file__).parent.parent / "docs"
BLOCK = re.compile(r"^\.\. code-block:: (?P<lang>\w+)\n\n(?P<body>(?:(?:   .*)?\n)+)", re.M)
#: Stands for the page's first python block (the MCP server the page's example starts).
FIRST_BLOCK = "<the page's first python block>"
#: Files an example reads, by page.
SETUP = {
    "tools.rst": {"notes.txt": "one\ntwo\nthree\n"},
    "mcp.rst": {"greet_server.py": FIRST_BLOCK},
}


def first_block(page: str) -> str:
    """The first ``.. code-block:: python`` of ``page``, dedented."""
    for block in BLOCK.finditer((DOCS / page).read_text()):
        if block["lang"] == "python":
            return textwrap.dedent(block["body"])
    raise AssertionError(f"{page} has no python block")


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
        (tmp_path / name).write_text(first_block(page) if content == FIRST_BLOCK else content)
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected.strip()
