"""An in-process ACP bridge and a raw-frame client for it (shared by the ACP test modules).

Imported as ``from tests.helpers.acp_support import ...``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

import trio_agents.agent as ag
from trio_agents.acp import AcpBridge
from trio_agents.acp._framing import LineFramer, Oversized, encode_frame
from trio_agents.kernel import Context
from trio_agents.model import Model
from trio_agents.session import MemoryStore, SessionStore
from trio_agents.shell import LocalShell, tool_bash
from trio_agents.workspace import LocalFiles, PromptCommand, tool_files, tool_plan

CWD = "/tmp"
Message = dict[str, Any]
PermissionPolicy = Callable[[Message], Message]


def allow(option_id: str) -> PermissionPolicy:
    """Answer with this option (the policies give the response's result or error member)."""
    return lambda _: {"result": {"outcome": {"outcome": "selected", "optionId": option_id}}}


def _update_kind(message: Message) -> object:
    params = message.get("params") if message.get("method") == "session/update" else None
    update = params.get("update") if isinstance(params, dict) else None
    return update.get("sessionUpdate") if isinstance(update, dict) else None


class Client:
    """A minimal ACP client speaking raw frames over one end of a stream pair."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._framer = LineFramer()
        self._frames: list[Message] = []
        self._ids = itertools.count(100)
        self.permission: PermissionPolicy = allow("allow-once")
        self.permission_requests: list[Message] = []
        #: How ``fs/*`` requests are answered (the response's result or error member).
        self.fs: PermissionPolicy | None = None
        #: The ``available_commands_update`` notifications received (kept apart from the
        #: other frames: one follows every session/new, load and resume).
        self.commands: list[Message] = []

    async def send(self, *messages: object) -> None:
        await self.stream.send_all(b"".join(encode_frame(m) for m in messages))

    async def close_output(self) -> None:
        """Close only the client's output: the agent reads EOF, its answers still arrive."""
        assert isinstance(self.stream, trio.StapledStream)
        await self.stream.send_stream.aclose()

    def request_frame(self, method: str, params: object) -> tuple[int, Message]:
        request_id = next(self._ids)
        return request_id, {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    async def request(self, method: str, params: object) -> int:
        request_id, message = self.request_frame(method, params)
        await self.send(message)
        return request_id

    async def notify(self, method: str, params: object) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def next(self) -> Message:
        """The next frame from the agent (``EOFError`` at the end of its output), but for the
        ``available_commands_update`` notifications, kept in :attr:`commands`."""
        while not self._frames:
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError
            for frame in self._framer.feed(data):
                assert not isinstance(frame, Oversized)
                message = json.loads(frame)
                if _update_kind(message) == "available_commands_update":
                    self.commands.append(message)
                else:
                    self._frames.append(message)
        return self._frames.pop(0)

    async def until(self, request_id: int) -> tuple[list[Message], Message]:
        """Every notification before the response to ``request_id``, and that response.

        Permission requests on the way are answered with :attr:`permission`, ``fs/*``
        requests with :attr:`fs` (when set).
        """
        seen: list[Message] = []
        while True:
            message = await self.next()
            if message.get("method") == "session/request_permission":
                self.permission_requests.append(message)
                seen.append(message)
                answer = self.permission(message)
                await self.send({"jsonrpc": "2.0", "id": message["id"], **answer})
            elif str(message.get("method")).startswith("fs/") and self.fs is not None:
                seen.append(message)
                await self.send({"jsonrpc": "2.0", "id": message["id"], **self.fs(message)})
            elif "method" in message:
                seen.append(message)
            else:
                assert message["id"] == request_id, f"unexpected response {message}"
                return seen, message

    async def call(self, method: str, params: object) -> Any:
        _, response = await self.until(await self.request(method, params))
        assert "result" in response, response
        return response["result"]

    async def error(self, method: str, params: object) -> Message:
        """The error answer of a request that must fail."""
        _, response = await self.until(await self.request(method, params))
        assert "error" in response, response
        error: Message = response["error"]
        return error

    async def initialize(self) -> Any:
        return await self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    async def new_session(self, cwd: str = CWD) -> str:
        result = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        session_id: str = result["sessionId"]
        return session_id

    async def prompt(self, session_id: str, text: str) -> int:
        return await self.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )


@attrs.define
class Served:
    """A runtime serving one bridge to :attr:`client`."""

    root: Context
    bridge: AcpBridge
    client: Client
    store: SessionStore

    @property
    def agents(self) -> ag.AgentRegistry:
        registry: ag.AgentRegistry = self.root.get("agents")
        return registry


@asynccontextmanager
async def serve_bridge(
    model: Model | str = "echo",
    *,
    allow_bash: bool = False,
    store: SessionStore | None = None,
    tracer_provider: Any = None,
    workspace: bool = False,
    project_files: bool = True,
    compactor: ag.Compactor | None = None,
    commands: tuple[PromptCommand, ...] = (),
    models: tuple[str, ...] = (),
) -> AsyncIterator[Served]:
    """A runtime (the real local shell and ``bash`` tools, with ``workspace`` the file tools
    and the plan too; ``store`` or a new memory store) serving one bridge, traced with
    ``tracer_provider`` if given (and compacting with ``compactor`` if given); ``models``
    are the specs its sessions' ``model`` option offers."""
    store = store if store is not None else MemoryStore()
    async with ag.open_runtime(
        store=store, model=model, tracer_provider=tracer_provider, compactor=compactor
    ) as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        if workspace:
            await root.plugin(LocalFiles())
            await root.plugin(tool_files)
            await root.plugin(tool_plan)
        ours, theirs = trio.testing.memory_stream_pair()
        bridge = AcpBridge(
            ours,
            allow_bash=allow_bash,
            project_files=project_files,
            commands=commands,
            models=models,
        )
        fiber = await root.plugin(bridge)
        yield Served(root, bridge, Client(theirs), store)
        await fiber.dispose()
