"""Text from a model or a tool, made safe for a terminal.

Rules:
- A terminal obeys the control characters in what it is sent: ``ESC ] 52`` writes the
  clipboard, ``ESC ] 0`` sets the title, ``ESC [ 2 J`` clears the screen, ``CSI``/``OSC`` in
  their 8-bit forms do the same. Text a model or a tool produced is not the model's to control
  the user's terminal with, so before it reaches a terminal every C0 control (``U+0000`` to
  ``U+001F``) other than newline and tab, ``DEL`` and every C1 control (``U+0080`` to
  ``U+009F``) is shown as a visible escape, ``\\x1b``; ``\\r\\n`` counts as a newline.
- The result holds no control character but newline and tab, so escaping twice changes
  nothing more. Text going to a pipe or a file is left as it is (the callers decide: only
  when the stream is a terminal).
"""

from __future__ import annotations

import re
from typing import Final

_CONTROLS: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(found: re.Match[str]) -> str:
    return f"\\x{ord(found[0]):02x}"


def visible_controls(text: str) -> str:
    """``text`` with its control characters, but newline and tab, as visible escapes."""
    return _CONTROLS.sub(_escape, text.replace("\r\n", "\n"))
