"""Store specs: the one string that names a session store everywhere (``--store``, a config
file's ``store``, ``open_runtime(store=...)``).

Rules (the forms, tried in this order):
- ``memory``: a :class:`MemoryStore`.
- ``sqlite:PATH``: a :class:`SqliteStore` on the database file ``PATH`` (``~`` expanded).
- ``postgresql://...`` (or ``postgres://...``): a ``PostgresStore`` on that DSN, imported only
  then (the driver is an optional dependency).
- anything else: a directory of a :class:`JsonlStore` (``~`` expanded); ``None`` or ``""`` is
  the default directory (see :func:`default_root`).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Literal

import attrs

from .._errors import TrioAgentsError
from ._ids import default_root
from ._jsonl import JsonlStore
from ._memory import MemoryStore
from ._sqlite import SqliteStore
from ._store import SessionStore

__all__ = ["StoreSpec", "StoreSpecError", "parse_store_spec", "store_from_spec"]

Kind = Literal["jsonl", "memory", "sqlite", "postgresql"]

_POSTGRES = ("postgresql://", "postgres://")


class StoreSpecError(TrioAgentsError, ValueError):
    """A store spec cannot be used; the message lists the valid forms."""


_FORMS = "DIR, memory, sqlite:PATH or postgresql://USER@HOST/DB"


@attrs.frozen
class StoreSpec:
    """A parsed store spec.

    Attributes:
        kind: ``"jsonl"``, ``"memory"``, ``"sqlite"`` or ``"postgresql"``.
        target: the directory (JSONL), the database file (SQLite), the DSN (PostgreSQL), or
            ``None`` (memory).
    """

    kind: Kind
    target: Path | str | None

    @property
    def directory(self) -> Path | None:
        """The local directory the store keeps its files in (JSONL: the sessions directory;
        SQLite: the database's directory), or ``None`` (memory, PostgreSQL)."""
        if self.kind == "jsonl":
            assert isinstance(self.target, Path)
            return self.target
        if self.kind == "sqlite":
            assert isinstance(self.target, Path)
            return self.target.parent
        return None

    def make(self, *, read_only: bool = False) -> SessionStore:
        """A new (unapplied) store of this spec.

        Args:
            read_only: only read (JSONL and SQLite: create and write nothing).

        Raises:
            StoreSpecError: a PostgreSQL spec, and the PostgreSQL store is not installed.
        """
        if self.kind == "memory":
            return MemoryStore()
        if self.kind == "sqlite":
            assert isinstance(self.target, Path)
            return SqliteStore(self.target, read_only=read_only)
        if self.kind == "postgresql":
            assert isinstance(self.target, str)
            return _postgres(self.target)
        assert isinstance(self.target, Path)
        return JsonlStore(self.target, read_only=read_only)


def parse_store_spec(spec: str | None) -> StoreSpec:
    """Parse a store spec (see the module rules).

    Raises:
        StoreSpecError: ``sqlite:`` without a path.
    """
    if not spec:
        return StoreSpec("jsonl", default_root())
    if spec == "memory":
        return StoreSpec("memory", None)
    if spec.startswith("sqlite:"):
        path = spec.removeprefix("sqlite:")
        if not path:
            raise StoreSpecError(
                f"store spec {spec!r} names no database file; write sqlite:PATH, e.g. "
                f"sqlite:~/sessions.db (the forms: {_FORMS})"
            )
        return StoreSpec("sqlite", Path(os.path.expanduser(path)))
    if spec.startswith(_POSTGRES):
        return StoreSpec("postgresql", spec)
    return StoreSpec("jsonl", Path(os.path.expanduser(spec)))


def store_from_spec(spec: str | None, *, read_only: bool = False) -> SessionStore:
    """The (unapplied) store that ``spec`` names: ``DIR | memory | sqlite:PATH |
    postgresql://...``.

    Args:
        spec: the spec; ``None`` or ``""``: a :class:`JsonlStore` in the default directory.
        read_only: only read (see :meth:`StoreSpec.make`).

    Raises:
        StoreSpecError: the spec is not valid, or names a backend that is not available.
    """
    return parse_store_spec(spec).make(read_only=read_only)


def _postgres(dsn: str) -> SessionStore:
    # Imported only here: the driver is optional (the module, or its driver, may be absent).
    try:
        module = importlib.import_module("trio_agents.session._postgres")
        store: SessionStore = module.PostgresStore(dsn)
    except ImportError as exc:
        raise StoreSpecError(
            f"PostgreSQL store not available ({exc}); install trio-agents with PostgreSQL "
            f"support, or choose another store ({_FORMS})"
        ) from None
    return store
