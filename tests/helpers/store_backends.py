"""Every session backend, for the store contract tests (tests/session/test_store.py).

A backend is one entry of :data:`BACKENDS`: its name (the test id) and a function that, given
the test's request and ``tmp_path``, returns a *factory of store objects on one set of data*.
Each call of the factory is a store object the test applies itself (``await
root.plugin(store)``); a second call after the first store closed is the same data opened
again, so a test can check what survives a restart. A backend that needs a server takes it
from a fixture with ``request.getfixturevalue``. Add a backend here and every contract test
runs on it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from trio_agents.session import (
    JsonlStore,
    MemoryStore,
    PostgresStore,
    SessionStore,
    SqliteStore,
)

#: A factory of store objects on one set of data.
Factory = Callable[[], SessionStore]


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    # The data lives in the object: "opening it again" is the same object.
    memory = MemoryStore()
    return lambda: memory


def _jsonl(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    return lambda: JsonlStore(tmp_path / "sessions")


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    return lambda: SqliteStore(tmp_path / "sessions.db")


def _postgresql(request: pytest.FixtureRequest, tmp_path: Path) -> Factory:
    # A fresh schema on the run's throwaway server (conftest's pg_dsn): one set of data.
    dsn: str = request.getfixturevalue("pg_dsn")
    return lambda: PostgresStore(dsn)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Factory]] = {
    "memory": _memory,
    "jsonl": _jsonl,
    "sqlite": _sqlite,
    "postgresql": _postgresql,
}
