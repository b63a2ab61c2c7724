"""What the in-process tests of the ``trio-agents`` command share: a call of ``main`` that
returns what it printed, and a stand-in model (their private environment is the
``cli_environment`` fixture in ``conftest.py``)."""

from __future__ import annotations

import pytest

from trio_agents.cli import _options, main
from trio_agents.model import Model


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``main(args)``: the exit status, and what it wrote to stdout and stderr."""
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def use_model(monkeypatch: pytest.MonkeyPatch, model: Model) -> None:
    """Every model spec the command resolves gives ``model``."""
    monkeypatch.setattr(_options, "resolve_model", lambda spec: model)
