"""Fixtures shared by the test modules (plain helpers are in ``support.py``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from pathlib import Path

import pytest

import trio_agents.agent as ag
from trio_agents.kernel import Context
from trio_agents.model import ScriptedModel


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
