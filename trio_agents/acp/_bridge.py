"""The ACP bridge: one JSON-RPC connection over a trio stream pair, serving agents.

Rules (ownership):
- The bridge is a plugin. Its agents are created from the tasks of a child fiber (the *host*),
  so that fiber co-owns them, and each ACP session's record holds its handle's disposer.
- Client EOF (or a broken output), :meth:`AcpBridge.aclose` and the plugin's teardown reach
  one memoized shutdown: stop reading, cancel the request handlers, dispose every session the
  bridge owns concurrently, close the streams. The shutdown entry is pushed last, so on a
  teardown it runs before the host fiber's own entries.
- ``session/new`` and ``session/load`` create under a shield; one that finishes after the
  close began disposes its unpublished handle instead of publishing it.

Rules (ordering):
- Every frame goes through one unbounded outbound queue and one writer task, so frames leave
  in the order they were produced. Updates are produced by synchronous listeners in the
  agent's task (``AgentOutput``, ``SessionAppended``), and a prompt's response is produced by
  the listener that sees its ``TurnEnded``: every update of a turn precedes its response.
- A prompt is one queued message. It is answered ``cancelled`` when a ``session/cancel``
  arrived while it was pending (whatever the turn's end), when the cancel removed it before a
  turn claimed it, or when its turn ended cancelled.

Rules (permission): unless ``allow_bash``, a tool guard asks the client with
``session/request_permission`` before ``bash`` runs in a bridge session. ``allow_*`` runs it
(``allow_always`` for the rest of the session), ``reject_*`` answers the model with an error
(``reject_always`` for the rest of the session) and the turn goes on, ``cancelled`` (or a
closed connection) does not run it and ends the turn cancelled.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal, final

import attrs
import trio

from ..agent import (
    Agent,
    AgentClosedError,
    AgentDisposed,
    AgentHandle,
    AgentIdInUseError,
    AgentOutput,
    ToolContext,
    ToolResult,
)
from ..cancel import UserCancel
from ..kernel import Context
from ..session import (
    InboxSpliced,
    InvalidSessionIdError,
    SessionAppended,
    SessionNotFoundError,
    StopReason,
    ToolCall,
    TurnEnded,
    UserMessage,
)
from ..session import ToolResult as ToolResultRecord
from ._framing import MAX_FRAME, LineFramer
from ._jsonrpc import (
    Connection,
    ErrorCode,
    Invalid,
    Notification,
    Request,
    RequestId,
    Response,
    RpcError,
)
from ._protocol import (
    PERMISSION_OPTIONS,
    PROTOCOL_VERSION,
    absolute_cwd,
    agent_capabilities,
    optional_str,
    params_object,
    prompt_text,
    replay,
    required_str,
    session_info,
    stop_reason,
    text_chunk,
    update_of,
)

__all__ = ["AcpBridge", "BridgeStatistics"]

log = logging.getLogger("trio_agents.acp")

_READ_SIZE: Final = 65536
# After the client's EOF, how long the answers already produced may take to leave.
_DRAIN_SECONDS: Final = 1.0
_Policy = Literal["ask", "allow", "reject"]


@attrs.frozen
class BridgeStatistics:
    """A snapshot of a bridge.

    Attributes:
        sessions: the ids of the ACP sessions it owns, oldest first.
        prompts: how many ``session/prompt`` requests await their answer.
        permission_requests: how many ``session/request_permission`` await the client.
        closed: whether the shutdown has begun.
    """

    sessions: tuple[str, ...]
    prompts: int
    permission_requests: int
    closed: bool


@final
@attrs.define(eq=False)
class _Prompt:
    request_id: RequestId
    message_id: str
    turn_id: str | None = None
    cancel_requested: bool = False


@final
@attrs.define(eq=False)
class _Session:
    agent: Agent
    dispose: Callable[[], Awaitable[None]] = attrs.field(repr=False)
    cwd: str
    prompt: _Prompt | None = None
    policy: _Policy = "ask"


@final
@attrs.define(eq=False)
class _Waiter:
    session_id: str
    done: trio.Event = attrs.Factory(trio.Event)
    response: Response | None = None


@final
class _Host:
    """The child fiber whose tasks serve the connection (and so co-own its agents)."""

    name = "acp-sessions"

    def __init__(self) -> None:
        self.ctx: Context | None = None

    async def apply(self, ctx: Context, config: None) -> None:
        self.ctx = ctx


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
        allow_bash: run ``bash`` without asking the client for permission.
        max_frame: the largest incoming frame, in bytes.

    Apply it with ``await ctx.plugin(bridge)``; it serves until the client closes its side
    (then :meth:`wait_closed` returns) or until its fiber is disposed.
    """

    name = "acp"
    inject = ("agents", "sessions", "tools")

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream | None = None,
        *,
        allow_bash: bool = False,
        max_frame: int = MAX_FRAME,
    ) -> None:
        if receive_stream is None:
            if not isinstance(send_stream, trio.abc.ReceiveStream):
                raise TypeError(
                    "AcpBridge needs a receive stream: pass (send_stream, receive_stream), "
                    "or one bidirectional trio.abc.Stream"
                )
            receive_stream = send_stream
        self.allow_bash = allow_bash
        self._send_stream = send_stream
        self._receive_stream = receive_stream
        self._framer = LineFramer(max_frame)
        self._rpc = Connection()
        self._ctx: Context | None = None
        self._sessions: dict[str, _Session] = {}
        self._waiters: dict[int, _Waiter] = {}
        self._client_capabilities: Mapping[str, Any] | None = None
        self._closed = False
        self._scope = trio.CancelScope()
        self._handlers: trio.Nursery | None = None
        self._started = False
        self._done = trio.Event()
        self._out_send, self._out_receive = trio.open_memory_channel[bytes](math.inf)
        self._drained = trio.Event()
        self._tool_call_ids = itertools.count(1)

    # -- the plugin -------------------------------------------------------------------------

    async def apply(self, ctx: Context, config: None) -> None:
        """Start serving in ``ctx``'s fiber (see the module rules for what it owns)."""
        if self._started:
            raise RuntimeError("this AcpBridge already served its connection; make a new one")
        self._started = True
        self._ctx = ctx
        host = _Host()
        await ctx.plugin(host)
        assert host.ctx is not None
        ctx.on(AgentOutput, self._on_output)
        ctx.on(SessionAppended, self._on_appended)
        ctx.on(AgentDisposed, self._on_disposed)
        if not self.allow_bash:
            ctx.tools.add_guard(self._guard)
        # Invariant: pushed last, so a teardown shuts the connection down first.
        ctx.defer(self.aclose)
        host.ctx.start_soon(self._serve, name="acp serve")

    async def aclose(self) -> None:
        """Shut the connection down (memoized): dispose every session, close the streams."""
        self._closed = True
        self._scope.cancel()
        if self._started:
            await self._done.wait()
        else:
            await trio.lowlevel.checkpoint()

    async def wait_closed(self) -> None:
        """Wait until the connection is shut down and every session is disposed."""
        await self._done.wait()

    @property
    def client_capabilities(self) -> Mapping[str, Any] | None:
        """What the client announced in ``initialize`` (``None`` before it)."""
        return self._client_capabilities

    def statistics(self) -> BridgeStatistics:
        """A frozen snapshot of this bridge."""
        return BridgeStatistics(
            sessions=tuple(self._sessions),
            prompts=sum(1 for s in self._sessions.values() if s.prompt is not None),
            permission_requests=len(self._waiters),
            closed=self._closed,
        )

    # -- the connection ---------------------------------------------------------------------

    async def _serve(self) -> None:
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write)
                    async with trio.open_nursery() as handlers:
                        self._handlers = handlers
                        await self._read()
                        self._closed = True
                        handlers.cancel_scope.cancel()
                    # EOF may close only the client's half: the answers to what it sent
                    # (including the prompts now cancelled) still go out, within a bound.
                    with trio.CancelScope(shield=True):
                        await self._dispose_sessions()
                    self._out_send.close()
                    with trio.move_on_after(_DRAIN_SECONDS):
                        await self._drained.wait()
                    nursery.cancel_scope.cancel()
        finally:
            self._closed = True
            with trio.CancelScope(shield=True):
                await self._shutdown()
            self._done.set()

    async def _shutdown(self) -> None:
        await self._dispose_sessions()
        self._out_send.close()
        for stream in {id(s): s for s in (self._send_stream, self._receive_stream)}.values():
            await trio.aclose_forcefully(stream)
        log.debug("acp connection closed")

    async def _dispose_sessions(self) -> None:
        for waiter in self._waiters.values():
            waiter.done.set()
        async with trio.open_nursery() as nursery:
            for session in list(self._sessions.values()):
                nursery.start_soon(self._dispose, session)

    async def _dispose(self, session: _Session) -> None:
        try:
            await session.dispose()
        except Exception:
            log.exception("disposing the agent of ACP session %s failed", session.agent.id)
        finally:
            if self._sessions.get(session.agent.id) is session:
                del self._sessions[session.agent.id]

    async def _read(self) -> None:
        while True:
            try:
                data = await self._receive_stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            frames = self._framer.feed(data) if data else self._framer.close()
            for frame in frames:
                self._dispatch(self._rpc.receive(frame))
            if not data:
                log.debug("the client closed its output")
                return

    async def _write(self) -> None:
        async for frame in self._out_receive:
            try:
                await self._send_stream.send_all(frame)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                log.debug("the client stopped reading; shutting down")
                self._closed = True
                self._scope.cancel()
                return
        self._drained.set()

    def _send(self, frame: bytes) -> None:
        try:
            self._out_send.send_nowait(frame)
        except trio.ClosedResourceError:
            log.debug("dropped a frame after the connection closed")

    def _update(self, session_id: str, update: Mapping[str, Any]) -> None:
        self._send(self._rpc.notify("session/update", {"sessionId": session_id, "update": update}))

    # -- dispatch ---------------------------------------------------------------------------

    def _dispatch(self, event: Invalid | Request | Notification | Response) -> None:
        if isinstance(event, Invalid):
            log.warning("invalid frame from the client: %s", event.reason)
            if event.reply is not None:
                self._send(event.reply)
        elif isinstance(event, Response):
            waiter = self._waiters.pop(event.id, None)
            if waiter is not None:
                waiter.response = event
                waiter.done.set()
        elif isinstance(event, Notification):
            if event.method == "session/cancel":
                self._cancel(event.params)
            else:
                log.debug("ignored the notification %r", event.method)
        else:
            self._request(event)

    def _request(self, request: Request) -> None:
        sync: dict[str, Callable[[Request], Any]] = {
            "initialize": self._initialize,
            "session/prompt": self._prompt,
        }
        concurrent: dict[str, Callable[[Request], Awaitable[Any]]] = {
            "session/new": self._new,
            "session/load": self._load,
            "session/list": self._list,
        }
        method = request.method
        if method not in sync and method not in concurrent:
            self._send(
                self._rpc.respond_error(
                    request.id, ErrorCode.METHOD_NOT_FOUND, f"method not found: {method!r}"
                )
            )
            return
        if self._client_capabilities is None and method != "initialize":
            self._send(
                self._rpc.respond_error(
                    request.id,
                    ErrorCode.INVALID_REQUEST,
                    f"call initialize before {method!r}",
                )
            )
            return
        if method in sync:
            self._answer(request, self._guarded_call(request, sync[method]))
        else:
            assert self._handlers is not None
            self._handlers.start_soon(self._handle, request, concurrent[method], name=method)

    def _guarded_call(self, request: Request, fn: Callable[[Request], Any]) -> Any:
        try:
            return fn(request)
        except RpcError as exc:
            return exc
        except Exception as exc:
            log.exception("the %r handler failed", request.method)
            return RpcError(ErrorCode.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")

    async def _handle(self, request: Request, fn: Callable[[Request], Awaitable[Any]]) -> None:
        try:
            result = await fn(request)
        except RpcError as exc:
            result = exc
        except Exception as exc:
            log.exception("the %r handler failed", request.method)
            result = RpcError(ErrorCode.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
        self._answer(request, result)

    def _answer(self, request: Request, result: Any) -> None:
        if result is _LATER:
            return
        if isinstance(result, RpcError):
            frame = self._rpc.respond_error(request.id, result.code, result.message, result.data)
        else:
            frame = self._rpc.respond(request.id, result)
        self._send(frame)

    def _session(self, params: Mapping[str, Any]) -> _Session:
        session_id = required_str(params, "sessionId")
        session = self._sessions.get(session_id)
        if session is None:
            raise RpcError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"unknown session {session_id!r}; create one with session/new or load it "
                f"with session/load",
                {"sessionId": session_id},
            )
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

    async def _publish(self, make: Callable[[], Awaitable[AgentHandle]], cwd: str) -> _Session:
        ctx = self._ctx
        assert ctx is not None
        # Shielded: a handle must never be lost between its creation and its record.
        with trio.CancelScope(shield=True):
            handle = await make()
            if self._closed:
                await handle.dispose()
                raise RpcError(ErrorCode.INTERNAL_ERROR, "the connection is closing")
        session = _Session(handle.agent, handle.dispose, cwd)
        self._sessions[handle.agent.id] = session
        return session

    async def _new(self, request: Request) -> Any:
        params = params_object(request.params)
        cwd = absolute_cwd(params)
        _check_mcp(params)
        ctx = self._ctx
        assert ctx is not None
        session = await self._publish(lambda: ctx.agents.create(), cwd)
        return {"sessionId": session.agent.id}

    async def _load(self, request: Request) -> Any:
        params = params_object(request.params)
        session_id = required_str(params, "sessionId")
        cwd = absolute_cwd(params)
        _check_mcp(params)
        ctx = self._ctx
        assert ctx is not None
        session = self._sessions.get(session_id)
        if session is None:
            try:
                session = await self._publish(lambda: ctx.agents.resume(session_id), cwd)
            except (SessionNotFoundError, InvalidSessionIdError):
                raise RpcError(
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"unknown session {session_id!r}; session/list shows the stored ones",
                    {"sessionId": session_id},
                ) from None
            except AgentIdInUseError:
                raise RpcError(
                    ErrorCode.INVALID_REQUEST,
                    f"session {session_id!r} is live in another owner; it cannot be loaded",
                ) from None
        # Invariant: no checkpoint between the snapshot and the answer, so what happens next
        # in the session is streamed after the replay.
        for update in replay(session.agent.session.records):
            self._update(session_id, update)
        return {}

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
        for info in await ctx.sessions.list():
            live = self._sessions.get(info.id)
            cwd = live.cwd if live is not None else here
            if wanted is None or wanted == cwd:
                entries.append(session_info(info, cwd))
        return {"sessions": entries}

    def _prompt(self, request: Request) -> Any:
        params = params_object(request.params)
        session = self._session(params)
        text = prompt_text(params)
        if session.prompt is not None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {session.agent.id!r} is already running a prompt; wait for its "
                f"answer or send session/cancel",
            )
        try:
            message_id = session.agent.prompt(text)
        except AgentClosedError as exc:
            raise RpcError(ErrorCode.INTERNAL_ERROR, str(exc)) from None
        session.prompt = _Prompt(request.id, str(message_id))
        return _LATER

    def _cancel(self, params: Any) -> None:
        session_id = params.get("sessionId") if isinstance(params, Mapping) else None
        session = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            log.debug("session/cancel for unknown session %r ignored", session_id)
            return
        if session.prompt is not None:
            session.prompt.cancel_requested = True
        for request_id, waiter in list(self._waiters.items()):
            if waiter.session_id == session_id:
                del self._waiters[request_id]
                self._rpc.abandon(request_id)
                waiter.done.set()
        session.agent.cancel(UserCancel())

    # -- live events (sync, in the emitter's task) ---------------------------------------------

    def _on_output(self, event: AgentOutput) -> None:
        if event.agent_id in self._sessions:
            self._update(event.agent_id, text_chunk("agent_message_chunk", event.text))

    def _on_appended(self, event: SessionAppended) -> None:
        session = self._sessions.get(event.session_id)
        if session is None:
            return
        record, prompt = event.record, session.prompt
        if isinstance(record, UserMessage):
            if prompt is not None and record.message_id == prompt.message_id:
                prompt.turn_id = record.turn_id  # the client shows its own prompt already
                return
            self._forward(session, record)
        elif isinstance(record, ToolCall | ToolResultRecord):
            self._forward(session, record)
        elif isinstance(record, InboxSpliced):
            if (
                prompt is not None
                and prompt.turn_id is None
                and record.op == "remove"
                and record.message_id == prompt.message_id
            ):
                self._finish(session, None)
        elif (
            isinstance(record, TurnEnded)
            and prompt is not None
            and record.turn_id == prompt.turn_id
        ):
            self._finish(session, record)

    def _forward(self, session: _Session, record: Any) -> None:
        update = update_of(record)
        if update is not None:
            self._update(session.agent.id, update)

    def _on_disposed(self, event: AgentDisposed) -> None:
        session = self._sessions.pop(event.agent_id, None)
        if session is not None and session.prompt is not None:
            # Disposed with its prompt unclaimed: that prompt will never run.
            self._finish(session, None)

    def _finish(self, session: _Session, ended: TurnEnded | None) -> None:
        prompt = session.prompt
        assert prompt is not None
        session.prompt = None
        if not self._rpc.is_open(prompt.request_id):
            return
        if ended is None or prompt.cancel_requested:
            reason: str | None = "cancelled"
        else:
            reason = stop_reason(ended.stop_reason)
        if reason is None:
            assert ended is not None
            assert ended.stop_reason is StopReason.ERROR
            frame = self._rpc.respond_error(
                prompt.request_id,
                ErrorCode.INTERNAL_ERROR,
                f"the turn failed: {ended.error}",
                {"stopReason": ended.stop_reason.value},
            )
        else:
            frame = self._rpc.respond(prompt.request_id, {"stopReason": reason})
        self._send(frame)

    # -- permission ---------------------------------------------------------------------------

    async def _guard(
        self, name: str, arguments: Mapping[str, Any], call: ToolContext
    ) -> ToolResult | None:
        session = self._sessions.get(call.agent.id) if call.agent is not None else None
        if name != "bash" or session is None or session.agent is not call.agent:
            return None
        if session.policy == "allow":
            return None
        if session.policy == "reject":
            return ToolResult("the user rejected shell commands for this session", is_error=True)
        kind = await self._ask(session, arguments, call)
        if kind in ("allow_once", "allow_always"):
            if kind == "allow_always":
                session.policy = "allow"
            return None
        if kind in ("reject_once", "reject_always"):
            if kind == "reject_always":
                session.policy = "reject"
            return ToolResult("the user rejected running this command", is_error=True)
        # Cancelled (or the connection closed): the command does not run, the turn ends.
        if session.prompt is not None:
            session.prompt.cancel_requested = True
        if call.scope is not None:
            call.scope.cancel(UserCancel())
        else:
            session.agent.cancel(UserCancel(), keep_inbox=True)
        return ToolResult("the user cancelled; the command did not run", is_error=True)

    async def _ask(self, session: _Session, arguments: Mapping[str, Any], call: ToolContext) -> str:
        command = arguments.get("command")
        params = {
            "sessionId": session.agent.id,
            "toolCall": {
                "toolCallId": call.call_id or f"guard-{next(self._tool_call_ids)}",
                "title": f"bash: {command}" if isinstance(command, str) else "bash",
                "kind": "execute",
                "status": "pending",
                "rawInput": dict(arguments),
            },
            "options": [dict(o) for o in PERMISSION_OPTIONS],
        }
        if self._closed:
            await trio.lowlevel.checkpoint()
            return "cancelled"
        request_id, frame = self._rpc.request("session/request_permission", params)
        waiter = self._waiters[request_id] = _Waiter(session.agent.id)
        self._send(frame)
        try:
            await waiter.done.wait()
        finally:
            if self._waiters.pop(request_id, None) is not None:
                self._rpc.abandon(request_id)
        return _outcome(waiter.response)


#: A sync handler's result meaning "answered later" (by the listener that ends the turn).
_LATER: Final = object()


def _check_mcp(params: Mapping[str, Any]) -> None:
    servers = params.get("mcpServers")
    if servers is not None and not isinstance(servers, list):
        raise RpcError(ErrorCode.INVALID_PARAMS, "invalid params: 'mcpServers' must be an array")
    if servers:
        log.warning("MCP servers are not supported; ignoring %d of them", len(servers))


def _outcome(response: Response | None) -> str:
    """The permission option kind chosen, ``cancelled``, or ``reject_once`` for nonsense."""
    if response is None:
        return "cancelled"
    if response.error is not None:
        log.warning("session/request_permission failed: %s", response.error)
        return "reject_once"
    result = response.result
    outcome = result.get("outcome") if isinstance(result, Mapping) else None
    if not isinstance(outcome, Mapping):
        return "reject_once"
    if outcome.get("outcome") == "cancelled":
        return "cancelled"
    chosen = outcome.get("optionId")
    for option in PERMISSION_OPTIONS:
        if option["optionId"] == chosen:
            return option["kind"]
    return "reject_once"
