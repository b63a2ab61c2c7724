"""Project instructions: ``AGENTS.md`` (and ``CLAUDE.md``) files that become part of the
system prompt, as Codex and Claude Code read them.

Rules:
- The files are looked for in the working directory and its parents, up to the repository
  root (the nearest directory, the working directory included, that holds ``.git``); outside
  a repository, up to the filesystem root.
- In one directory, ``AGENTS.md`` comes before ``CLAUDE.md``; directories go from the
  outermost to the working directory, so the closest instructions come last (and win where
  they disagree).
- Each file is read as UTF-8 (undecodable bytes replaced) and kept to its first
  :data:`MAX_BYTES` bytes, with a line saying it was cut; an unreadable file is skipped.
- The text is one section per file, headed with the file's path; no file gives ``None``.
"""

from __future__ import annotations

import os
from typing import Final

#: The file names read, in the order they are read in one directory.
INSTRUCTION_FILES: Final = ("AGENTS.md", "CLAUDE.md")
#: The most bytes of one file that are kept (Codex keeps 32 KiB).
MAX_BYTES: Final = 32 * 1024


def _directories(cwd: str) -> list[str]:
    """``cwd`` and its parents up to the repository root (or the filesystem root), outermost
    first."""
    found = []
    here = os.path.abspath(cwd)
    while True:
        found.append(here)
        parent = os.path.dirname(here)
        if os.path.exists(os.path.join(here, ".git")) or parent == here:
            break
        here = parent
    return found[::-1]


def instruction_files(cwd: str) -> list[str]:
    """The instruction files that apply in ``cwd``, in the order they are read."""
    return [
        path
        for directory in _directories(cwd)
        for name in INSTRUCTION_FILES
        if os.path.isfile(path := os.path.join(directory, name))
    ]


def _section(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    text = data[:MAX_BYTES].decode("utf-8", "replace").strip()
    if len(data) > MAX_BYTES:
        text += f"\n[... the rest of {path} is not included: it is over {MAX_BYTES} bytes]"
    return f"# Project instructions from {path}\n\n{text}" if text else None


def project_instructions(cwd: str, instructions: str | None = None) -> str | None:
    """``instructions`` followed by the project instructions that apply in ``cwd`` (see the
    module rules), or ``instructions`` alone when there are none.

    Blocking (it reads files): call it in a worker thread from async code.
    """
    sections = [s for s in map(_section, instruction_files(cwd)) if s is not None]
    if not sections:
        return instructions
    return "\n\n".join([*([instructions] if instructions else []), *sections])
