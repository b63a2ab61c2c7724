"""Agents: inbox, turns, tools, the registry and its handles (``docs/agents.rst``)."""

from ._agent import Agent as Agent
from ._agent import AgentStatistics as AgentStatistics
from ._approval import ApprovalRequest as ApprovalRequest
from ._approval import Approver as Approver
from ._approval import Decision as Decision
from ._approval import Refusal as Refusal
from ._approval import standing_answers as standing_answers
from ._budget import Budget as Budget
from ._caller import Caller as Caller
from ._compaction import COMPACTION as COMPACTION
from ._compaction import Compaction as Compaction
from ._compaction import CompactionError as CompactionError
from ._compaction import CompactionPlugin as CompactionPlugin
from ._compaction import CompactionRequest as CompactionRequest
from ._compaction import Compactor as Compactor
from ._compaction import SummarizingCompactor as SummarizingCompactor
from ._config import AgentConfig as AgentConfig
from ._definitions import AgentDefinition as AgentDefinition
from ._definitions import DefinitionNameInUseError as DefinitionNameInUseError
from ._driver import AgentDriver as AgentDriver
from ._driver import Built as Built
from ._errors import AgentClosedError as AgentClosedError
from ._errors import AgentIdInUseError as AgentIdInUseError
from ._errors import MessageDroppedError as MessageDroppedError
from ._errors import ModelRequiredError as ModelRequiredError
from ._errors import TurnFailedError as TurnFailedError
from ._events import AgentCancelRequested as AgentCancelRequested
from ._events import AgentCreated as AgentCreated
from ._events import AgentDisposed as AgentDisposed
from ._events import AgentOutput as AgentOutput
from ._events import AgentStatusChanged as AgentStatusChanged
from ._events import TaskEnded as TaskEnded
from ._events import TaskStarted as TaskStarted
from ._factory import AgentFactory as AgentFactory
from ._factory import AgentRequest as AgentRequest
from ._factory import DefaultAgentFactory as DefaultAgentFactory
from ._handle import AgentHandle as AgentHandle
from ._history import TurnMark as TurnMark
from ._inbox import Lane as Lane
from ._inbox import MessageId as MessageId
from ._inbox import QueuedMessage as QueuedMessage
from ._like import AgentLike as AgentLike
from ._loop import AgentLoop as AgentLoop
from ._loop import DeclaredAgent as DeclaredAgent
from ._loop import agent_loop as agent_loop
from ._meter import ContextUsage as ContextUsage
from ._output import OutputError as OutputError
from ._output import OutputSchema as OutputSchema
from ._registry import AGENTS as AGENTS
from ._registry import AgentRegistry as AgentRegistry
from ._registry import AgentScope as AgentScope
from ._results import ToolResult as ToolResult
from ._runtime import open_runtime as open_runtime
from ._status import AgentStatus as AgentStatus
from ._tool_signature import tool as tool
from ._tools import TOOLS as TOOLS
from ._tools import NoCallingAgentError as NoCallingAgentError
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolGuard as ToolGuard
from ._tools import ToolNameInUseError as ToolNameInUseError
from ._tools import ToolRegistry as ToolRegistry
from ._tools import tools_plugin as tools_plugin
from ._usage import AgentUsage as AgentUsage

__all__ = [
    "AGENTS",
    "COMPACTION",
    "TOOLS",
    "Agent",
    "AgentCancelRequested",
    "AgentClosedError",
    "AgentConfig",
    "AgentCreated",
    "AgentDefinition",
    "AgentDisposed",
    "AgentDriver",
    "AgentFactory",
    "AgentHandle",
    "AgentIdInUseError",
    "AgentLike",
    "AgentLoop",
    "AgentOutput",
    "AgentRegistry",
    "AgentRequest",
    "AgentScope",
    "AgentStatistics",
    "AgentStatus",
    "AgentStatusChanged",
    "AgentUsage",
    "ApprovalRequest",
    "Approver",
    "Budget",
    "Built",
    "Caller",
    "Compaction",
    "CompactionError",
    "CompactionPlugin",
    "CompactionRequest",
    "Compactor",
    "ContextUsage",
    "Decision",
    "DeclaredAgent",
    "DefaultAgentFactory",
    "DefinitionNameInUseError",
    "Lane",
    "MessageDroppedError",
    "MessageId",
    "ModelRequiredError",
    "NoCallingAgentError",
    "OutputError",
    "OutputSchema",
    "QueuedMessage",
    "Refusal",
    "SummarizingCompactor",
    "TaskEnded",
    "TaskStarted",
    "Tool",
    "ToolContext",
    "ToolGuard",
    "ToolNameInUseError",
    "ToolRegistry",
    "ToolResult",
    "TurnFailedError",
    "TurnMark",
    "agent_loop",
    "open_runtime",
    "standing_answers",
    "tool",
    "tools_plugin",
]
