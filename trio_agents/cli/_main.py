"""Entry point of the ``trio-agents`` command."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status."""
    print("trio-agents: not yet", file=sys.stderr)
    return 2
