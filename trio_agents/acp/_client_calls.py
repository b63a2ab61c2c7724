"""The bridge's requests to the client (``session/request_permission``, ``fs/*``,
``terminal/*``): each one waits for its response, and no answer is ever lost or left waiting.

Rules:
- :meth:`ClientCalls.call` sends one request and waits for its response; it answers ``None``
  when the request was withdrawn (``session/cancel`` or ``session/close`` of its session) or
  the connection closed, and when the caller is cancelled it abandons the request (a late
  response is dropped by the connection).
- :meth:`ClientCalls.send` sends a request whose answer nobody waits for (a terminal's
  ``kill`` and ``release`` when its call is cancelled: the cancelled call must not wait for
  the client); its response is taken (a waiter nobody waits on) and dropped.
- Every open request has one waiter, and both are dropped together (a response, a withdrawal,
  a cancelled caller), so a response always finds its waiter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, final

import attrs
import trio

from ._jsonrpc import Response
from ._serving import Serving


@final
@attrs.define(eq=False)
class _Waiter:
    session_id: str
    method: str
    done: trio.Event = attrs.Factory(trio.Event)
    response: Response | None = None


@final
class ClientCalls:
    """The open requests of one bridge to its client (see the module rules)."""

    def __init__(self, serving: Serving, closed: Callable[[], bool]) -> None:
        self._serving = serving
        self._closed = closed
        self._waiters: dict[int, _Waiter] = {}

    def pending(self, method: str) -> int:
        """How many requests of ``method`` await the client."""
        return sum(w.method == method for w in self._waiters.values())

    def on_response(self, response: Response) -> None:
        """The client answered one of our requests."""
        waiter = self._waiters.pop(response.id)
        waiter.response = response
        waiter.done.set()

    def withdraw(self, session_id: str) -> None:
        """Stop waiting for the answers about ``session_id`` (their callers get ``None``)."""
        for request_id, waiter in list(self._waiters.items()):
            if waiter.session_id == session_id:
                del self._waiters[request_id]
                self._serving.rpc.abandon(request_id)
                waiter.done.set()

    def release_all(self) -> None:
        """The connection is closing: every caller gets ``None``."""
        for waiter in self._waiters.values():
            waiter.done.set()

    def send(self, session_id: str, method: str, params: Mapping[str, Any]) -> None:
        """Send the request and wait for nothing (nothing is sent once the connection is
        closing); its response is taken and dropped."""
        if self._closed():
            return
        request_id, frame = self._serving.rpc.request(method, params)
        self._waiters[request_id] = _Waiter(session_id, method)
        self._serving.send(frame)

    async def call(
        self, session_id: str, method: str, params: Mapping[str, Any]
    ) -> Response | None:
        """Send the request and wait for its response (``None``: see the module rules)."""
        if self._closed():
            await trio.lowlevel.checkpoint()
            return None
        rpc = self._serving.rpc
        request_id, frame = rpc.request(method, params)
        waiter = self._waiters[request_id] = _Waiter(session_id, method)
        self._serving.send(frame)
        try:
            await waiter.done.wait()
        finally:
            if self._waiters.pop(request_id, None) is not None:
                rpc.abandon(request_id)
        return waiter.response
