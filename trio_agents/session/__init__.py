"""Sessions: records, the Session, the SessionStore service, backends (``docs/sessions.rst``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it and backends need of it and users do not: ``Stored`` (a backend's ``_read``),
``parse_store_spec`` (the command's ``--store``), ``check_session_id``,
``check_recordable_cause`` and ``Ride`` (a statement of the work queue riding in a
``PostgresStore`` write batch).
"""

from ._backend import Stored as Stored
from ._convert import check_recordable_cause as check_recordable_cause
from ._convert import dump_record as dump_record
from ._convert import load_record as load_record
from ._convert import register_cause as register_cause
from ._errors import InvalidSessionIdError as InvalidSessionIdError
from ._errors import SessionClosedError as SessionClosedError
from ._errors import SessionExistsError as SessionExistsError
from ._errors import SessionFormatError as SessionFormatError
from ._errors import SessionIdInUseError as SessionIdInUseError
from ._errors import SessionInUseError as SessionInUseError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import SessionWriteError as SessionWriteError
from ._events import SessionAppended as SessionAppended
from ._events import SessionCreated as SessionCreated
from ._events import SessionDisposed as SessionDisposed
from ._events import SessionFlushed as SessionFlushed
from ._events import SessionWriteFailed as SessionWriteFailed
from ._ids import check_session_id as check_session_id
from ._ids import default_root as default_root
from ._jsonl import JsonlStore as JsonlStore
from ._jsonl import SessionRepair as SessionRepair
from ._keys import SESSIONS as SESSIONS
from ._memory import MemoryStore as MemoryStore
from ._postgres import PostgresStore as PostgresStore
from ._postgres import Ride as Ride
from ._postgres import SessionLeaseLostError as SessionLeaseLostError
from ._records import AgentConfigured as AgentConfigured
from ._records import AssistantMessage as AssistantMessage
from ._records import ChildEnded as ChildEnded
from ._records import ChildStarted as ChildStarted
from ._records import Compacted as Compacted
from ._records import FileEdited as FileEdited
from ._records import ImageAttached as ImageAttached
from ._records import InboxSpliced as InboxSpliced
from ._records import ModeChanged as ModeChanged
from ._records import ModelUsage as ModelUsage
from ._records import OutputProduced as OutputProduced
from ._records import Record as Record
from ._records import StopReason as StopReason
from ._records import ToolApproval as ToolApproval
from ._records import ToolCall as ToolCall
from ._records import ToolCallEnded as ToolCallEnded
from ._records import TurnEnded as TurnEnded
from ._records import TurnStarted as TurnStarted
from ._records import UserMessage as UserMessage
from ._records import register_record as register_record
from ._session import Session as Session
from ._session import SessionStatistics as SessionStatistics
from ._spec import StoreSpecError as StoreSpecError
from ._spec import parse_store_spec as parse_store_spec
from ._spec import store_from_spec as store_from_spec
from ._sqlite import SqliteStore as SqliteStore
from ._state import SessionState as SessionState
from ._store import SessionStore as SessionStore
from ._store import StoreStatistics as StoreStatistics
from ._summary import SessionInfo as SessionInfo
from ._tree import SessionTree as SessionTree

__all__ = [
    "SESSIONS",
    "AgentConfigured",
    "AssistantMessage",
    "ChildEnded",
    "ChildStarted",
    "Compacted",
    "FileEdited",
    "ImageAttached",
    "InboxSpliced",
    "InvalidSessionIdError",
    "JsonlStore",
    "MemoryStore",
    "ModeChanged",
    "ModelUsage",
    "OutputProduced",
    "PostgresStore",
    "Record",
    "Session",
    "SessionAppended",
    "SessionClosedError",
    "SessionCreated",
    "SessionDisposed",
    "SessionExistsError",
    "SessionFlushed",
    "SessionFormatError",
    "SessionIdInUseError",
    "SessionInUseError",
    "SessionInfo",
    "SessionLeaseLostError",
    "SessionNotFoundError",
    "SessionRepair",
    "SessionState",
    "SessionStatistics",
    "SessionStore",
    "SessionTree",
    "SessionWriteError",
    "SessionWriteFailed",
    "SqliteStore",
    "StopReason",
    "StoreSpecError",
    "StoreStatistics",
    "ToolApproval",
    "ToolCall",
    "ToolCallEnded",
    "TurnEnded",
    "TurnStarted",
    "UserMessage",
    "default_root",
    "dump_record",
    "load_record",
    "register_cause",
    "register_record",
    "store_from_spec",
]
