"""The ``--max-*`` options of ``run``: a budget for the agent it runs, and the line that says
which budget stopped it.

Rules:
- ``--max-tokens`` (input and output), ``--max-cost`` (US dollars), ``--max-requests``,
  ``--max-tool-calls``, ``--max-turns`` and ``--max-seconds`` make one :class:`Budget`; none
  given means none (the session's own budget, if it has one, stays).
- A negative value is refused as one line before anything runs.
- A turn stopped by a spent budget is said as ``stopped: output_tokens budget 100 spent
  (117)``.
"""

from __future__ import annotations

import argparse

from ..agent import Budget
from ..cancel import BudgetExhausted, CancelCause
from ._options import CliError

#: Each option and the limit of the budget it sets.
_OPTIONS = (
    ("--max-tokens", "tokens", int, "N", "input and output tokens, children's included"),
    ("--max-cost", "cost", float, "USD", "US dollars, by the price table (see [prices])"),
    ("--max-requests", "requests", int, "N", "model requests"),
    ("--max-tool-calls", "tool_calls", int, "N", "tool calls"),
    ("--max-turns", "turns", int, "N", "turns"),
    ("--max-seconds", "seconds", float, "S", "wall-clock seconds since the agent was created"),
)


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``--max-*`` options to ``parser``."""
    group = parser.add_argument_group("budget (the work stops when one is spent)")
    for flag, limit, kind, metavar, what in _OPTIONS:
        group.add_argument(
            flag, dest=f"max_{limit}", type=kind, default=None, metavar=metavar, help=what
        )


def budget_from(args: argparse.Namespace) -> Budget | None:
    """The budget the ``--max-*`` options give, or ``None``.

    Raises:
        CliError: a value is negative (the message names the option).
    """
    limits: dict[str, float] = {}
    for flag, limit, _, _, _ in _OPTIONS:
        value = getattr(args, f"max_{limit}", None)
        if value is None:
            continue
        if value < 0:
            raise CliError(f"{flag} is a limit >= 0; got {value}")
        limits[limit] = value
    return Budget.of(limits) if limits else None


def stopped_line(cause: CancelCause | None) -> str | None:
    """``stopped: output_tokens budget 100 spent (117)`` for a budget's cause, else ``None``."""
    if isinstance(cause, BudgetExhausted):
        return f"stopped: {cause.describe()}"
    return None
