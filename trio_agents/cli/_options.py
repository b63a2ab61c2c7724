"""Options shared by every subcommand: ``--model``, ``--store``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..model import Model, model_from_spec
from ..session import JsonlStore, MemoryStore, SessionStore, default_root

__all__ = ["add_common", "make_store", "resolve_model"]


def add_common(parser: argparse.ArgumentParser) -> None:
    """Add the common options (given after the subcommand)."""
    parser.add_argument(
        "--model",
        default="echo",
        metavar="SPEC",
        help="model spec: echo, echo?delay=SECONDS, openai:MODEL (default: echo)",
    )
    parser.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="session directory, or 'memory' (default: $TRIO_AGENTS_HOME/sessions, "
        "else $XDG_STATE_HOME/trio-agents/sessions)",
    )


def make_store(store: str | None) -> SessionStore:
    """The store named by ``--store``."""
    if store == "memory":
        return MemoryStore()
    return JsonlStore(Path(os.path.expanduser(store)) if store else None)


def store_root(store: str | None) -> Path | None:
    """Where sessions are written, or ``None`` for memory."""
    if store == "memory":
        return None
    return Path(os.path.expanduser(store)) if store else default_root()


def resolve_model(spec: str) -> Model:
    """The model named by ``--model`` (raises ModelSpecError with the valid forms)."""
    return model_from_spec(spec)
