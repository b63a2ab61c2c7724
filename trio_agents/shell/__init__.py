"""The shell: ``ShellExecutor`` (definition), ``LocalShell`` and ``SandboxShell`` (providers),
``tool_bash`` (consumer) (``docs/shell.rst``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it need of it and users do not: ``SupervisedChild`` and ``supervisor_available`` (the
stdio MCP servers), ``SHELL_ROUTES`` and ``Terminal`` (the ACP client's terminal),
``SANDBOX_POLICIES`` and ``job_state`` (the command).
"""

from ._child import SupervisedChild as SupervisedChild
from ._child import supervisor_available as supervisor_available
from ._errors import JobNotFoundError as JobNotFoundError
from ._errors import ShellRequestError as ShellRequestError
from ._executor import SHELL as SHELL
from ._executor import ShellExecutor as ShellExecutor
from ._local import LocalShell as LocalShell
from ._local import ShellStatistics as ShellStatistics
from ._routes import SHELL_ROUTES as SHELL_ROUTES
from ._routes import Terminal as Terminal
from ._sandbox import SandboxShell as SandboxShell
from ._sandbox import SandboxUnavailableError as SandboxUnavailableError
from ._snapshot import ShellSnapshot as ShellSnapshot
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
    "SHELL",
    "BashTask",
    "JobDone",
    "JobNotFoundError",
    "JobOutput",
    "JobStatus",
    "LocalShell",
    "SandboxShell",
    "SandboxUnavailableError",
    "ShellExecRequest",
    "ShellExecSpec",
    "ShellExecutor",
    "ShellRequestError",
    "ShellResult",
    "ShellSnapshot",
    "ShellStatistics",
    "tool_bash",
]
