"""Fixtures shared by the test modules (plain helpers are in ``support.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
