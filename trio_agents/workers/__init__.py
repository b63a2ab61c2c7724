"""Workers and the work queue: every queued prompt runs in exactly one live worker
(``docs/howto-workers.rst``)."""

from ._client import PromptStatus as PromptStatus
from ._client import Remote as Remote
from ._client import RemotePrompt as RemotePrompt
from ._client import open_remote as open_remote
from ._errors import PromptCancelledError as PromptCancelledError
from ._errors import PromptFailedError as PromptFailedError
from ._errors import PromptIdInUseError as PromptIdInUseError
from ._errors import PromptNotFoundError as PromptNotFoundError
from ._errors import QueueFormatError as QueueFormatError
from ._records import AgentTemplate as AgentTemplate
from ._records import CancelRequested as CancelRequested
from ._records import PromptClaimed as PromptClaimed
from ._records import PromptFailed as PromptFailed
from ._records import TurnInterrupted as TurnInterrupted
from ._records import WorkerDrained as WorkerDrained
from ._records import WorkerLost as WorkerLost
from ._worker import Worker as Worker
from ._worker import WorkerStatistics as WorkerStatistics
from ._worker import serve_worker as serve_worker

__all__ = [
    "AgentTemplate",
    "CancelRequested",
    "PromptCancelledError",
    "PromptClaimed",
    "PromptFailed",
    "PromptFailedError",
    "PromptIdInUseError",
    "PromptNotFoundError",
    "PromptStatus",
    "QueueFormatError",
    "Remote",
    "RemotePrompt",
    "TurnInterrupted",
    "Worker",
    "WorkerDrained",
    "WorkerLost",
    "WorkerStatistics",
    "open_remote",
    "serve_worker",
]
