"""The keys of the services the agent layer provides: ``agents``, ``tools`` and ``compaction``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..kernel import ServiceKey

if TYPE_CHECKING:
    from ._compaction import Compactor
    from ._registry import AgentRegistry
    from ._tools import ToolRegistry

__all__ = ["AGENTS", "COMPACTION", "TOOLS"]

#: The key of the ``agents`` service (provided by :class:`AgentLoop`).
AGENTS: Final[ServiceKey[AgentRegistry]] = ServiceKey("agents")

#: The key of the ``tools`` service (provided by :data:`tools_plugin`).
TOOLS: Final[ServiceKey[ToolRegistry]] = ServiceKey("tools")

#: The key of the ``compaction`` policy (provided by :class:`CompactionPlugin`).
COMPACTION: Final[ServiceKey[Compactor]] = ServiceKey("compaction")
