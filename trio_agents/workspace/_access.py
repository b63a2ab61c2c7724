"""The file-access seam: ``FileSystem`` (definition), ``LocalFileSystem`` and the ACP client's
``fs/*`` (providers), ``FileAccess`` (the service ``files``, which picks one per agent).

Rules:
- A :class:`FileSystem` reads and writes whole text files by absolute path; it does not decide
  which paths may be reached (the tools confine paths before they ask it).
- ``FileAccess.for_agent(agent)`` asks its choosers, newest first, and the first that answers
  a file system is the one the agent's call uses; with no answer, the local disk. A chooser is
  an effect of the fiber that added it (the ACP bridge adds one that answers for its sessions
  whose client offers ``fs/*``), so a front end that goes away takes its choice with it.
- Errors a model can act on (missing file, not text, a directory) are :class:`FileAccessError`
  with one line; the tools turn them into error results.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable
from typing import Any, Final, final

import trio

from .._errors import TrioAgentsError
from ..kernel import Context, Entry, ServiceKey, current_context


class FileAccessError(TrioAgentsError, OSError):
    """A file cannot be read or written; the message is one line for the model."""


class FileSystem(abc.ABC):
    """The Service Definition of file access: whole text files by absolute path."""

    #: Who serves the files, for messages (``local disk``, ``acp client``).
    name: str = "file system"

    @abc.abstractmethod
    async def read_text(self, path: str) -> str:
        """The text of the file ``path`` (absolute).

        Raises:
            FileAccessError: it does not exist, is not a file, or is not UTF-8 text.
        """

    @abc.abstractmethod
    async def write_text(self, path: str, content: str) -> None:
        """Make the file ``path`` (absolute) hold ``content``, creating it (and its parent
        directories) if needed.

        Raises:
            FileAccessError: it cannot be written.
        """


def _explain(path: str, exc: OSError) -> FileAccessError:
    if isinstance(exc, FileNotFoundError):
        return FileAccessError(f"{path} does not exist")
    if isinstance(exc, IsADirectoryError):
        return FileAccessError(f"{path} is a directory, not a file")
    return FileAccessError(f"{path}: {exc.strerror or exc}")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except UnicodeDecodeError:
        raise FileAccessError(f"{path} is not a UTF-8 text file") from None
    except OSError as exc:
        raise _explain(path, exc) from None


def _write(path: str, content: str) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(content)
    except OSError as exc:
        raise _explain(path, exc) from None


@final
class LocalFileSystem(FileSystem):
    """This machine's disk (in a worker thread: file IO blocks)."""

    name = "local disk"

    async def read_text(self, path: str) -> str:
        return await trio.to_thread.run_sync(_read, path)

    async def write_text(self, path: str, content: str) -> None:
        await trio.to_thread.run_sync(_write, path, content)


#: ``chooser(agent) -> FileSystem | None``: the file system an agent's calls use, or ``None``
#: to leave the choice to the next chooser.
Chooser = Callable[[Any], "FileSystem | None"]


@final
class FileAccess:
    """The service ``files``: the file system each agent's calls use (see the module rules)."""

    def __init__(self, default: FileSystem | None = None) -> None:
        self.default: FileSystem = default if default is not None else LocalFileSystem()
        self._choosers: list[Chooser] = []

    def add_chooser(self, chooser: Chooser) -> Entry:
        """Ask ``chooser`` first, for as long as the calling fiber is loaded.

        Returns:
            The calling fiber's entry; ``await entry.close()`` removes the chooser early.
        """
        entry = current_context().defer(self._remove, chooser)
        self._choosers.append(chooser)
        return entry

    async def _remove(self, chooser: Chooser) -> None:
        if chooser in self._choosers:
            self._choosers.remove(chooser)
        await trio.lowlevel.checkpoint()

    def for_agent(self, agent: Any) -> FileSystem:
        """The file system the calls of ``agent`` (or of no agent: ``None``) use."""
        for chooser in reversed(self._choosers):
            chosen = chooser(agent)
            if chosen is not None:
                return chosen
        return self.default


#: The key of the file-access service.
FILES: Final[ServiceKey[FileAccess]] = ServiceKey("files")


@final
class LocalFiles:
    """The plugin ``local-files``: provides ``files`` on this machine's disk."""

    name = "local-files"

    async def apply(self, ctx: Context, config: None) -> None:
        """Provide a :class:`FileAccess` whose default is the local disk."""
        ctx.provide(FILES, FileAccess(LocalFileSystem()))
