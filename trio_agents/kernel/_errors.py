"""Errors of the kernel layer. Each says what went wrong and what to do about it."""

from __future__ import annotations

import trio

from .._errors import TrioAgentsError


class PluginError(TrioAgentsError, TypeError):
    """The object given as a plugin does not have the plugin shape."""


class ConfigError(TrioAgentsError, ValueError):
    """A plugin's configuration did not structure into its ``Config`` class.

    ``problems`` lists every problem found, each with where it is.
    """

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class FiberClosedError(TrioAgentsError, trio.ClosedResourceError):
    """Something tried to add an entry to a fiber that is not loading or active."""


class ServiceAccessError(TrioAgentsError, AttributeError):
    """``ctx.<service>`` was used without declaring it, or from a foreign fiber's task."""


class ServiceConflictError(TrioAgentsError, ValueError):
    """A service name is already provided, or collides with a Context attribute."""


class ReloadError(TrioAgentsError, RuntimeError):
    """A reload failed; the previous version of the plugin is running again."""
