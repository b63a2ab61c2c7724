"""The errors of the shell layer."""

from __future__ import annotations

from .._errors import TrioAgentsError


class ShellError(TrioAgentsError):
    """Base of the shell layer's errors."""


class ShellRequestError(ShellError, ValueError):
    """A :class:`ShellExecRequest` cannot be resolved (bad timeout, missing cwd, ...)."""


class JobNotFoundError(ShellError, LookupError):
    """No job with this id was ever started by this executor."""
