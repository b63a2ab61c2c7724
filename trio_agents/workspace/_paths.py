"""Where the file tools may reach: the session's working directory and the configured roots.

Rules:
- A path is taken relative to the agent's working directory (the process's own for an agent
  without one), then resolved (symlinks and ``..``, :func:`os.path.realpath`) before the
  check, so neither a link nor ``..`` leads out.
- It is allowed when the resolved path is one of the roots or inside one; the roots are the
  working directory and the configured extra directories, resolved the same way. Unconfined
  (``roots=None``), every path is allowed.
- A path holding a NUL character is refused (no file system takes one).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ._access import FileAccessError


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_path(raw: str, cwd: str, roots: Sequence[str] | None) -> str:
    """The absolute, resolved path ``raw`` names, from ``cwd``.

    Args:
        raw: the path the model gave (absolute, or relative to ``cwd``).
        cwd: the agent's working directory (absolute).
        roots: besides ``cwd``, the directories the path may be in; ``None``: anywhere.

    Raises:
        FileAccessError: the path is empty, holds a NUL, or is outside every root.
    """
    if not raw or "\0" in raw:
        raise FileAccessError(f"{raw!r} is not a usable path")
    path = os.path.realpath(os.path.join(cwd, os.path.expanduser(raw)))
    if roots is None:
        return path
    allowed = [os.path.realpath(cwd), *(os.path.realpath(os.path.join(cwd, r)) for r in roots)]
    if not any(_inside(path, root) for root in allowed):
        raise FileAccessError(
            f"{raw} is outside the directories the file tools may reach "
            f"({', '.join(allowed)}); use a path inside them"
        )
    return path
