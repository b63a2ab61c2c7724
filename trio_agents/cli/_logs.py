"""The command's view of the package's log: one line per problem, no tracebacks.

Rules:
- Warnings and errors of the ``trio_agents`` logger are held until :meth:`CliLog.publish`,
  which prints each as one line and drops those about the error the command reports itself
  (a failed plugin is logged *and* raised; the user should read about it once).
- Between :meth:`CliLog.go_live` and the next publish, lines are printed as they come
  (``chat`` does this while the conversation runs); the errors they were about are
  remembered (:meth:`CliLog.shown`), so the command does not print them again at exit.
- ``TRIO_AGENTS_DEBUG=1`` keeps Python's own logging, tracebacks included.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import final


def _chain(exc: BaseException | None) -> list[BaseException]:
    found: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or any(current is f for f in found):
            continue
        found.append(current)
        todo.extend((current.__cause__, current.__context__))
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
    return found


@final
class CliLog(logging.Handler):
    """A handler on the ``trio_agents`` logger, installed for one command."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._held: list[logging.LogRecord] = []
        self._shown: list[BaseException] = []
        self._live = False
        self._logger = logging.getLogger("trio_agents")
        self._propagate = self._logger.propagate

    def install(self) -> CliLog:
        """Attach to the logger (unless ``TRIO_AGENTS_DEBUG`` is set)."""
        if os.environ.get("TRIO_AGENTS_DEBUG"):
            logging.basicConfig(level=logging.INFO)
            return self
        self._logger.addHandler(self)
        self._logger.propagate = False
        return self

    def uninstall(self) -> None:
        """Detach again."""
        if self in self._logger.handlers:
            self._logger.removeHandler(self)
            self._logger.propagate = self._propagate

    def emit(self, record: logging.LogRecord) -> None:
        if self._live:
            _write(record)
            if record.exc_info and record.exc_info[1] is not None:
                self._shown.append(record.exc_info[1])
        else:
            self._held.append(record)

    def shown(self, exc: BaseException) -> bool:
        """Whether a line about ``exc`` was printed live already."""
        return any(exc is e for e in self._shown)

    def go_live(self) -> None:
        """Print what is held, and every later line as it comes."""
        self.publish()
        self._live = True

    def hold(self) -> None:
        """Hold lines again (until :meth:`publish`)."""
        self._live = False

    def publish(self, reported: BaseException | None = None) -> None:
        """Print the held lines, except those about ``reported`` (or its causes)."""
        known = _chain(reported)
        held, self._held = self._held, []
        for record in held:
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None and any(exc is k for k in known):
                continue
            _write(record)


def _write(record: logging.LogRecord) -> None:
    message = record.getMessage()
    exc = record.exc_info[1] if record.exc_info else None
    if exc is not None:
        message += f": {type(exc).__name__}: {exc}" if str(exc) else f": {type(exc).__name__}"
    level = "error" if record.levelno >= logging.ERROR else "warning"
    print(f"trio-agents: {level}: {message}", file=sys.stderr, flush=True)
