"""The documentation's code fits its column, and what does not fit wraps instead of being cut.

``docs/conf.py`` widens alabaster's page to 1200 px with code at 0.85em, and wires
``docs/_static/wrap.css`` (narrower padding; any longer line wraps at the edge of the column).
There a code line of ``MAX_CODE_LINE`` characters fits unwrapped and one more wraps (measured
in a headless Chromium screenshot of a built page at 88 and 89 characters). Code a
reader types or copies (``python``, ``console``, ``ini``, ``toml``, ``json`` blocks) must fit;
``text`` blocks are what a program prints or writes (an example's exact output, a JSONL file)
and may be longer: they wrap. So may the output lines of a ``console`` block (those that are
neither a ``$`` command, its ``\\`` continuation, nor a ``#`` comment).
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

DOCS = ROOT / "docs"
MAX_CODE_LINE = 88
BLOCK = re.compile(r"^\.\. code-block:: (?P<lang>\w+)\n\n(?P<body>(?:(?:   .*)?\n)+)", re.M)
#: Output, not code: wrapped by the stylesheet rather than held to the width.
OUTPUT_LANGUAGES = {"text"}


def too_long(rst: str) -> list[str]:
    """The lines of ``rst``'s code blocks (outside ``text`` blocks) past ``MAX_CODE_LINE``."""
    found = []
    for block in BLOCK.finditer(rst):
        if block["lang"] in OUTPUT_LANGUAGES:
            continue
        continued = False
        for line in block["body"].splitlines():
            code = line.removeprefix("   ")
            typed = block["lang"] != "console" or continued or code.lstrip()[:1] in ("$", "#")
            continued = code.endswith("\\")
            if typed and len(code) > MAX_CODE_LINE:
                found.append(f"{len(code)}: {code.strip()}")
    return found


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.rst"))


def test_there_are_pages_with_code() -> None:
    """The pages are found and have python blocks (the check below is not vacuous)."""
    assert sum(len(BLOCK.findall(page.read_text())) for page in pages()) > 20


@pytest.mark.parametrize("page", pages(), ids=lambda page: page.name)
def test_code_lines_fit_the_column(page: Path) -> None:
    """No line of a code block a reader copies is wider than the rendered column."""
    long = too_long(page.read_text())
    assert not long, f"{page.name}: shorten to {MAX_CODE_LINE} characters: {long}"


def test_a_long_line_is_reported() -> None:
    """A python line one character too wide is caught; a text block's is not."""
    line = "x = " + "1" * (MAX_CODE_LINE - 4)
    assert too_long(f".. code-block:: python\n\n   {line}\n") == []
    assert too_long(f".. code-block:: python\n\n   {line}1\n") == [f"89: {line}1"]
    assert too_long(f".. code-block:: text\n\n   {line}1\n") == []
    console = f".. code-block:: console\n\n   $ run \\\n   {line}1\n   {line}1\n"
    assert too_long(console) == [f"89: {line}1"]  # the continuation, not the output


def test_the_stylesheet_wraps_code_and_is_wired() -> None:
    """conf.py serves _static/ and links wrap.css, whose ``pre`` rule wraps long lines."""
    conf = runpy.run_path(str(DOCS / "conf.py"))
    assert "_static" in conf["html_static_path"]
    assert "wrap.css" in conf["html_css_files"]
    assert conf["html_theme_options"] == {"page_width": "1200px", "code_font_size": "0.85em"}
    css = (DOCS / "_static" / "wrap.css").read_text()
    rule = re.search(r"(?ms)^pre \{(?P<body>.*?)\}", css)
    assert rule is not None, "wrap.css has no rule for pre"
    assert "white-space: pre-wrap;" in rule["body"]
    assert "padding: 7px 15px;" in rule["body"]
