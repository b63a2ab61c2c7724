"""The terminal filter of model and tool text: controls become visible escapes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.support import TRIO_AGENTS
from trio_agents.cli._controls import visible_controls


def test_osc_52_title_and_clear_screen_are_shown_not_obeyed() -> None:
    """The clipboard write, the title change and the clear screen arrive as plain text."""
    text = "a\x1b]52;c;ZWNobyBwd25lZA==\x07b\x1b]0;owned\x1b\\c\x1b[2J\x1b[H"
    assert visible_controls(text) == (
        "a\\x1b]52;c;ZWNobyBwd25lZA==\\x07b\\x1b]0;owned\\x1b\\c\\x1b[2J\\x1b[H"
    )


def test_newline_and_tab_stay_and_crlf_is_a_newline() -> None:
    """Lines and columns keep their shape; a lone carriage return (overwriting) is shown."""
    assert visible_controls("a\tb\r\nc\n") == "a\tb\nc\n"
    assert visible_controls("safe\rrm -rf /") == "safe\\x0drm -rf /"


def test_c1_controls_and_del_are_escaped_printable_unicode_is_kept() -> None:
    """8-bit CSI (U+009B) and OSC (U+009D), DEL and NUL are escaped; é and 漢 are not."""
    assert visible_controls("\x9b2J\x9d0;t\x9c\x7f\x00é漢") == "\\x9b2J\\x9d0;t\\x9c\\x7f\\x00é漢"


@given(st.text())
def test_the_result_holds_no_control_but_newline_and_tab(text: str) -> None:
    """Whatever the text, no C0/C1 control but newline and tab survives, and escaping twice
    changes nothing."""
    shown = visible_controls(text)
    assert not any((ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in shown)
    assert visible_controls(shown) == shown


def test_run_into_a_pipe_passes_the_text_as_it_is(tmp_path: Path) -> None:
    """stdout a pipe: the answer's bytes are the model's, escapes included."""
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path)}
    result = subprocess.run(
        [str(TRIO_AGENTS), "run", "a\x1b]0;t\x07b", "--store", "memory"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result
    assert result.stdout == "a\x1b]0;t\x07b\n"
