"""The base layer: what every layer uses, below the kernel (``CONTRIBUTING.md``, "The layers").

Private to the package: state tables, the strict structuring policy and its wording, tag
registries for tagged unions, the low-level one-shot signal, the fold of spans still open, a
pool of blocking database connections used from worker threads, and how a PostgreSQL
connection is opened, and the characters of a name that reaches a model API in a tool's
name. It imports nothing of the package but the error base, and any package may
import it (``tests/project/test_layers.py``); no other package's private module is imported
across packages.
"""

from ._connections import BlockingConnection as BlockingConnection
from ._connections import ThreadConnections as ThreadConnections
from ._names import api_name_refusal as api_name_refusal
from ._postgres import close_quietly as close_quietly
from ._postgres import connect_postgres as connect_postgres
from ._primitives import Signal as Signal
from ._primitives import Wake as Wake
from ._spans import still_open as still_open
from ._states import InvalidTransitionError as InvalidTransitionError
from ._states import StateTable as StateTable
from ._strict import StrictConverter as StrictConverter
from ._tags import TagRegistry as TagRegistry
from ._tags import snake_case as snake_case
from ._wording import StrictTypeError as StrictTypeError
from ._wording import Wording as Wording
from ._wording import count_problems as count_problems
from ._wording import json_type as json_type
from ._wording import list_problems as list_problems

__all__ = [
    "BlockingConnection",
    "InvalidTransitionError",
    "Signal",
    "StateTable",
    "StrictConverter",
    "StrictTypeError",
    "TagRegistry",
    "ThreadConnections",
    "Wake",
    "Wording",
    "api_name_refusal",
    "close_quietly",
    "connect_postgres",
    "count_problems",
    "json_type",
    "list_problems",
    "snake_case",
    "still_open",
]
