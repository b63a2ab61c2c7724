"""The keys of the services the agent layer provides: ``agents`` and ``tools``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..kernel import ServiceKey

if TYPE_CHECKING:
    from ._registry import AgentRegistry
    from ._tools import ToolRegistry

__all__ = ["AGENTS", "TOOLS"]

#: The key of the ``agents`` service (provided by :class:`AgentLoop`).
AGENTS: Final[ServiceKey[AgentRegistry]] = ServiceKey("agents")

#: The key of the ``tools`` service (provided by :data:`tools_plugin`).
TOOLS: Final[ServiceKey[ToolRegistry]] = ServiceKey("tools")
