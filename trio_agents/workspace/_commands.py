"""Prompt commands: ``/name arguments`` at the start of a prompt, as Claude Code reads them.

Rules:
- A project's prompt commands are the ``*.md`` files of ``.trio-agents/commands`` in the
  working directory: the name is the file's stem, the description its first non-blank line
  (a leading ``#`` heading mark dropped), and the whole file is the prompt, with every
  ``$ARGUMENTS`` replaced by what follows the name (stripped).
- A name is letters, digits, ``_``, ``-``, ``.`` and ``:``; a file whose stem is not one, or
  that cannot be read, is skipped (with a debug log); files are read as UTF-8 (undecodable
  bytes replaced), in name order.
- A prompt invokes a command when it starts with ``/`` and a name that ends the text or is
  followed by white space: ``/tmp/x is a path`` invokes nothing.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Final

import attrs

log = logging.getLogger("trio_agents.workspace")

#: Where a project's prompt commands live, relative to its working directory.
COMMANDS_DIR: Final = os.path.join(".trio-agents", "commands")
#: The placeholder a prompt command's text holds for its arguments.
ARGUMENTS: Final = "$ARGUMENTS"
# The longest description kept (a client shows it on one line).
_DESCRIPTION_CHARS: Final = 200
_NAME: Final = re.compile(r"[A-Za-z0-9_.:-]+")
# Invariant: anchored at the start and no copy of the text, so that a long prompt that is no
# command costs one failed match at its first characters.
_CALL: Final = re.compile(r"\s*/([A-Za-z0-9_.:-]+)(?=\s|\Z)")


@attrs.frozen
class PromptCommand:
    """A prompt command: ``/name arguments`` becomes :attr:`text` with the arguments in it.

    Attributes:
        name: what follows the ``/``.
        description: one line for a menu.
        text: the prompt, holding :data:`ARGUMENTS` where the arguments go.
    """

    name: str
    description: str
    text: str

    def expand(self, arguments: str) -> str:
        """The prompt this command sends with ``arguments``."""
        return self.text.replace(ARGUMENTS, arguments)


@attrs.frozen
class CommandCall:
    """A prompt that invokes a command: its name and its arguments (stripped, maybe empty)."""

    name: str
    arguments: str


def parse_command(text: str) -> CommandCall | None:
    """The command ``text`` invokes, or ``None`` (see the module rules)."""
    if text[:1] != "/" and not text[:1].isspace():
        return None  # the common case, without the regex
    match = _CALL.match(text)
    if match is None:
        return None
    return CommandCall(match[1], text[match.end() :].strip())


def _description(text: str, name: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line[:_DESCRIPTION_CHARS]
    return f"the prompt in {COMMANDS_DIR}/{name}.md"


def prompt_commands(cwd: str) -> tuple[PromptCommand, ...]:
    """The prompt commands of the project in ``cwd``, by name (blocking: run it in a thread)."""
    directory = os.path.join(cwd, COMMANDS_DIR)
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return ()
    found = []
    for file_name in names:
        stem, ext = os.path.splitext(file_name)
        if ext != ".md":
            continue
        path = os.path.join(directory, file_name)
        if _NAME.fullmatch(stem) is None:
            log.debug("prompt command file %s skipped: its name is not a command name", path)
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                text = file.read()
        except OSError as exc:
            log.debug("prompt command file %s skipped: %s", path, exc)
            continue
        found.append(PromptCommand(stem, _description(text, stem), text))
    return tuple(found)
