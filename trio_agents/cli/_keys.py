"""What the chat's input gives besides lines (a module of its own: a chat from a pipe never
imports the line editor, ``_input.py``, nor ``prompt_toolkit``)."""

from __future__ import annotations

import enum


class Key(enum.Enum):
    """What :meth:`LineEditor.read` returns instead of a line."""

    INTERRUPT = "interrupt"  # Ctrl-C on an empty line
    EOF = "eof"  # Ctrl-D on an empty line
    MODE = "mode"  # Shift-Tab: the next mode (the line being typed is kept)
