"""trio_agents: long-lived LLM agents on trio, where every piece of work has one owner.

The names most programs need are re-exported here; each layer's package
(:mod:`trio_agents.kernel`, :mod:`~trio_agents.cancel`, :mod:`~trio_agents.session`,
:mod:`~trio_agents.model`, :mod:`~trio_agents.agent`) has the rest.
"""

from . import acp as acp
from . import agent as agent
from . import cancel as cancel
from . import events as events
from . import kernel as kernel
from . import mcp as mcp
from . import model as model
from . import session as session
from . import shell as shell
from . import workers as workers
from . import workspace as workspace
from ._errors import TrioAgentsError as TrioAgentsError
from .agent import AGENTS as AGENTS
from .agent import HOOKS as HOOKS
from .agent import TOOLS as TOOLS
from .agent import Agent as Agent
from .agent import AgentClosedError as AgentClosedError
from .agent import AgentDefinition as AgentDefinition
from .agent import AgentHandle as AgentHandle
from .agent import AgentIdInUseError as AgentIdInUseError
from .agent import AgentStatus as AgentStatus
from .agent import ApprovalRequest as ApprovalRequest
from .agent import Approver as Approver
from .agent import Budget as Budget
from .agent import Decision as Decision
from .agent import HookRefusedError as HookRefusedError
from .agent import MessageDroppedError as MessageDroppedError
from .agent import ModelRequiredError as ModelRequiredError
from .agent import NoCallingAgentError as NoCallingAgentError
from .agent import OutputError as OutputError
from .agent import OutputSchema as OutputSchema
from .agent import Refusal as Refusal
from .agent import Tool as Tool
from .agent import ToolContext as ToolContext
from .agent import ToolNameInUseError as ToolNameInUseError
from .agent import ToolRegistry as ToolRegistry
from .agent import ToolResult as ToolResult
from .agent import TurnFailedError as TurnFailedError
from .agent import open_runtime as open_runtime
from .agent import tool as tool
from .cancel import BudgetExhausted as BudgetExhausted
from .cancel import CancelCause as CancelCause
from .cancel import CauseScope as CauseScope
from .cancel import DisposedCancel as DisposedCancel
from .cancel import HookCancel as HookCancel
from .cancel import LeaseLost as LeaseLost
from .cancel import ParentCancel as ParentCancel
from .cancel import UserCancel as UserCancel
from .cancel import current_cause as current_cause
from .events import AgentCancelRequested as AgentCancelRequested
from .events import AgentCreated as AgentCreated
from .events import AgentDisposed as AgentDisposed
from .events import AgentOutput as AgentOutput
from .events import AgentStatusChanged as AgentStatusChanged
from .events import FiberFailed as FiberFailed
from .events import HookFailed as HookFailed
from .events import JobDone as JobDone
from .events import ListenerFailed as ListenerFailed
from .events import PluginReloaded as PluginReloaded
from .events import SessionAppended as SessionAppended
from .events import SessionCreated as SessionCreated
from .events import SessionDisposed as SessionDisposed
from .events import SessionFlushed as SessionFlushed
from .events import TaskEnded as TaskEnded
from .events import TaskStarted as TaskStarted
from .kernel import Context as Context
from .kernel import Fiber as Fiber
from .kernel import FiberState as FiberState
from .kernel import ServiceKey as ServiceKey
from .kernel import open_root as open_root
from .model import MODELS as MODELS
from .model import Model as Model
from .model import ScriptedModel as ScriptedModel
from .model import model_from_spec as model_from_spec
from .session import SESSIONS as SESSIONS
from .session import JsonlStore as JsonlStore
from .session import MemoryStore as MemoryStore
from .session import SessionStore as SessionStore
from .session import SqliteStore as SqliteStore
from .shell import SHELL as SHELL
from .workers import open_remote as open_remote
from .workers import serve_worker as serve_worker

__all__ = [
    "AGENTS",
    "HOOKS",
    "MODELS",
    "SESSIONS",
    "SHELL",
    "TOOLS",
    "Agent",
    "AgentCancelRequested",
    "AgentClosedError",
    "AgentCreated",
    "AgentDefinition",
    "AgentDisposed",
    "AgentHandle",
    "AgentIdInUseError",
    "AgentOutput",
    "AgentStatus",
    "AgentStatusChanged",
    "ApprovalRequest",
    "Approver",
    "Budget",
    "BudgetExhausted",
    "CancelCause",
    "CauseScope",
    "Context",
    "Decision",
    "DisposedCancel",
    "Fiber",
    "FiberFailed",
    "FiberState",
    "HookCancel",
    "HookFailed",
    "HookRefusedError",
    "JobDone",
    "JsonlStore",
    "LeaseLost",
    "ListenerFailed",
    "MemoryStore",
    "MessageDroppedError",
    "Model",
    "ModelRequiredError",
    "NoCallingAgentError",
    "OutputError",
    "OutputSchema",
    "ParentCancel",
    "PluginReloaded",
    "Refusal",
    "ScriptedModel",
    "ServiceKey",
    "SessionAppended",
    "SessionCreated",
    "SessionDisposed",
    "SessionFlushed",
    "SessionStore",
    "SqliteStore",
    "TaskEnded",
    "TaskStarted",
    "Tool",
    "ToolContext",
    "ToolNameInUseError",
    "ToolRegistry",
    "ToolResult",
    "TrioAgentsError",
    "TurnFailedError",
    "UserCancel",
    "acp",
    "agent",
    "cancel",
    "current_cause",
    "events",
    "kernel",
    "mcp",
    "model",
    "model_from_spec",
    "open_remote",
    "open_root",
    "open_runtime",
    "serve_worker",
    "session",
    "shell",
    "tool",
    "workers",
    "workspace",
]
