"""The workspace: file tools on a file-access seam, the plan tool, project instructions and
prompt commands (``docs/tools.rst``, ``docs/editors.rst``)."""

from ._access import FILES as FILES
from ._access import Chooser as Chooser
from ._access import FileAccess as FileAccess
from ._access import FileAccessError as FileAccessError
from ._access import FileSystem as FileSystem
from ._access import LocalFiles as LocalFiles
from ._access import LocalFileSystem as LocalFileSystem
from ._commands import ARGUMENTS as ARGUMENTS
from ._commands import COMMANDS_DIR as COMMANDS_DIR
from ._commands import CommandCall as CommandCall
from ._commands import PromptCommand as PromptCommand
from ._commands import parse_command as parse_command
from ._commands import prompt_commands as prompt_commands
from ._instructions import INSTRUCTION_FILES as INSTRUCTION_FILES
from ._instructions import instruction_files as instruction_files
from ._instructions import project_instructions as project_instructions
from ._paths import resolve_path as resolve_path
from ._plan import PlanArgs as PlanArgs
from ._plan import PlanEntry as PlanEntry
from ._plan import ToolPlan as ToolPlan
from ._plan import format_plan as format_plan
from ._plan import plan_entries as plan_entries
from ._plan import plan_of as plan_of
from ._plan import plan_summary as plan_summary
from ._plan import tool_plan as tool_plan
from ._tool_files import MAX_ENTRIES as MAX_ENTRIES
from ._tool_files import MAX_MATCHES as MAX_MATCHES
from ._tool_files import SKIPPED as SKIPPED
from ._tool_files import EditArgs as EditArgs
from ._tool_files import FileChanged as FileChanged
from ._tool_files import GlobArgs as GlobArgs
from ._tool_files import GrepArgs as GrepArgs
from ._tool_files import ListArgs as ListArgs
from ._tool_files import ReadArgs as ReadArgs
from ._tool_files import ToolFiles as ToolFiles
from ._tool_files import WriteArgs as WriteArgs
from ._tool_files import tool_files as tool_files

__all__ = [
    "ARGUMENTS",
    "COMMANDS_DIR",
    "FILES",
    "INSTRUCTION_FILES",
    "MAX_ENTRIES",
    "MAX_MATCHES",
    "SKIPPED",
    "Chooser",
    "CommandCall",
    "EditArgs",
    "FileAccess",
    "FileAccessError",
    "FileChanged",
    "FileSystem",
    "GlobArgs",
    "GrepArgs",
    "ListArgs",
    "LocalFileSystem",
    "LocalFiles",
    "PlanArgs",
    "PlanEntry",
    "PromptCommand",
    "ReadArgs",
    "ToolFiles",
    "ToolPlan",
    "WriteArgs",
    "format_plan",
    "instruction_files",
    "parse_command",
    "plan_entries",
    "plan_of",
    "plan_summary",
    "project_instructions",
    "prompt_commands",
    "resolve_path",
    "tool_files",
    "tool_plan",
]
