"""The queue's SQL modules, imported on first use (they need psycopg, the ``postgres`` extra):
the rest of :mod:`trio_agents.workers` imports without it."""

from __future__ import annotations

from types import ModuleType


def queue_modules() -> tuple[ModuleType, ModuleType]:
    """``(_sql, _pg)``; an ``ImportError`` that names the extra when psycopg is missing."""
    try:
        from . import _pg, _sql
    except ImportError as exc:
        raise ImportError(
            "the work queue needs psycopg 3; install the 'postgres' extra: "
            "pip install 'trio-agents[postgres]'"
        ) from exc
    return _sql, _pg
