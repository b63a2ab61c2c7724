"""The shell: ``ShellExecutor`` (definition), ``LocalShell`` and ``SandboxShell`` (providers),
``tool_bash`` (consumer) (``docs/shell.rst``)."""

from ._child import SupervisedChild as SupervisedChild
from ._child import supervisor_available as supervisor_available
from ._errors import JobNotFoundError as JobNotFoundError
from ._errors import ShellError as ShellError
from ._errors import ShellRequestError as ShellRequestError
from ._executor import SHELL as SHELL
from ._executor import JobListener as JobListener
from ._executor import ShellExecutor as ShellExecutor
from ._local import LocalShell as LocalShell
from ._local import LocalShellExecutor as LocalShellExecutor
from ._local import ShellStatistics as ShellStatistics
from ._output import OutputBuffer as OutputBuffer
from ._routes import SHELL_ROUTES as SHELL_ROUTES
from ._routes import ShellRoutes as ShellRoutes
from ._routes import Terminal as Terminal
from ._routes import TerminalChooser as TerminalChooser
from ._sandbox import SandboxShell as SandboxShell
from ._sandbox import SandboxUnavailableError as SandboxUnavailableError
from ._sandbox import bwrap_argv as bwrap_argv
from ._sandbox import stricter as stricter
from ._snapshot import JobSnapshot as JobSnapshot
from ._snapshot import ShellSnapshot as ShellSnapshot
from ._tool_bash import BashArgs as BashArgs
from ._tool_bash import JobArgs as JobArgs
from ._tool_bash import ToolBash as ToolBash
from ._tool_bash import tool_bash as tool_bash
from ._types import SANDBOX_POLICIES as SANDBOX_POLICIES
from ._types import BashTask as BashTask
from ._types import JobDone as JobDone
from ._types import JobOutput as JobOutput
from ._types import JobStatus as JobStatus
from ._types import ShellExecRequest as ShellExecRequest
from ._types import ShellExecSpec as ShellExecSpec
from ._types import ShellResult as ShellResult
from ._types import job_state as job_state

__all__ = [
    "SANDBOX_POLICIES",
    "SHELL",
    "SHELL_ROUTES",
    "BashArgs",
    "BashTask",
    "JobArgs",
    "JobDone",
    "JobListener",
    "JobNotFoundError",
    "JobOutput",
    "JobSnapshot",
    "JobStatus",
    "LocalShell",
    "LocalShellExecutor",
    "OutputBuffer",
    "SandboxShell",
    "SandboxUnavailableError",
    "ShellError",
    "ShellExecRequest",
    "ShellExecSpec",
    "ShellExecutor",
    "ShellRequestError",
    "ShellResult",
    "ShellRoutes",
    "ShellSnapshot",
    "ShellStatistics",
    "SupervisedChild",
    "Terminal",
    "TerminalChooser",
    "ToolBash",
    "bwrap_argv",
    "job_state",
    "stricter",
    "supervisor_available",
    "tool_bash",
]
