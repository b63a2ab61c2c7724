"""The serving of one JSON-RPC connection: frames in, routed to handlers, frames out in order.

Rules (ordering):
- Every frame goes through one outbound queue and one writer task, so frames leave in the
  order they were produced (:meth:`Serving.send` never blocks and never reorders).
- The writer writes every frame queued when it runs in one ``send_all`` (up to
  :data:`_WRITE_SIZE` bytes). Woken by a frame, it lets scheduling passes go by first (one
  checkpoint each) for as long as each pass queued more frames, at most
  :data:`_COALESCE_PASSES` of them and until :data:`_COALESCE_BYTES` wait: so the frames a
  turn queues in consecutive steps (a streamed reply's deltas, one a step) cost one write
  and the client one read, and a frame waits for later ones only while they come pass after
  pass, never more than that bound. A frame sent without ``more`` (an answer: the end of
  what its producer had to say) ends the wait at the writer's next pass, as does a first
  frame alone.
- A client that stops reading must not make the queue grow without end, and a client that
  reads must get every frame however fast the agents produce them. So the queue may pass
  ``max_unsent`` bytes for a moment, but when it stays past the bound with no frame written
  for ``stall_seconds``, the client is treated like one whose pipe broke: a warning, then
  ``on_broken()`` (the connection closes, nothing more is queued).
- After the client's EOF, the answers already produced (including those of the requests the
  EOF cancelled) still go out, within ``drain_seconds``; EOF may close only the client's half.

- When serving fails (a bug: no frame can cause it), the frames already queued still go
  out within ``drain_seconds`` before the failure propagates.

Rules (dispatch):
- A malformed frame is answered with a JSON-RPC error (when it has an id) and serving goes on.
  No frame raises out of dispatch: a notification or response handler that raises is logged
  and the frame dropped; an answer (or notification) that cannot be encoded is logged, and
  the request answered ``internal error`` (the notification dropped).
- A method not in the tables is ``method not found``; before ``initialize`` succeeded, every
  other method is refused with ``call initialize before ...``.
- A *sync* handler answers in the reader's task (so nothing can come between the frame and
  what the handler does); a *concurrent* handler runs in its own task, cancelled at EOF.
  Either may return :data:`LATER` when its answer is produced elsewhere. An :class:`RpcError`
  it raises is its answer; any other exception is logged and answered ``internal error``.
- :meth:`Serving.cancel_request` cancels a running concurrent handler, which is then answered
  ``-32800`` (request cancelled); a handler shields what must not be lost (a new session).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, final

import trio

from ._framing import LineFramer, TextTemplate
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

log = logging.getLogger("trio_agents.acp")

_READ_SIZE: Final = 65536
#: The most bytes of queued frames joined into one write (a larger frame is written alone):
#: the copy a join makes stays bounded, however far the client lags.
_WRITE_SIZE: Final = 1 << 20

#: The most scheduling passes the writer lets go by, while frames keep coming, before it
#: writes (a streamed reply queues one delta a pass): the most a frame waits for later ones.
#: Writing once per burst instead of every other delta: 99,923 -> 88,326 instructions per
#: streamed delta of ``trio-agents acp`` (the bare writer's 88,341), ``bench_stream``'s
#: callgrind count; fewer writes and client reads besides (issue #43 item 5).
_COALESCE_PASSES: Final = 64
#: Queued bytes past which the writer writes without waiting for more (a pipe's buffer).
_COALESCE_BYTES: Final = 1 << 16

#: A handler's result meaning "answered later" (for a prompt: by the listener that ends the turn).
LATER: Final = object()

SyncHandler = Callable[[Request], Any]
ConcurrentHandler = Callable[[Request], Awaitable[Any]]


@final
class Serving:
    """The streams, the sans-IO connection and the method tables of one JSON-RPC peer.

    Args:
        send_stream: where frames are written.
        receive_stream: where frames are read.
        max_frame: the largest incoming frame, in bytes.
        max_unsent: bytes of frames queued and not yet written past which a stalled writer
            means the client stopped reading.
        stall_seconds: how long the writer may make no progress past ``max_unsent``.
        sync: handlers that answer in the reader's task, by method.
        concurrent: handlers that run in their own task, by method.
        notifications: what to do with each notification the peer may send, by method.
        on_response: where the responses to this side's requests go.
        initialized: whether ``initialize`` has succeeded.
    """

    def __init__(
        self,
        send_stream: trio.abc.SendStream,
        receive_stream: trio.abc.ReceiveStream,
        *,
        max_frame: int,
        max_unsent: int,
        stall_seconds: float,
        sync: Mapping[str, SyncHandler],
        concurrent: Mapping[str, ConcurrentHandler],
        notifications: Mapping[str, Callable[[Any], None]],
        on_response: Callable[[Response], None],
        initialized: Callable[[], bool],
    ) -> None:
        self.rpc = Connection()
        self._send_stream = send_stream
        self._receive_stream = receive_stream
        self._framer = LineFramer(max_frame)
        self._sync = sync
        self._concurrent = concurrent
        self._notifications = notifications
        self._on_response = on_response
        self._initialized = initialized
        self._handlers: trio.Nursery | None = None
        # The cancel scopes of the concurrent handlers running, by request id.
        self._running: dict[tuple[type, RequestId], trio.CancelScope] = {}
        # The outbound queue: frames in order; the writer parks on _wake when it is empty.
        self._queue: deque[bytes] = deque()
        self._queue_closed = False
        # A frame that ends its burst (an answer) was queued: the writer waits no longer.
        self._burst_ended = False
        self._wake = trio.lowlevel.ParkingLot()
        self._drained = trio.Event()
        self._max_unsent = max_unsent
        self._stall_seconds = stall_seconds
        self._unsent = 0
        self._last_write = -math.inf
        self._over = trio.Event()  # set while the queue is past max_unsent

    @property
    def unsent(self) -> int:
        """Bytes of frames queued and not yet written."""
        return self._unsent

    # -- frames out ---------------------------------------------------------------------------

    def send(self, frame: bytes, *, more: bool = False) -> None:
        """Queue ``frame`` (dropped, with a debug log, once the connection closed).

        ``more``: its producer may queue more right after it (a streamed update), so the
        writer may wait for them; else (an answer) the writer waits for nothing more.
        """
        if self._queue_closed:
            log.debug("dropped a frame after the connection closed")
            return
        self._queue.append(frame)
        if not more:
            self._burst_ended = True
        if self._wake:  # the writer is parked
            self._wake.unpark()
        self._unsent += len(frame)
        if self._unsent > self._max_unsent:
            self._over.set()

    def update(self, session_id: str, update: Mapping[str, Any]) -> None:
        """Queue the ``session/update`` notification ``update`` of ``session_id``.

        One that cannot be encoded as JSON is dropped with an error log.
        """
        params = {"sessionId": session_id, "update": update}
        try:
            frame = self.rpc.notify("session/update", params)
        except (TypeError, ValueError) as exc:
            log.error("dropped a session/update of session %s: %s", session_id, exc)
            return
        self.send(frame, more=True)

    def update_template(self, session_id: str, update: Mapping[str, Any]) -> TextTemplate:
        """The ``session/update`` notifications of ``session_id`` that differ only in one
        string: ``update`` holds :data:`._framing.TEXT_SLOT` as its last string, and
        ``send(template.frame(text))`` queues what :meth:`update` would with ``text`` there."""
        return self.rpc.notification_template(
            "session/update", {"sessionId": session_id, "update": update}
        )

    # -- the loop -----------------------------------------------------------------------------

    async def serve(
        self,
        *,
        on_eof: Callable[[], None],
        on_broken: Callable[[], None],
        after_eof: Callable[[], Awaitable[None]],
        drain_seconds: float,
    ) -> None:
        """Serve until the peer's EOF (or until cancelled).

        At EOF: ``on_eof()``, cancel the concurrent handlers, ``await after_eof()`` (shielded),
        then let the queued frames leave within ``drain_seconds``. When the peer stops
        reading, ``on_broken()`` (which is expected to cancel this call).
        """
        self._last_write = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write, on_broken)
            nursery.start_soon(self._watch, on_broken)
            try:
                async with trio.open_nursery() as handlers:
                    self._handlers = handlers
                    await self._read()
                    on_eof()
                    handlers.cancel_scope.cancel()
                with trio.CancelScope(shield=True):
                    await after_eof()
            except Exception:
                # The writer still runs (its nursery is not cancelled before this body ends).
                await self._drain(drain_seconds, shield=True)
                raise
            await self._drain(drain_seconds, shield=False)
            nursery.cancel_scope.cancel()

    def _close_queue(self) -> None:
        # Nothing more is queued; the writer writes what is, then sets _drained.
        self._queue_closed = True
        self._wake.unpark()

    async def _drain(self, seconds: float, *, shield: bool) -> None:
        self._close_queue()
        with trio.CancelScope(shield=shield), trio.move_on_after(seconds):
            await self._drained.wait()

    async def aclose(self) -> None:
        """Stop queueing frames and close both streams (forcefully: the peer is gone)."""
        self._close_queue()
        for stream in {id(s): s for s in (self._send_stream, self._receive_stream)}.values():
            await trio.aclose_forcefully(stream)

    async def _read(self) -> None:
        while True:
            try:
                data = await self._receive_stream.receive_some(_READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            frames = self._framer.feed(data) if data else self._framer.close()
            for frame in frames:
                self._dispatch(self.rpc.receive(frame))
            if not data:
                log.debug("the client closed its output")
                return

    def _take(self) -> bytes:
        """The frames at the head of the queue, joined, up to ``_WRITE_SIZE`` bytes (at
        least one frame)."""
        queue = self._queue
        if len(queue) == 1:
            return queue.popleft()
        frames = [queue.popleft()]
        size = len(frames[0])
        while queue and size + len(queue[0]) <= _WRITE_SIZE:
            size += len(queue[0])
            frames.append(queue.popleft())
        return b"".join(frames)

    async def _write(self, on_broken: Callable[[], None]) -> None:
        queue = self._queue
        while True:
            if not queue:
                if self._queue_closed:
                    break
                await self._wake.park()  # send() unparks it
                await self._coalesce()
                continue
            self._burst_ended = False
            data = self._take()
            try:
                await self._send_stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                log.debug("the client stopped reading; shutting down")
                on_broken()
                return
            self._unsent -= len(data)
            self._last_write = trio.current_time()
            if self._unsent <= self._max_unsent and self._over.is_set():
                self._over = trio.Event()
        self._drained.set()

    async def _coalesce(self) -> None:
        """Let scheduling passes go by while the producers keep queueing frames (see the
        module rules): at most :data:`_COALESCE_PASSES`, until :data:`_COALESCE_BYTES`."""
        # Woken in the pass after a frame was queued, with the tasks that queued it; each
        # checkpoint lets them run one more step first, so what they queue in it (a turn's
        # next delta, its last update and its answer) leaves in this write.
        # Two quiet passes in a row end the wait, not one: trio runs a pass's tasks in a
        # random order, so a producer that queues a frame every pass can run before the
        # writer in one pass and after it in the next, which looks like one quiet pass
        # (test_frames_queued_pass_after_pass_leave_in_one_write).
        queue = self._queue
        quiet = 0
        for _ in range(_COALESCE_PASSES):
            queued = len(queue)
            await trio.lowlevel.cancel_shielded_checkpoint()
            if self._burst_ended or self._unsent >= _COALESCE_BYTES:
                return
            quiet = quiet + 1 if len(queue) == queued else 0
            if quiet == 2:
                return

    async def _watch(self, on_broken: Callable[[], None]) -> None:
        """Close the connection when the queue stays past its bound with no write."""
        while True:
            await self._over.wait()
            await trio.sleep_until(self._last_write + self._stall_seconds)
            stalled = trio.current_time() - self._last_write >= self._stall_seconds
            if self._unsent > self._max_unsent and stalled:
                log.warning(
                    "the client has read nothing for %g s and %d bytes of answers wait for "
                    "it (the bound is %d); closing the connection",
                    self._stall_seconds,
                    self._unsent,
                    self._max_unsent,
                )
                self._close_queue()
                on_broken()
                return

    # -- dispatch -----------------------------------------------------------------------------

    def _dispatch(self, event: Invalid | Request | Notification | Response) -> None:
        if isinstance(event, Invalid):
            log.warning("invalid frame from the client: %s", event.reason)
            if event.reply is not None:
                self.send(event.reply)
        elif isinstance(event, Response):
            try:
                self._on_response(event)
            except Exception:
                log.exception("handling the response to request %r failed", event.id)
        elif isinstance(event, Notification):
            handler = self._notifications.get(event.method)
            if handler is None:
                log.debug("ignored the notification %r", event.method)
                return
            try:
                handler(event.params)
            except Exception:
                log.exception("the %r notification handler failed", event.method)
        else:
            self._request(event)

    def _request(self, request: Request) -> None:
        method = request.method
        if method not in self._sync and method not in self._concurrent:
            self._refuse(request, ErrorCode.METHOD_NOT_FOUND, f"method not found: {method!r}")
            return
        if not self._initialized() and method != "initialize":
            self._refuse(request, ErrorCode.INVALID_REQUEST, f"call initialize before {method!r}")
            return
        if method in self._sync:
            self._answer(request, self._call(request, self._sync[method]))
        else:
            assert self._handlers is not None
            # Registered now, not when the task starts: a $/cancel_request read right after
            # the request (even in the same read) finds it.
            scope = self._running[(type(request.id), request.id)] = trio.CancelScope()
            self._handlers.start_soon(
                self._handle, request, self._concurrent[method], scope, name=method
            )

    def _refuse(self, request: Request, code: int, message: str) -> None:
        self.send(self.rpc.respond_error(request.id, code, message))

    def _call(self, request: Request, fn: SyncHandler) -> Any:
        try:
            return fn(request)
        except RpcError as exc:
            return exc
        except Exception as exc:
            return _internal(request, exc)

    def cancel_request(self, request_id: RequestId) -> bool:
        """Cancel the running concurrent handler of ``request_id``; whether there was one."""
        scope = self._running.get((type(request_id), request_id))
        if scope is None:
            return False
        scope.cancel()
        return True

    async def _handle(
        self, request: Request, fn: ConcurrentHandler, scope: trio.CancelScope
    ) -> None:
        key = (type(request.id), request.id)
        with scope:
            try:
                result = await fn(request)
            except RpcError as exc:
                result = exc
            except Exception as exc:
                result = _internal(request, exc)
            finally:
                if self._running.get(key) is scope:
                    del self._running[key]
        if scope.cancelled_caught:
            result = RpcError(
                ErrorCode.REQUEST_CANCELLED, f"{request.method} was cancelled by $/cancel_request"
            )
        self._answer(request, result)

    def _answer(self, request: Request, result: Any) -> None:
        if result is LATER:
            return
        try:
            if isinstance(result, RpcError):
                frame = self.rpc.respond_error(request.id, result.code, result.message, result.data)
            else:
                frame = self.rpc.respond(request.id, result)
        except (TypeError, ValueError) as exc:
            # The request is still open (Connection encodes before it moves).
            log.error("the answer to %r cannot be encoded as JSON: %s", request.method, exc)
            frame = self.rpc.respond_error(
                request.id, ErrorCode.INTERNAL_ERROR, "internal error: the answer is not JSON"
            )
        self.send(frame)


def _internal(request: Request, exc: Exception) -> RpcError:
    log.exception("the %r handler failed", request.method, exc_info=exc)
    return RpcError(ErrorCode.INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
