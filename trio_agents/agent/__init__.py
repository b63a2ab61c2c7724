"""Agents: inbox, turns, tools, the registry and its handles (``docs/agents.rst``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it need of it and users do not: ``HOOK_POINTS`` and ``HookPolicy`` (the command's hooks),
``TurnSnapshot`` (the command's tree view), ``mode_named`` and ``standing_answers`` (the front
ends).
"""

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
from ._events import AgentThought as AgentThought
from ._events import TaskEnded as TaskEnded
from ._events import TaskStarted as TaskStarted
from ._factory import AgentFactory as AgentFactory
from ._factory import AgentRequest as AgentRequest
from ._factory import DefaultAgentFactory as DefaultAgentFactory
from ._handle import AgentHandle as AgentHandle
from ._hook_points import AGENT_DISPOSE as AGENT_DISPOSE
from ._hook_points import CHILD_END as CHILD_END
from ._hook_points import CHILD_START as CHILD_START
from ._hook_points import HOOK_POINTS as HOOK_POINTS
from ._hook_points import POST_COMPACT as POST_COMPACT
from ._hook_points import POST_MODEL as POST_MODEL
from ._hook_points import POST_TOOL as POST_TOOL
from ._hook_points import PRE_COMPACT as PRE_COMPACT
from ._hook_points import PRE_MODEL as PRE_MODEL
from ._hook_points import PRE_TOOL as PRE_TOOL
from ._hook_points import PROMPT_ACCEPTED as PROMPT_ACCEPTED
from ._hook_points import TURN_END as TURN_END
from ._hook_points import TURN_START as TURN_START
from ._hook_points import AgentDispose as AgentDispose
from ._hook_points import ChildEnd as ChildEnd
from ._hook_points import ChildStart as ChildStart
from ._hook_points import HookPoint as HookPoint
from ._hook_points import PostCompact as PostCompact
from ._hook_points import PostModel as PostModel
from ._hook_points import PostTool as PostTool
from ._hook_points import PreCompact as PreCompact
from ._hook_points import PreModel as PreModel
from ._hook_points import PreTool as PreTool
from ._hook_points import PromptAccepted as PromptAccepted
from ._hook_points import TurnEnd as TurnEnd
from ._hook_points import TurnStart as TurnStart
from ._hooks import HOOKS as HOOKS
from ._hooks import HookFailed as HookFailed
from ._hooks import HookPolicy as HookPolicy
from ._hooks import HookRefusedError as HookRefusedError
from ._hooks import HookRegistry as HookRegistry
from ._inbox import MessageId as MessageId
from ._inbox import QueuedMessage as QueuedMessage
from ._like import AgentLike as AgentLike
from ._loop import DeclaredAgent as DeclaredAgent
from ._meter import ContextUsage as ContextUsage
from ._modes import MODES as MODES
from ._modes import Mode as Mode
from ._modes import UnknownModeError as UnknownModeError
from ._modes import mode_named as mode_named
from ._output import OutputError as OutputError
from ._output import OutputSchema as OutputSchema
from ._registry import AGENTS as AGENTS
from ._registry import AgentRegistry as AgentRegistry
from ._registry import AgentScope as AgentScope
from ._results import ToolResult as ToolResult
from ._runtime import open_runtime as open_runtime
from ._snapshot import AgentSnapshot as AgentSnapshot
from ._snapshot import TurnSnapshot as TurnSnapshot
from ._status import AgentStatus as AgentStatus
from ._tool_signature import tool as tool
from ._tools import TOOLS as TOOLS
from ._tools import NoCallingAgentError as NoCallingAgentError
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolNameInUseError as ToolNameInUseError
from ._tools import ToolRegistry as ToolRegistry
from ._usage import AgentUsage as AgentUsage

__all__ = [
    "AGENTS",
    "AGENT_DISPOSE",
    "CHILD_END",
    "CHILD_START",
    "COMPACTION",
    "HOOKS",
    "MODES",
    "POST_COMPACT",
    "POST_MODEL",
    "POST_TOOL",
    "PRE_COMPACT",
    "PRE_MODEL",
    "PRE_TOOL",
    "PROMPT_ACCEPTED",
    "TOOLS",
    "TURN_END",
    "TURN_START",
    "Agent",
    "AgentCancelRequested",
    "AgentClosedError",
    "AgentConfig",
    "AgentCreated",
    "AgentDefinition",
    "AgentDispose",
    "AgentDisposed",
    "AgentDriver",
    "AgentFactory",
    "AgentHandle",
    "AgentIdInUseError",
    "AgentLike",
    "AgentOutput",
    "AgentRegistry",
    "AgentRequest",
    "AgentScope",
    "AgentSnapshot",
    "AgentStatistics",
    "AgentStatus",
    "AgentStatusChanged",
    "AgentThought",
    "AgentUsage",
    "ApprovalRequest",
    "Approver",
    "Budget",
    "Built",
    "Caller",
    "ChildEnd",
    "ChildStart",
    "Compaction",
    "CompactionError",
    "CompactionRequest",
    "Compactor",
    "ContextUsage",
    "Decision",
    "DeclaredAgent",
    "DefaultAgentFactory",
    "DefinitionNameInUseError",
    "HookFailed",
    "HookPoint",
    "HookRefusedError",
    "HookRegistry",
    "MessageDroppedError",
    "MessageId",
    "Mode",
    "ModelRequiredError",
    "NoCallingAgentError",
    "OutputError",
    "OutputSchema",
    "PostCompact",
    "PostModel",
    "PostTool",
    "PreCompact",
    "PreModel",
    "PreTool",
    "PromptAccepted",
    "QueuedMessage",
    "Refusal",
    "SummarizingCompactor",
    "TaskEnded",
    "TaskStarted",
    "Tool",
    "ToolContext",
    "ToolNameInUseError",
    "ToolRegistry",
    "ToolResult",
    "TurnEnd",
    "TurnFailedError",
    "TurnStart",
    "UnknownModeError",
    "open_runtime",
    "tool",
]
