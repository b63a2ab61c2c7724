"""``McpRestart``: when a server that went away is started again, and when it stays down.

Rules:
- A server that ended after it had started (it exited, crashed, its endpoint went away) is a
  failure. Failure ``n`` (counting from 1) is followed by a restart after
  ``min(max_delay, first_delay * 2 ** (n - 1))`` seconds, until ``max_restarts`` restarts in a
  row have not brought it back for long: the failure after the last restart leaves it down.
- A restart that fails to start counts as a failure like an exit does.
- A connection that stayed up ``reset_after`` seconds was stable: the count starts again.
- The policy is a value; :class:`Backoff` is its one counter, synchronous (no I/O, no clock):
  the connection tells it when a connection came up and ended, with the time, and asks what
  to do.
"""

from __future__ import annotations

import math
from typing import final

import attrs

from ._errors import McpConfigError


def _check_count(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise McpConfigError(f"restart {attribute.name} must be an integer >= 0; got {value!r}")


def _check_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise McpConfigError(f"restart {attribute.name} must be seconds >= 0; got {value!r}")


@final
@attrs.frozen
class McpRestart:
    """How an :class:`McpServer` that went away is brought back.

    Args:
        max_restarts: restarts in a row before the server is left down (its tools removed).
        first_delay: seconds before the first restart; each further one waits twice as long.
        max_delay: the longest wait between two restarts.
        reset_after: seconds a connection must stay up for the count to start again.

    Raises:
        McpConfigError: a field is negative or not a number.
    """

    max_restarts: int = attrs.field(default=5, validator=_check_count)
    first_delay: float = attrs.field(default=0.5, validator=_check_seconds)
    max_delay: float = attrs.field(default=30.0, validator=_check_seconds)
    reset_after: float = attrs.field(default=60.0, validator=_check_seconds)

    def delay(self, failures: int) -> float:
        """The wait before the restart that follows failure number ``failures`` (from 1)."""
        # Capped before the power so a long count cannot overflow a float.
        return min(self.max_delay, self.first_delay * 2.0 ** min(failures - 1, 64))


@final
@attrs.define
class Backoff:
    """The failures in a row of one server under ``policy`` (``None``: never restarted)."""

    policy: McpRestart | None
    #: Failures since the last stable connection.
    failures: int = 0
    _up_since: float | None = None

    def up(self, now: float) -> None:
        """A connection came up at ``now``."""
        self._up_since = now

    def ended(self, now: float) -> float | None:
        """A connection ended (or a start failed) at ``now``: the seconds to wait before the
        next start, or ``None`` when the server stays down."""
        up_since, self._up_since = self._up_since, None
        policy = self.policy
        if policy is None:
            self.failures += 1
            return None
        if up_since is not None and now - up_since >= policy.reset_after:
            self.failures = 0
        self.failures += 1
        if self.failures > policy.max_restarts:
            return None
        return policy.delay(self.failures)
