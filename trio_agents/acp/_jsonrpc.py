"""JSON-RPC 2.0 over frames, sans-IO: what a frame means, and the request bookkeeping.

Rules:
- :meth:`Connection.receive` turns one frame into one event: a :class:`Request` (it has a
  ``method`` and an ``id``), a :class:`Notification` (a ``method``, no ``id`` member), a
  :class:`Response` to a request this side sent, or :class:`Invalid`. An invalid frame that
  deserves an answer carries the error frame to send (``-32700`` for bytes that are not JSON,
  ``-32600`` for JSON that is not a request); an unsolicited response is dropped (it cannot be
  answered).
- Ids are echoed exactly: ``0``, ``"0"`` and ``null`` are three different ids (a request with
  ``"id": null`` is a request, and is answered with ``"id": null``). Booleans, fractions and
  other JSON are not ids; a frame whose id cannot be read is answered with ``"id": null``.
- Every request is answered once. The legal moves of a request are the table below, and the
  table lookup *is* the move: :meth:`Connection._move` writes the state it finds there and
  nothing else writes one. Anything else (answering twice, answering an id never received, a
  response to a request not sent) raises :class:`ProtocolStateError` when this side does it,
  and leaves the state unchanged.
- A notification is never answered, not even a malformed one (``"params": null`` is taken
  as no params). Batches (JSON arrays) are not used by ACP and are answered ``-32600``.
- Frames are decoded strictly (:func:`._framing.decode_frame`): deep nesting, a lone
  surrogate in any string, ``NaN`` are ``-32700``, answered with the request's id when that
  id is itself clean and not in use (else ``null``); such a notification is dropped; such a
  response to this side's request closes it as an error response. So no event ever carries
  a value that cannot be encoded, stored or printed.
- Encoding comes before bookkeeping: an answer that cannot be encoded raises and leaves the
  request open, so it can still be answered (with an error).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias, TypeGuard, final

import attrs

from .._errors import TrioAgentsError
from ._framing import Oversized, TextTemplate, decode_frame, encode_frame, find_problem

RequestId: TypeAlias = int | str | None


class ErrorCode(enum.IntEnum):
    """The error codes this package sends (JSON-RPC 2.0, and ACP's ``-32002``)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    #: ACP: the resource (here: the session) is not known.
    RESOURCE_NOT_FOUND = -32002
    #: ACP: the request was cancelled (``$/cancel_request``).
    REQUEST_CANCELLED = -32800


class ProtocolStateError(TrioAgentsError, RuntimeError):
    """This side broke the request bookkeeping (answered twice, answered an unknown id ...)."""


class RpcError(TrioAgentsError):
    """An error answer: raise it from a method handler to answer with ``code``.

    Args:
        code: the JSON-RPC error code.
        message: one readable line.
        data: optional JSON-serializable details.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message
        self.data = data


@attrs.frozen
class Request:
    """A request from the peer; answer it with :meth:`Connection.respond` or ``respond_error``."""

    id: RequestId
    method: str
    params: Any


@attrs.frozen
class Notification:
    """A notification from the peer (never answered)."""

    method: str
    params: Any


@attrs.frozen
class Response:
    """The peer's answer to a request this side sent (``error`` is ``None`` on success)."""

    id: int
    method: str
    result: Any = None
    error: Mapping[str, Any] | None = None


@attrs.frozen
class Invalid:
    """A frame that is not a valid message; send ``reply`` if it is not ``None``."""

    reason: str
    reply: bytes | None


Event: TypeAlias = Request | Notification | Response | Invalid


@attrs.frozen
class ConnectionStatistics:
    """A snapshot of the bookkeeping."""

    incoming_open: int
    outgoing_open: int


_Side: TypeAlias = Literal["incoming", "outgoing"]
_State: TypeAlias = Literal["absent", "open"]
_Move: TypeAlias = Literal["receive", "answer", "send", "response", "abandon"]

#: (side, state, move) -> the new state. Every legal move of one request id; an "absent" id
#: is one with no entry in the side's table, so a closed request leaves nothing behind.
_TRANSITIONS: Final[dict[tuple[_Side, _State, _Move], _State]] = {
    ("incoming", "absent", "receive"): "open",
    ("incoming", "open", "answer"): "absent",
    ("outgoing", "absent", "send"): "open",
    ("outgoing", "open", "response"): "absent",
    ("outgoing", "open", "abandon"): "absent",
}

_Key: TypeAlias = tuple[str, int | str | None]


def _key(request_id: RequestId) -> _Key:
    # 0 and "0" differ; the type is part of the key.
    return (type(request_id).__name__, request_id)


def _valid_id(value: object) -> bool:
    return (
        value is None
        or isinstance(value, str)
        or (isinstance(value, int) and not isinstance(value, bool))
    )


@final
class Connection:
    """The JSON-RPC state of one connection (either side; the ACP agent here)."""

    __slots__ = ("_ids", "_open")

    def __init__(self) -> None:
        # side -> the open requests (their key -> their method); absent ids have no entry.
        self._open: dict[_Side, dict[_Key, str]] = {"incoming": {}, "outgoing": {}}
        self._ids = itertools.count()

    # -- the state machine ------------------------------------------------------------------

    def _state(self, side: _Side, request_id: RequestId) -> _State:
        return "open" if _key(request_id) in self._open[side] else "absent"

    def _move(self, side: _Side, request_id: RequestId, move: _Move, method: str = "") -> str:
        """Make ``move`` on one request: the table gives the new state, which is written here.

        Returns the request's method (``method`` when it opens, the stored one when it closes).

        Raises:
            ProtocolStateError: the table has no such move from the request's state; nothing
                changed.
        """
        state = self._state(side, request_id)
        new = _TRANSITIONS.get((side, state, move))
        if new is None:
            raise ProtocolStateError(
                f"cannot {move} {side} request {request_id!r}: it is {state}; every request is "
                f"answered exactly once"
            )
        requests = self._open[side]
        if new == "open":
            requests[_key(request_id)] = method
            return method
        return requests.pop(_key(request_id))

    def statistics(self) -> ConnectionStatistics:
        """How many requests are open each way."""
        return ConnectionStatistics(len(self._open["incoming"]), len(self._open["outgoing"]))

    # -- reading ------------------------------------------------------------------------------

    def receive(self, frame: bytes | Oversized) -> Event:
        """What one frame means (see the module rules)."""
        if isinstance(frame, Oversized):
            return self._invalid(
                ErrorCode.PARSE_ERROR,
                f"parse error: the frame is larger than {frame.limit} bytes and was dropped",
            )
        try:
            message = decode_frame(frame)
        except ValueError as exc:
            return self._invalid(ErrorCode.PARSE_ERROR, f"parse error: {exc}")
        problem = find_problem(message)
        if problem is not None:
            return self._refused(message, f"parse error: {problem}")
        if isinstance(message, list):
            return self._invalid(
                ErrorCode.INVALID_REQUEST, "invalid request: batches are not supported"
            )
        if not isinstance(message, dict):
            return self._invalid(
                ErrorCode.INVALID_REQUEST,
                f"invalid request: a message is a JSON object, got {type(message).__name__}",
            )
        has_id = "id" in message
        raw_id = message.get("id")
        if not _valid_id(raw_id):
            return self._invalid(
                ErrorCode.INVALID_REQUEST,
                f"invalid request: an id is a string, an integer or null; got {raw_id!r}",
            )
        request_id: RequestId = raw_id
        if message.get("jsonrpc") != "2.0":
            return self._invalid(
                ErrorCode.INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"', request_id
            )
        if "method" not in message:
            return self._response(message, has_id, request_id)
        method = message["method"]
        if not isinstance(method, str):
            return self._invalid(
                ErrorCode.INVALID_REQUEST, "invalid request: the method is a string", request_id
            )
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            reason = "invalid request: params are an object or an array"
            if not has_id:
                return Invalid(f"{reason} (a notification; not answered)", None)
            return self._invalid(ErrorCode.INVALID_REQUEST, reason, request_id)
        if not has_id:
            return Notification(method, params)
        if self.is_open(request_id):
            # Answering with this id would look like the answer to the open request.
            return self._invalid(
                ErrorCode.INVALID_REQUEST,
                f"invalid request: id {request_id!r} is in use by a request not yet answered",
            )
        self._move("incoming", request_id, "receive", method)
        return Request(request_id, method, params)

    def _response(self, message: dict[str, Any], has_id: bool, request_id: RequestId) -> Event:
        has_result, has_error = "result" in message, "error" in message
        if not has_id or has_result == has_error:
            return self._invalid(
                ErrorCode.INVALID_REQUEST,
                "invalid request: no method (a response needs an id and one of result, error)",
                request_id,
            )
        if not self._awaits(request_id):
            return Invalid(f"a response to id {request_id!r}, which this side did not send", None)
        method = self._move("outgoing", request_id, "response")
        error = message.get("error")
        if has_error and not isinstance(error, dict):
            error = {"code": ErrorCode.INTERNAL_ERROR, "message": f"malformed error {error!r}"}
        return Response(request_id, method, message.get("result"), error)

    def _refused(self, message: Any, reason: str) -> Event:
        if not isinstance(message, dict):
            return self._invalid(ErrorCode.PARSE_ERROR, reason)
        raw_id = message.get("id")
        clean = _valid_id(raw_id) and find_problem(raw_id) is None
        if "id" not in message and "method" in message:
            return Invalid(f"{reason} (a notification; not answered)", None)
        if "method" not in message and ("result" in message or "error" in message):
            if not (clean and self._awaits(raw_id)):
                return Invalid(f"{reason} (a response to no open request; dropped)", None)
            # The peer did answer: close the request as failed rather than leave it open.
            method = self._move("outgoing", raw_id, "response")
            error = {"code": ErrorCode.INVALID_REQUEST, "message": f"refused: {reason}"}
            return Response(raw_id, method, None, error)
        if not clean or self.is_open(raw_id) or "method" not in message:
            return self._invalid(ErrorCode.PARSE_ERROR, reason)
        return self._invalid(ErrorCode.PARSE_ERROR, reason, raw_id)

    def _awaits(self, request_id: object) -> TypeGuard[int]:
        # Only ints are sent as ids (and the key tells True from 1), so no other id is open.
        return isinstance(request_id, int) and self._state("outgoing", request_id) == "open"

    def _invalid(self, code: int, message: str, request_id: RequestId = None) -> Invalid:
        # The id of a refused frame is never open, so this answer is not bookkept.
        return Invalid(message, encode_frame(_error_message(request_id, code, message, None)))

    # -- writing ------------------------------------------------------------------------------

    def respond(self, request_id: RequestId, result: Any) -> bytes:
        """The frame answering the open request ``request_id`` with ``result``.

        Raises:
            ProtocolStateError: the request is not open (never received, or answered).
        """
        return self._answer(request_id, {"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(
        self, request_id: RequestId, code: int, message: str, data: Any = None
    ) -> bytes:
        """The frame answering the open request ``request_id`` with an error.

        Raises:
            ProtocolStateError: the request is not open.
        """
        return self._answer(request_id, _error_message(request_id, code, message, data))

    def _answer(self, request_id: RequestId, message: dict[str, Any]) -> bytes:
        # Invariant: encoded before the move, so a failure to encode changes nothing.
        frame = encode_frame(message)
        self._move("incoming", request_id, "answer")
        return frame

    def is_open(self, request_id: RequestId) -> bool:
        """Whether the peer's request ``request_id`` awaits its answer."""
        return self._state("incoming", request_id) == "open"

    def request(self, method: str, params: Any) -> tuple[int, bytes]:
        """A new request to the peer: its id and its frame."""
        request_id = next(self._ids)
        frame = encode_frame(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        )
        self._move("outgoing", request_id, "send", method)
        return request_id, frame

    def abandon(self, request_id: int) -> None:
        """Stop waiting for the response to ``request_id`` (a late one is dropped).

        Raises:
            ProtocolStateError: the request is not open.
        """
        self._move("outgoing", request_id, "abandon")

    def notify(self, method: str, params: Any) -> bytes:
        """The frame of a notification to the peer."""
        return encode_frame(_notification(method, params))

    def notification_template(self, method: str, params: Any) -> TextTemplate:
        """The notifications ``method`` whose ``params`` differ only in one string:
        ``params`` holds :data:`._framing.TEXT_SLOT` as its last string, and
        ``template.frame(text)`` is the frame :meth:`notify` makes with ``text`` there."""
        return TextTemplate(_notification(method, params))


def _notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _error_message(request_id: RequestId, code: int, message: str, data: Any) -> dict[str, Any]:
    error: dict[str, Any] = {"code": int(code), "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}
