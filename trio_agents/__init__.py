"""trio_agents: long-lived LLM agents on trio, where every piece of work has one owner."""

from . import cancel as cancel
from . import kernel as kernel
from ._errors import TrioAgentsError as TrioAgentsError
from .cancel import CancelCause as CancelCause
from .cancel import CauseScope as CauseScope
from .cancel import DisposedCancel as DisposedCancel
from .cancel import HookCancel as HookCancel
from .cancel import ParentCancel as ParentCancel
from .cancel import UserCancel as UserCancel
from .cancel import current_cause as current_cause
from .kernel import Context as Context
from .kernel import Fiber as Fiber
from .kernel import FiberState as FiberState
from .kernel import open_root as open_root

__all__ = [
    "CancelCause",
    "CauseScope",
    "Context",
    "DisposedCancel",
    "Fiber",
    "FiberState",
    "HookCancel",
    "ParentCancel",
    "TrioAgentsError",
    "UserCancel",
    "cancel",
    "current_cause",
    "kernel",
    "open_root",
]
