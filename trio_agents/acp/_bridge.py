"""The ACP bridge: the plugin that serves agents over one JSON-RPC connection.

The bridge owns the lifecycle and the sessions' handles; :mod:`._serving` moves the frames,
:mod:`._prompts` keeps each session's prompt and streams its updates, :mod:`._permission`
is the approver of its sessions' agents (it asks the client before a call that needs approval,
``write_file`` and ``edit_file``, and ``bash`` and ``bash_kill`` unless ``allow_bash``),
:mod:`._client_calls` holds every request the bridge sends the client, and
:mod:`._client_fs` is the file system of a session whose client offers ``fs/*``, and
:mod:`._terminal` runs its foreground ``bash`` commands when the client offers ``terminal``
(the bridge adds a chooser to the service ``shell_routes``, an effect of its fiber).

Rules (the workspace): when the runtime has the service ``files``, the bridge adds a chooser
(an effect of its fiber) that gives the agents of its sessions, and their children, their
session's :class:`~._client_fs.ClientFileSystem` when the client announced ``fs/*``; a
session ``session/new`` creates gets the project instructions of its ``cwd`` as its system
prompt unless ``project_files=False`` (a loaded or resumed one keeps its own).

Rules (commands): a session's commands are :data:`BUILTIN_COMMANDS`, then the bridge's own
``commands``, then the prompt files of its ``cwd`` (read when it is opened; a later one of the
same name replaces an earlier one, but none replaces a built-in). They are announced in one
``available_commands_update`` queued right after the answer to ``session/new``,
``session/load`` or ``session/resume`` (the client knows the session by then). A prompt that
starts with ``/name`` (:func:`~trio_agents.workspace.parse_command`): ``/compact`` holds the
prompt while ``agent.compact()`` runs in the host fiber, then answers it (``cancelled`` after
a ``session/cancel``, which aborts the compaction); a prompt command is queued as its expanded
text; an unknown name is answered ``end_turn`` with one line naming the commands, the model
never seeing it.

Rules (modes and config options, :mod:`._modes`): a session's answer to ``session/new``,
``session/load`` and ``session/resume`` offers its agent's modes and the ``mode`` and
``model`` config options; ``session/set_mode`` and ``session/set_config_option`` switch the
running agent (recorded in its session) and are announced with ``current_mode_update`` and
``config_option_update`` after the answer.

Rules (ownership):
- The bridge is a plugin. Its agents are created from the tasks of a child fiber (the *host*),
  so that fiber co-owns them, and each ACP session's record holds its handle's disposer.
- Client EOF (or a broken output), :meth:`AcpBridge.aclose` and the plugin's teardown reach
  one memoized shutdown: stop reading, cancel the request handlers, dispose every session the
  bridge owns concurrently, close the streams. The shutdown entry is pushed last, so on a
  teardown it runs before the host fiber's own entries.
- ``session/new`` and ``session/load`` refuse a ``cwd`` that is not absolute, holds a NUL or
  is not an existing directory (invalid params, with the reason) before anything is made.
- ``session/new``, ``session/load`` and ``session/resume`` create under a shield; one that
  finishes after the close began disposes its unpublished handle instead of publishing it.
- ``session/close`` disposes one session as the shutdown does (its pending prompt answers
  ``cancelled``); ``session/delete`` removes a stored session that is live nowhere (the
  store refuses one live in this process or another).

Rules (failure): no frame can end serving (see :mod:`._serving`). Should serving itself fail
(a bug), the answers already queued still leave, every session is disposed as at EOF, the
failure is logged as one error line and kept in :attr:`AcpBridge.failure`; it is not raised
into the plugin's fiber (``trio-agents acp`` exits 1 on it).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import stat
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, final

import attrs
import trio

from ..agent import (
    AGENTS,
    TOOLS,
    Agent,
    AgentClosedError,
    AgentDisposed,
    AgentHandle,
    AgentIdInUseError,
    AgentOutput,
    AgentThought,
    CompactionError,
    TaskEnded,
    TaskStarted,
    ToolContext,
    ToolRegistry,
    ToolResult,
)
from ..cancel import UserCancel
from ..kernel import Context
from ..mcp import McpServer
from ..session import (
    SESSIONS,
    InvalidSessionIdError,
    SessionAppended,
    SessionFormatError,
    SessionInUseError,
    SessionNotFoundError,
    SessionTree,
)
from ..shell import SHELL_ROUTES, Terminal
from ..workspace import (
    ARGUMENTS,
    FILES,
    FileAccess,
    FileChanged,
    FileSystem,
    PromptCommand,
    parse_command,
    project_instructions,
    prompt_commands,
)
from ._client_calls import ClientCalls
from ._client_fs import ClientFileSystem, offers_fs
from ._framing import MAX_FRAME
from ._jsonrpc import ErrorCode, Request, Response, RpcError
from ._mcp import parse_mcp_servers, start_mcp_servers
from ._modes import SessionSettings
from ._permission import Permissions, restored_notice
from ._prompts import AcpSession, Prompt, Sessions
from ._protocol import (
    PROTOCOL_VERSION,
    absolute_cwd,
    agent_capabilities,
    available_commands_update,
    optional_str,
    params_object,
    required_str,
    session_info,
    text_chunk,
)
from ._serving import LATER, Serving
from ._terminal import ClientTerminal, offers_terminal

log = logging.getLogger("trio_agents.acp")

# After the client's EOF, how long the answers already produced may take to leave.
_DRAIN_SECONDS: Final = 1.0
#: The default bound of the frames queued for a client that does not read: 64 MiB.
MAX_UNSENT: Final = 64 * 1024 * 1024
#: How long a client may read nothing while more than ``max_unsent`` bytes wait for it.
_STALL_SECONDS: Final = 10.0
#: The commands every session understands, before its prompt commands: (name, description).
BUILTIN_COMMANDS: Final = (
    ("compact", "summarize the older turns now (the session file keeps them)"),
)


@attrs.frozen
class BridgeStatistics:
    """A snapshot of a bridge.

    Attributes:
        sessions: the ids of the ACP sessions it owns, oldest first.
        prompts: how many ``session/prompt`` requests await their answer.
        permission_requests: how many ``session/request_permission`` await the client.
        closed: whether the shutdown has begun.
        unsent_bytes: frames queued for the client and not yet written.
    """

    sessions: tuple[str, ...]
    prompts: int
    permission_requests: int
    closed: bool
    unsent_bytes: int = 0


def _version() -> str:
    try:
        return importlib.metadata.version("trio-agents")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - not installed
        return "0"


@final
class AcpBridge:
    """The plugin ``acp``: serve one ACP connection (protocol version 1).

    Args:
        send_stream: where frames are written (the client's input).
        receive_stream: where frames are read (the client's output); ``None`` means
            ``send_stream`` is a bidirectional :class:`trio.abc.Stream`.
        allow_bash: run ``bash`` and ``bash_kill`` without asking the client for permission.
        project_files: give a new session's agent the project instructions of its ``cwd``
            (``AGENTS.md``, ``CLAUDE.md``: :func:`~trio_agents.workspace.project_instructions`).
        forget_approvals: ignore the standing ``allow_always`` answers stored in a loaded
            session (they are asked again); a session file is trusted input otherwise.
        max_frame: the largest incoming frame, in bytes.
        max_unsent: bytes of frames queued for the client past which, when the client has
            read nothing for 10 seconds, the connection is closed (with a warning) as if the
            client had gone.
        commands: prompt commands every session offers (``/name``), besides ``/compact`` and
            the ``.trio-agents/commands/*.md`` files of its ``cwd`` (which win on a name).
        models: the model specs a session's ``model`` config option offers, besides its
            agent's own (see :mod:`._modes`).

    Apply it with ``await ctx.plugin(bridge)``; it serves until the client closes its side
    (then :meth:`wait_closed` returns) or until its fiber is disposed.
    """

    name = "acp"
    inject = (AGENTS, SESSIONS, TOOLS)

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream | None = None,
        *,
        allow_bash: bool = False,
        forget_approvals: bool = False,
        project_files: bool = True,
        max_frame: int = MAX_FRAME,
        max_unsent: int = MAX_UNSENT,
        commands: Iterable[PromptCommand] = (),
        models: Iterable[str] = (),
    ) -> None:
        if receive_stream is None:
            if not isinstance(send_stream, trio.abc.ReceiveStream):
                raise TypeError(
                    "AcpBridge needs a receive stream: pass (send_stream, receive_stream), "
                    "or one bidirectional trio.abc.Stream"
                )
            receive_stream = send_stream
        self.allow_bash = allow_bash
        self.project_files = project_files
        self.commands = tuple(commands)
        self._serving = Serving(
            send_stream,
            receive_stream,
            max_frame=max_frame,
            max_unsent=max_unsent,
            stall_seconds=_STALL_SECONDS,
            sync={
                "initialize": self._initialize,
                "authenticate": self._authenticate,
                "logout": self._logout,
                "session/prompt": self._prompt,
                "session/set_mode": self._set_mode,
                "session/set_config_option": self._set_config_option,
            },
            concurrent={
                "session/new": self._new,
                "session/load": self._load,
                "session/resume": self._resume,
                "session/list": self._list,
                "session/close": self._close_session,
                "session/delete": self._delete,
            },
            notifications={
                "session/cancel": self._cancel,
                "$/cancel_request": self._cancel_request,
            },
            on_response=self._on_response,
            initialized=lambda: self._client_capabilities is not None,
        )
        self._sessions = Sessions(self._serving)
        self._settings = SessionSettings(models)
        self._calls = ClientCalls(self._serving, lambda: self._closed)
        self._permissions = Permissions(
            self._calls,
            self._sessions,
            allow_bash=allow_bash,
            forget_stored=forget_approvals,
            on_allowed=lambda session, request: self._sessions.started(
                session.agent.id, request.call_id
            ),
            old_text=self._old_text,
        )
        self._files: FileAccess | None = None
        self._tools: ToolRegistry | None = None
        self._ctx: Context | None = None
        self._host: Context | None = None
        self._client_capabilities: Mapping[str, Any] | None = None
        self._closed = False
        self._scope = trio.CancelScope()
        self._started = False
        self._done = trio.Event()
        self._failure: Exception | None = None

    # -- the plugin -------------------------------------------------------------------------

    async def apply(self, ctx: Context, config: None) -> None:
        """Start serving in ``ctx``'s fiber (see the module rules for what it owns)."""
        if self._started:
            raise RuntimeError("this AcpBridge already served its connection; make a new one")
        self._started = True
        self._ctx = ctx
        # The child fiber whose tasks serve the connection (and so co-own its agents).
        host = self._host = await ctx.child("acp-sessions")
        ctx.on(AgentOutput, self._sessions.on_output)
        ctx.on(AgentThought, self._sessions.on_thought)
        ctx.on(TaskStarted, self._sessions.on_task_started)
        ctx.on(TaskEnded, self._sessions.on_task_ended)
        ctx.on(SessionAppended, self._sessions.on_appended)
        ctx.on(AgentDisposed, self._sessions.on_disposed)
        ctx.on(FileChanged, self._sessions.on_file_changed)
        # The guard runs in the agents' tasks: it keeps the registry (no strict lookup there).
        tools = self._tools = ctx.service(TOOLS)
        tools.add_guard(self._starting)
        self._files = ctx.get(FILES)
        if self._files is not None:
            self._files.add_chooser(self._file_system)
        routes = ctx.get(SHELL_ROUTES)
        if routes is not None:
            routes.add_chooser(self._terminal)
        # Invariant: pushed last, so a teardown shuts the connection down first.
        ctx.defer(self.aclose)
        host.start_soon(self._serve, name="acp serve")

    async def aclose(self) -> None:
        """Shut the connection down (memoized): dispose every session, close the streams."""
        self._close()
        if self._started:
            await self._done.wait()
        else:
            await trio.lowlevel.checkpoint()

    async def wait_closed(self) -> None:
        """Wait until the connection is shut down and every session is disposed."""
        await self._done.wait()

    @property
    def failure(self) -> Exception | None:
        """What made serving fail (a bug, see the module rules), or ``None``."""
        return self._failure

    @property
    def client_capabilities(self) -> Mapping[str, Any] | None:
        """What the client announced in ``initialize`` (``None`` before it)."""
        return self._client_capabilities

    def statistics(self) -> BridgeStatistics:
        """A frozen snapshot of this bridge."""
        return BridgeStatistics(
            sessions=self._sessions.ids(),
            prompts=self._sessions.prompts(),
            permission_requests=len(self._permissions),
            closed=self._closed,
            unsent_bytes=self._serving.unsent,
        )

    async def _starting(
        self, name: str, arguments: Mapping[str, Any], call: ToolContext
    ) -> ToolResult | None:
        """A guard that sees each call about to run: one that needs no approval is
        ``in_progress`` now (one that does, once allowed: see ``Permissions``)."""
        await trio.lowlevel.checkpoint()
        agent, tools = call.agent, self._tools
        if agent is not None and tools is not None and not tools.needs_approval(name, agent=agent):
            self._sessions.started(agent.id, call.call_id)
        return None

    async def _old_text(self, session: AcpSession, path: str) -> str | None:
        """The text of ``path`` as the session's agent would read it (through the client when
        it offers fs), or ``None`` when there is none (a new file) or it cannot be read."""
        files = self._files
        if files is None:
            return None
        try:
            return await files.for_agent(session.agent).read_text(path)
        except (OSError, RpcError):  # FileAccessError is an OSError: a new file, most often
            return None

    def _file_system(self, agent: Any) -> FileSystem | None:
        """The file system of an agent of this bridge's sessions (a child agent: its
        ancestor's session's), when the client offers ``fs/*``."""
        while agent is not None:
            session = self._sessions.get(getattr(agent, "id", None))
            if session is not None:
                return session.files
            agent = getattr(agent, "parent", None)
        return None

    def _terminal(self, agent: Any) -> Terminal | None:
        """The client's terminals, for the agent of a session whose client offers them (its
        calls are the ones the session shows; a child agent's commands run locally)."""
        session = self._sessions.get(getattr(agent, "id", None))
        return session.terminal if session is not None and session.agent is agent else None

    # -- the lifecycle ------------------------------------------------------------------------

    def _close(self) -> None:
        self._closed = True
        self._scope.cancel()

    def _eof(self) -> None:
        self._closed = True

    async def _serve(self) -> None:
        try:
            with self._scope:
                await self._serving.serve(
                    on_eof=self._eof,
                    on_broken=self._close,
                    after_eof=self._dispose_sessions,
                    drain_seconds=_DRAIN_SECONDS,
                )
        except Exception as exc:
            self._failure = _leaf(exc)
            log.error("the ACP server failed; every session was closed", exc_info=self._failure)
        finally:
            self._closed = True
            with trio.CancelScope(shield=True):
                await self._dispose_sessions()
                await self._serving.aclose()
                log.debug("acp connection closed")
            self._done.set()

    async def _dispose_sessions(self) -> None:
        self._calls.release_all()
        async with trio.open_nursery() as nursery:
            for session in self._sessions:
                nursery.start_soon(self._dispose, session)

    async def _dispose(self, session: AcpSession) -> None:
        try:
            await session.dispose()
        except Exception:
            # Its AgentDisposed (which forgets the session) is emitted all the same: a
            # fiber's teardown unwinds every entry.
            log.exception("disposing the agent of ACP session %s failed", session.agent.id)

    async def _publish(self, make: Callable[[], Awaitable[AgentHandle]], cwd: str) -> AcpSession:
        commands = (*self.commands, *prompt_commands(cwd))
        # Shielded: a handle must never be lost between its creation and its record.
        with trio.CancelScope(shield=True):
            handle = await make()
            if self._closed:
                await handle.dispose()
                raise RpcError(ErrorCode.INTERNAL_ERROR, "the connection is closing")
        session = AcpSession(handle.agent, handle.dispose, cwd)
        builtin = {name for name, _ in BUILTIN_COMMANDS}
        # Invariant: a built-in command wins over a prompt file of the same name.
        session.commands = {c.name: c for c in commands if c.name not in builtin}
        read, write = offers_fs(self._client_capabilities)
        if (read or write) and self._files is not None:
            session.files = ClientFileSystem(
                self._calls, handle.agent.id, self._files.default, read=read, write=write
            )
        if offers_terminal(self._client_capabilities):
            session.terminal = ClientTerminal(
                self._calls, handle.agent.id, lambda *ids: self._sessions.terminal(session, *ids)
            )
        self._sessions.add(session)
        return session

    # -- methods ----------------------------------------------------------------------------

    def _initialize(self, request: Request) -> Any:
        params = params_object(request.params)
        capabilities = params.get("clientCapabilities")
        # Invariant: only what the client announced here may be used (nothing beyond the
        # baseline session/update and session/request_permission is, today).
        self._client_capabilities = capabilities if isinstance(capabilities, Mapping) else {}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": agent_capabilities(),
            "authMethods": [],
            "agentInfo": {"name": "trio-agents", "title": "trio_agents", "version": _version()},
        }

    async def _new(self, request: Request) -> Any:
        params = params_object(request.params)
        cwd = await _usable_cwd(params)
        servers = parse_mcp_servers(params, cwd)
        ctx = self._ctx
        assert ctx is not None
        agents, approver = ctx.service(AGENTS), self._permissions
        # The project's instructions and prompt commands are read here, in the handler's task:
        # a few small local files (capped), and a worker thread per session would leave the
        # request unanswered when the client's EOF drain passes while the thread runs
        # (test_hostile_frames_are_answered_and_serving_goes_on).
        instructions = project_instructions(cwd) if self.project_files else None
        session = await self._publish(
            lambda: agents.create(
                cwd=cwd, approver=approver, instructions=instructions, tools=agents.lead_tools()
            ),
            cwd,
        )
        await self._start_servers(session, servers)
        result = {"sessionId": session.agent.id, **self._settings.offer(session.agent)}
        return self._answer_then_commands(request, result, session)

    def _answer_then_commands(
        self, request: Request, result: Mapping[str, Any], session: AcpSession
    ) -> object:
        """Answer ``request``, then announce the session's commands (a client knows the
        session once it has the answer); :data:`LATER` for the handler to return."""
        self._serving.send(self._serving.rpc.respond(request.id, result))
        commands: list[tuple[str, str, str | None]] = [
            (name, description, None) for name, description in BUILTIN_COMMANDS
        ]
        commands += [
            (c.name, c.description, "arguments" if ARGUMENTS in c.text else None)
            for c in session.commands.values()
        ]
        self._serving.update(session.agent.id, available_commands_update(commands))
        return LATER

    async def _start_servers(self, session: AcpSession, servers: tuple[McpServer, ...]) -> None:
        """Start the session's own MCP servers; one that fails disposes the session."""
        if not servers:
            return
        ctx, host = self._ctx, self._host
        assert ctx is not None
        assert host is not None
        try:
            await start_mcp_servers(host, ctx.service(AGENTS), session.agent, servers)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._dispose(session)
            raise

    def _authenticate(self, request: Request) -> Any:
        method_id = required_str(params_object(request.params), "methodId")
        # Invariant: initialize announces no authMethods, so no id is one of them.
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"invalid params: unknown authentication method {method_id!r}; this agent needs "
            f"no authentication (its authMethods is empty)",
        )

    def _logout(self, request: Request) -> Any:
        params_object(request.params)
        return {}  # nothing to log out of (no authentication)

    async def _load(self, request: Request) -> Any:
        params = params_object(request.params)
        session = await self._open(params, "loaded")
        # Invariant: no checkpoint between the snapshot and the answer, so what happens next
        # in the session is streamed after the replay.
        self._sessions.replay(session)
        self._notice(session)
        return self._answer_then_commands(request, self._settings.offer(session.agent), session)

    async def _resume(self, request: Request) -> Any:
        # As session/load, without replaying the conversation.
        session = await self._open(params_object(request.params), "resumed")
        self._notice(session)
        return self._answer_then_commands(request, self._settings.offer(session.agent), session)

    def _set_mode(self, request: Request) -> Any:
        params = params_object(request.params)
        session = self._sessions.lookup(params)
        agent = self._settings.set_mode(session.agent, params)
        return self._answer_then_settings(request, {}, agent)

    def _set_config_option(self, request: Request) -> Any:
        params = params_object(request.params)
        session = self._sessions.lookup(params)
        agent, options = self._settings.set_option(session.agent, params)
        return self._answer_then_settings(request, {"configOptions": options}, agent)

    def _answer_then_settings(
        self, request: Request, result: Mapping[str, Any], agent: Agent
    ) -> object:
        """Answer ``request``, then announce the session's mode and options (see _modes)."""
        self._serving.send(self._serving.rpc.respond(request.id, result))
        for update in self._settings.updates(agent):
            self._serving.update(agent.id, update)
        return LATER

    def _notice(self, session: AcpSession) -> None:
        notice = restored_notice(
            session.agent.session.records, forgotten=self._permissions.forget_stored
        )
        if notice is not None:
            self._serving.update(session.agent.id, text_chunk("agent_message_chunk", notice))

    async def _close_session(self, request: Request) -> Any:
        session = self._sessions.lookup(params_object(request.params))
        if session.prompt is not None:
            session.prompt.cancel_requested = True
        self._calls.withdraw(session.agent.id)
        with trio.CancelScope(shield=True):
            await self._dispose(session)
        return {}

    async def _delete(self, request: Request) -> Any:
        session_id = required_str(params_object(request.params), "sessionId")
        if self._sessions.get(session_id) is not None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {session_id!r} is open in this connection; close it with "
                f"session/close, then delete it",
            )
        ctx = self._ctx
        assert ctx is not None
        try:
            await ctx.service(SESSIONS).delete(session_id)
        except (SessionNotFoundError, InvalidSessionIdError):
            raise _unknown_stored(session_id) from None
        except SessionInUseError as exc:
            raise RpcError(
                ErrorCode.INVALID_REQUEST, f"session {session_id!r} cannot be deleted: {exc}"
            ) from None
        return {}

    async def _open(self, params: Mapping[str, Any], done: str) -> AcpSession:
        """The session ``params`` name, resumed from the store unless it is live here."""
        session_id = required_str(params, "sessionId")
        cwd = await _usable_cwd(params)
        servers = parse_mcp_servers(params, cwd)
        ctx = self._ctx
        assert ctx is not None
        session = self._sessions.get(session_id)
        # A session live here already has the servers it was opened with.
        if session is None:
            try:
                # The cwd the client gives now is the session's from here on (and recorded).
                session = await self._publish(
                    lambda: ctx.service(AGENTS).resume(
                        session_id, cwd=cwd, approver=self._permissions
                    ),
                    cwd,
                )
            except (SessionNotFoundError, InvalidSessionIdError):
                raise _unknown_stored(session_id) from None
            except AgentIdInUseError as exc:
                where = "another worker" if exc.elsewhere else "another owner"
                raise RpcError(
                    ErrorCode.INVALID_REQUEST,
                    f"session {session_id!r} is live in {where}; it cannot be {done} ({exc})",
                ) from None
            except (SessionFormatError, OSError) as exc:
                # A damaged file (or one that cannot be read): the resume published nothing.
                reason = _reason(exc)
                raise RpcError(
                    ErrorCode.INVALID_PARAMS,
                    f"session {session_id!r} cannot be {done}: {reason}",
                    {"sessionId": session_id, "damaged": reason},
                ) from None
            await self._start_servers(session, servers)
        return session

    async def _list(self, request: Request) -> Any:
        params = params_object(request.params)
        wanted = optional_str(params, "cwd")
        if optional_str(params, "cursor") is not None:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "invalid params: unknown cursor (this agent answers with one page)",
            )
        ctx = self._ctx
        assert ctx is not None
        here = os.getcwd()
        entries = []
        # Top-level sessions only: a child agent's session is part of its parent's work.
        for info in SessionTree.of(await ctx.service(SESSIONS).list()).roots:
            live = self._sessions.get(info.id)
            # A session that recorded no cwd (stored before cwds were, or created without
            # one) runs its commands in this process's directory.
            cwd = live.cwd if live is not None else info.cwd or here
            if wanted is None or wanted == cwd:
                entries.append(session_info(info, cwd))
        return {"sessions": entries}

    def _prompt(self, request: Request) -> Any:
        session, text = self._sessions.claim(request)
        call = parse_command(text)
        if call is not None and call.name == "compact":
            host = self._host
            assert host is not None
            host.start_soon(self._compact, session, self._sessions.hold(request, session))
            return LATER
        if call is not None:
            command = session.commands.get(call.name)
            if command is None:
                # Not for the model: the user mistyped, or meant a command of another agent.
                known = ", ".join(f"/{name}" for name in self._command_names(session))
                self._serving.update(
                    session.agent.id,
                    text_chunk(
                        "agent_message_chunk",
                        f"unknown command /{call.name}; the commands here are {known} "
                        f"(prompt commands are the files of .trio-agents/commands/*.md)",
                    ),
                )
                return {"stopReason": "end_turn"}
            text = command.expand(call.arguments)
        self._sessions.begin(request, session, text)
        # Answered by the listener that sees the prompt's turn end (see _prompts).
        return LATER

    @staticmethod
    def _command_names(session: AcpSession) -> list[str]:
        return [name for name, _ in BUILTIN_COMMANDS] + list(session.commands)

    async def _compact(self, session: AcpSession, prompt: Prompt) -> None:
        """``/compact``: compact the session's agent now, then answer the held prompt."""
        try:
            record = await session.agent.compact()
        except CompactionError as exc:
            text = f"compaction failed: {exc}"
        except AgentClosedError:
            return  # disposed: the prompt is answered cancelled (see _prompts)
        else:
            if record is None:
                text = "nothing to compact: the conversation is only its latest turns"
            else:
                text = f"compacted: {record.tokens_before:,} -> {record.tokens_after:,} tokens"
        self._sessions.answer(session, prompt, text)

    def _cancel(self, params: Any) -> None:
        session_id = params.get("sessionId") if isinstance(params, Mapping) else None
        session = self._sessions.get(session_id)
        if session is None:
            log.debug("session/cancel for unknown session %r ignored", session_id)
            return
        if session.prompt is not None:
            session.prompt.cancel_requested = True
        self._calls.withdraw(session.agent.id)
        session.agent.cancel(UserCancel())

    def _cancel_request(self, params: Any) -> None:
        if not isinstance(params, Mapping) or "requestId" not in params:
            log.debug("$/cancel_request without a requestId ignored")
            return
        request_id = params["requestId"]
        # A pending prompt ends as session/cancel ends it (answered cancelled); another
        # running request is answered -32800; one already answered is no longer known.
        session = self._sessions.of_prompt(request_id)
        if session is not None:
            self._cancel({"sessionId": session.agent.id})
        elif not self._serving.cancel_request(request_id):
            log.debug("$/cancel_request for no pending request %r ignored", request_id)

    def _on_response(self, response: Response) -> None:
        # Every request a bridge sends (permission questions, fs/*) waits in _calls.
        self._calls.on_response(response)


def _unknown_stored(session_id: str) -> RpcError:
    """The answer to a request naming a session the store does not have."""
    return RpcError(
        ErrorCode.RESOURCE_NOT_FOUND,
        f"unknown session {session_id!r}; session/list shows the stored ones",
        {"sessionId": session_id},
    )


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def _leaf(exc: Exception) -> Exception:
    # The first real error inside the nurseries' groups: the one line worth reading.
    while isinstance(exc, ExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _cwd_problem(cwd: str) -> str | None:
    """Why ``cwd`` cannot be a session's working directory, or ``None``."""
    try:
        mode = os.stat(cwd).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be used: {exc.strerror}"
    if not stat.S_ISDIR(mode):
        return "is not a directory"
    return None


async def _usable_cwd(params: Mapping[str, Any]) -> str:
    """The ``cwd`` of a ``session/new`` or ``session/load``: an absolute path (the ACP spec
    says so), without NUL, of a directory that exists; else invalid params with the reason,
    before anything is created (a shell command there would fail later, less clearly)."""
    cwd = absolute_cwd(params)
    if "\0" in cwd:
        raise RpcError(
            ErrorCode.INVALID_PARAMS, f"invalid params: 'cwd' holds a NUL character; got {cwd!r}"
        )
    problem = await trio.to_thread.run_sync(_cwd_problem, cwd)
    if problem is not None:
        raise RpcError(ErrorCode.INVALID_PARAMS, f"invalid params: 'cwd' {cwd!r} {problem}")
    return cwd
