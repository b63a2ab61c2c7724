"""Helpers of the sandbox tests: whether bubblewrap is here (skip locally, fail in CI), and a
command that starts many tagged processes."""

from __future__ import annotations

import os
import shutil

import pytest

INSTALL_HINT = "install bubblewrap (apt-get install bubblewrap); .ci/run does it in CI"


def require_bwrap() -> None:
    """Skip the calling test when ``bwrap`` is missing, except in CI (``$CI`` set), where the
    test fails: CI must run the sandbox's tests (``.ci/run`` installs bubblewrap)."""
    if shutil.which("bwrap") is None:
        message = f"the sandbox tests need bubblewrap; {INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def bomb(tag: str) -> str:
    """Twenty background children, a ``setsid`` escape and an orphan (22 processes whose
    command lines hold ``tag``), then ``echo ready``."""
    child = f"sh -c 'sleep 1000; : {tag}'"
    return f"for i in $(seq 20); do {child} & done; setsid {child} & ({child} &); echo ready"
