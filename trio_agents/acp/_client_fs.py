"""The ACP client's file system: ``fs/read_text_file`` and ``fs/write_text_file``.

Rules:
- A session whose client announced ``fs.readTextFile`` reads through the client (so an
  editor's unsaved buffer is what the agent reads); one that announced ``fs.writeTextFile``
  writes through it (so the edit lands in the editor, which saves it). What the client did not
  announce goes to the local disk.
- A client's error answer is a :class:`~trio_agents.workspace.FileAccessError` with the
  client's message; no answer (the session cancelled or closed, the connection gone) is one too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from ..workspace import FileAccessError, FileSystem
from ._client_calls import ClientCalls
from ._jsonrpc import Response


def offers_fs(capabilities: Mapping[str, Any] | None) -> tuple[bool, bool]:
    """Whether the client announced ``fs.readTextFile`` and ``fs.writeTextFile``."""
    fs = capabilities.get("fs") if capabilities is not None else None
    if not isinstance(fs, Mapping):
        return False, False
    return fs.get("readTextFile") is True, fs.get("writeTextFile") is True


def _result(path: str, what: str, response: Response | None) -> Any:
    if response is None:
        raise FileAccessError(f"{path}: the editor gave no answer to {what} (cancelled)")
    if response.error is not None:
        message = response.error.get("message")
        raise FileAccessError(f"{path}: the editor could not {what}: {message}")
    return response.result


@final
class ClientFileSystem(FileSystem):
    """The files of one ACP session, through its client where the client offers it."""

    name = "acp client"

    def __init__(
        self,
        calls: ClientCalls,
        session_id: str,
        local: FileSystem,
        *,
        read: bool,
        write: bool,
    ) -> None:
        self._calls = calls
        self._session_id = session_id
        self._local = local
        self._read = read
        self._write = write

    async def read_text(self, path: str) -> str:
        if not self._read:
            return await self._local.read_text(path)
        response = await self._calls.call(
            self._session_id, "fs/read_text_file", {"sessionId": self._session_id, "path": path}
        )
        result = _result(path, "read it", response)
        content = result.get("content") if isinstance(result, Mapping) else None
        if not isinstance(content, str):
            raise FileAccessError(f"{path}: the editor answered fs/read_text_file without text")
        return content

    async def write_text(self, path: str, content: str) -> None:
        if not self._write:
            await self._local.write_text(path, content)
            return
        params = {"sessionId": self._session_id, "path": path, "content": content}
        response = await self._calls.call(self._session_id, "fs/write_text_file", params)
        _result(path, "write it", response)
