"""The workspace: file tools on a file-access seam, the plan tool, project instructions and
prompt commands (``docs/tools.rst``, ``docs/editors.rst``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the front
ends need of it and users do not: ``ARGUMENTS``, ``parse_command`` and ``prompt_commands`` (the
ACP bridge's commands), ``format_plan`` and ``plan_entries`` (the plan as the command and the
bridge show it).
"""

from ._access import FILES as FILES
from ._access import FileAccess as FileAccess
from ._access import FileAccessError as FileAccessError
from ._access import FileSystem as FileSystem
from ._access import LocalFiles as LocalFiles
from ._commands import ARGUMENTS as ARGUMENTS
from ._commands import PromptCommand as PromptCommand
from ._commands import parse_command as parse_command
from ._commands import prompt_commands as prompt_commands
from ._instructions import project_instructions as project_instructions
from ._plan import PlanEntry as PlanEntry
from ._plan import format_plan as format_plan
from ._plan import plan_entries as plan_entries
from ._plan import plan_of as plan_of
from ._plan import tool_plan as tool_plan
from ._tool_files import FileChanged as FileChanged
from ._tool_files import ToolFiles as ToolFiles
from ._tool_files import tool_files as tool_files

__all__ = [
    "FILES",
    "FileAccess",
    "FileAccessError",
    "FileChanged",
    "FileSystem",
    "LocalFiles",
    "PlanEntry",
    "PromptCommand",
    "ToolFiles",
    "plan_of",
    "project_instructions",
    "tool_files",
    "tool_plan",
]
