"""The Agent Client Protocol: a sans-IO JSON-RPC core and the trio bridge (``docs/editors.rst``)."""

from ._bridge import AcpBridge as AcpBridge
from ._bridge import BridgeStatistics as BridgeStatistics
from ._framing import LineFramer as LineFramer
from ._framing import Oversized as Oversized
from ._framing import encode_frame as encode_frame
from ._jsonrpc import Connection as Connection
from ._jsonrpc import ConnectionStatistics as ConnectionStatistics
from ._jsonrpc import ErrorCode as ErrorCode
from ._jsonrpc import Invalid as Invalid
from ._jsonrpc import Notification as Notification
from ._jsonrpc import ProtocolStateError as ProtocolStateError
from ._jsonrpc import Request as Request
from ._jsonrpc import RequestId as RequestId
from ._jsonrpc import Response as Response
from ._jsonrpc import RpcError as RpcError

__all__ = [
    "AcpBridge",
    "BridgeStatistics",
    "Connection",
    "ConnectionStatistics",
    "ErrorCode",
    "Invalid",
    "LineFramer",
    "Notification",
    "Oversized",
    "ProtocolStateError",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "encode_frame",
]
