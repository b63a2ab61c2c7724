"""Fixtures shared by the test modules (plain helpers are in ``support.py``)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from pathlib import Path

import pytest

import trio_agents.agent as ag
from tests.helpers.pg_server import (
    INSTALL_HINT,
    PgServer,
    find_bindir,
    fresh_schema_dsn,
    running_server,
)
from tests.helpers.support import ListenerFailures
from trio_agents.kernel import Context
from trio_agents.model import ScriptedModel


@pytest.fixture(autouse=True)
def isolated_process_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Each test finds the process as the previous one found it, whatever the order.

    Put back after every test: the entries of ``sys.modules`` a test replaced or removed (a
    reload puts a fresh module there), minus the modules it imported from its temporary
    directories; ``sys.path``; the environment; the working directory; the level of the
    root logger; the level, handlers and propagation of the ``trio_agents`` logger.
    """
    modules = dict(sys.modules)
    path = list(sys.path)
    environ = dict(os.environ)
    cwd = os.getcwd()
    root_level = logging.getLogger().level
    ours = logging.getLogger("trio_agents")
    our_state = (ours.level, list(ours.handlers), ours.propagate, ours.disabled)
    yield
    temporary = str(tmp_path_factory.getbasetemp())
    for name, module in list(sys.modules.items()):
        if name not in modules and str(getattr(module, "__file__", "")).startswith(temporary):
            del sys.modules[name]
    sys.modules.update((n, m) for n, m in modules.items() if sys.modules.get(n) is not m)
    sys.path[:] = path
    if os.environ != environ:
        os.environ.clear()
        os.environ.update(environ)
    os.chdir(cwd)
    # The root logger's handlers are pytest's own (one set per test phase): only its level.
    logging.getLogger().setLevel(root_level)
    ours.setLevel(our_state[0])
    ours.handlers[:] = our_state[1]
    ours.propagate, ours.disabled = our_state[2:]


@pytest.fixture(autouse=True)
def listener_failures(
    request: pytest.FixtureRequest, isolated_process_state: None
) -> Iterator[ListenerFailures]:
    """Fails the test if a bus listener failed in it (the bus contains the error and emits
    ``ListenerFailed``, so an ``assert`` in a listener would otherwise pass silently), unless the
    test is marked ``@pytest.mark.listener_failures``; such a test can read what was caught.

    Runs inside ``isolated_process_state``, which puts the logger's handlers back after it.
    """
    handler = ListenerFailures()
    logger = logging.getLogger("trio_agents")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    if handler.records and request.node.get_closest_marker("listener_failures") is None:
        pytest.fail(
            f"a bus listener failed during the test ({handler.describe()}); fix it, or mark "
            f"the test @pytest.mark.listener_failures if it expects the failure",
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def stdin_is_empty() -> Iterator[None]:
    """File descriptor 0 is ``/dev/null`` (``run`` reads piped stdin, whatever runs pytest)."""
    saved = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)


@pytest.fixture
async def echo_runtime() -> AsyncIterator[Context]:
    """A runtime whose default model echoes the prompt after 1 s of trio time (in-memory store)."""
    async with ag.open_runtime(model=ScriptedModel.echo(delay=1.0)) as root:
        yield root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty session directory."""
    path = tmp_path / "sessions"
    path.mkdir()
    return path


@pytest.fixture
def stdin_pipe() -> Iterator[int]:
    """File descriptor 0 is the read end of a pipe; yields the write end (closed after)."""
    saved = os.dup(0)
    read, write = os.pipe()
    os.dup2(read, 0)
    os.close(read)
    try:
        yield write
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        with suppress(OSError):  # the test may have closed it already
            os.close(write)  # an abandoned reader thread sees end of input and ends


@pytest.fixture
def cli_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """For the in-process command tests: a private default store, no colours, wide lines, no
    debug logging."""
    monkeypatch.setenv("TRIO_AGENTS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("TRIO_AGENTS_DEBUG", raising=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL server for the whole run (``initdb`` + ``pg_ctl`` into a
    temporary directory, a free loopback port), stopped and removed after.

    Without the server binaries the PostgreSQL tests skip, except in CI (``$CI`` set), where
    they fail: CI must run them (``.ci/run`` installs the package).
    """
    if find_bindir() is None:
        message = f"the PostgreSQL tests need a PostgreSQL server; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    # fsync off: the tests need a working database, not one that survives a power cut.
    with running_server(fsync=False) as server:
        yield server


@pytest.fixture
def pg_dsn(postgres_server: PgServer) -> str:
    """A DSN of the test server whose tables go in a new, empty schema: a fresh database for
    each test, at the cost of one ``CREATE SCHEMA``."""
    return fresh_schema_dsn(postgres_server.dsn)
