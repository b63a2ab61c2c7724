"""Helpers of the sandbox tests: whether bubblewrap is here (skip locally, fail in CI)."""

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
