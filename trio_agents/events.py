"""Every live event of trio_agents in one place (``docs/agents.rst``); also at ``ta``."""

from .agent import AgentCancelRequested as AgentCancelRequested
from .agent import AgentCreated as AgentCreated
from .agent import AgentDisposed as AgentDisposed
from .agent import AgentOutput as AgentOutput
from .agent import AgentStatusChanged as AgentStatusChanged
from .agent import AgentThought as AgentThought
from .agent import HookFailed as HookFailed
from .agent import TaskEnded as TaskEnded
from .agent import TaskStarted as TaskStarted
from .kernel import FiberFailed as FiberFailed
from .kernel import ListenerFailed as ListenerFailed
from .kernel import PluginReloaded as PluginReloaded
from .session import SessionAppended as SessionAppended
from .session import SessionCreated as SessionCreated
from .session import SessionDisposed as SessionDisposed
from .session import SessionFlushed as SessionFlushed
from .shell import JobDone as JobDone

__all__ = [
    "AgentCancelRequested",
    "AgentCreated",
    "AgentDisposed",
    "AgentOutput",
    "AgentStatusChanged",
    "AgentThought",
    "FiberFailed",
    "HookFailed",
    "JobDone",
    "ListenerFailed",
    "PluginReloaded",
    "SessionAppended",
    "SessionCreated",
    "SessionDisposed",
    "SessionFlushed",
    "TaskEnded",
    "TaskStarted",
]
