"""The Agent Client Protocol: a sans-IO JSON-RPC core and the trio bridge (``docs/editors.rst``)."""

from ._bridge import AcpBridge as AcpBridge
from ._bridge import BridgeStatistics as BridgeStatistics

__all__ = [
    "AcpBridge",
    "BridgeStatistics",
]
