"""How much random work a stress-style test does: small in ``nox -s tests``, large in
``nox -s stress``.

The same test functions run in both sessions, so the stress suite cannot rot unseen: the
tests session runs every one of them with a small budget on every commit, and ``nox -s
stress`` (``TRIO_AGENTS_STRESS=1``) runs them again with the large one. Hypothesis example
counts and wall-clock bounds both come from here.
"""

from __future__ import annotations

import os

STRESS = os.environ.get("TRIO_AGENTS_STRESS", "") not in ("", "0")


def examples(small: int, large: int) -> int:
    """A hypothesis ``max_examples`` for this session."""
    return large if STRESS else small


def seconds(small: float, large: float) -> float:
    """A wall-clock bound (for loops that run until it passes) for this session."""
    return large if STRESS else small


def count(small: int, large: int) -> int:
    """An iteration count (kill loops, agents in a soak) for this session."""
    return large if STRESS else small
