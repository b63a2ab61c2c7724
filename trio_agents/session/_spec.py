"""Store specs: the one string that names a session store everywhere (``--store``, a config
file's ``store``, ``open_runtime(store=...)``).

Rules (the forms, tried in this order):
- ``memory``: a :class:`MemoryStore`.
- ``sqlite:PATH``: a :class:`SqliteStore` on the database file ``PATH`` (``~`` expanded).
- ``postgresql://...`` (or ``postgres://...``): a ``PostgresStore`` on that DSN, imported only
  then (the driver is an optional dependency).
- a libpq keyword DSN, ``KEYWORD=VALUE ...`` (``host=db dbname=agents user=me``): a
  ``PostgresStore`` too. A directory whose name starts with ``NAME=`` is written ``./NAME=...``.
- anything else: a directory of a :class:`JsonlStore` (``~`` expanded); ``None`` or ``""`` is
  the default directory (see :func:`default_root`).

Rules (no input silently means something else):
- A spec that would be a JSONL directory, does not exist yet, and is a slip of another form is
  refused with "did you mean": a prefix of ``memory`` or one edit from it (``mem``,
  ``memroy``), a scheme one edit from ``sqlite:`` or ``postgresql:`` (``sqlit:x``,
  ``postgresq://...``), ``postgres:`` without ``//``. An existing directory of that name is
  used as it is, and ``./NAME`` always means a directory.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Literal

import attrs

from .._errors import TrioAgentsError
from ._ids import default_root
from ._jsonl import JsonlStore
from ._memory import MemoryStore
from ._sqlite import SqliteStore
from ._store import SessionStore

Kind = Literal["jsonl", "memory", "sqlite", "postgresql"]

_POSTGRES = ("postgresql://", "postgres://")
# The first word of a libpq keyword DSN: ``host=...``, ``dbname = ...`` (libpq allows blanks).
_KEYWORD_DSN = re.compile(r"\s*[A-Za-z_]+\s*=")
_SCHEMES = ("sqlite", "postgresql", "postgres")


class StoreSpecError(TrioAgentsError, ValueError):
    """A store spec cannot be used; the message lists the valid forms."""


_FORMS = "DIR, memory, sqlite:PATH, postgresql://USER@HOST/DB or 'host=... dbname=...'"


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
        StoreSpecError: ``sqlite:`` without a path, or a slip of another form (see the module
            rules).
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
    if spec.startswith(_POSTGRES) or _KEYWORD_DSN.match(spec):
        return StoreSpec("postgresql", spec)
    directory = Path(os.path.expanduser(spec))
    _check_slip(spec, directory)
    return StoreSpec("jsonl", directory)


def _check_slip(spec: str, path: Path) -> None:
    """Refuse a directory spec that is a slip of another form (see the module rules)."""
    if spec.startswith((".", "/", "~")) or os.path.lexists(path):
        return
    word = spec.lower()
    if (len(word) >= 3 and "memory".startswith(word)) or _one_edit(word, "memory"):
        raise StoreSpecError(
            f"store spec {spec!r} is not an existing directory; did you mean memory? (write "
            f"./{spec} to make a new directory of that name)"
        )
    scheme, colon, rest = spec.partition(":")
    if not colon:
        return
    meant = next((s for s in _SCHEMES if _one_edit(scheme.lower(), s)), scheme.lower())
    if meant == "sqlite" and meant != scheme:
        fixed = f"sqlite:{rest}"
    elif meant in ("postgresql", "postgres") and (meant != scheme or not rest.startswith("//")):
        fixed = f"{meant}://{rest.removeprefix('//')}"
    else:
        return
    raise StoreSpecError(
        f"store spec {spec!r} is not an existing directory; did you mean {fixed!r}? (the "
        f"forms: {_FORMS})"
    )


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` is ``b`` with one letter changed, added, removed, or two neighbours
    swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


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
