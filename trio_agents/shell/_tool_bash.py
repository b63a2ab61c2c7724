"""``tool_bash``: the Consumer plugin that gives agents the tools ``bash``, ``bash_output``
and ``bash_kill`` on the service ``shell``.

Rules:
- The owner token of a job is the calling agent's id (``None`` without an agent). The access
  policy lives here, the token on the executor: a caller may reach a job unless
  ``owner is not None and owner != caller`` (an empty string is a real owner; a caller without
  an agent cannot reach an owned job; unowned jobs are open). This plugin keeps no map of
  jobs, so a reload of it changes nothing about who may reach what.
- A background job started for an agent is tied to the agent's scope (an entry that kills
  it), so disposing the agent kills and awaits its jobs whether or not this plugin is loaded.
- The completion notice is injected into the owning live agent, found by scanning
  ``ctx.get("agents").list()``: the listener runs in the executor's task, a foreign fiber.
  A completion that lands while this plugin is reloading drops its one notice.
- A foreground ``bash`` cancelled with its turn kills its command (the executor's ``run``).
- A foreground ``bash`` of an agent that a front end routes (:mod:`._routes`: the ACP bridge,
  for a client that offers ``terminal``) runs in that terminal instead of the executor.
- With a sandboxed executor (``executor.sandbox``), a fourth tool, ``bash_unsandboxed``, runs
  a command outside the sandbox; it is marked ``ask`` (every call needs approval), so the
  one way out of the sandbox is asked about, whatever ``bash`` is.
- With a sandboxed executor, each ``bash`` command runs under the stricter of the executor's
  policy, the calling agent's mode's (``plan``: ``read-only``) and the agent's own
  (``ToolBash.Config.sandboxes``, by agent id; a child agent without one has its nearest
  ancestor's): a mode or an agent never loosens the sandbox. ``bash`` is then marked
  ``sandboxed``, so the ``plan`` mode runs it (read-only) instead of refusing it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import final

import attrs
import trio

from ..agent import AGENTS, TOOLS, Agent, AgentClosedError, Tool, ToolContext, ToolResult
from ..kernel import Context, FiberClosedError
from ._errors import JobNotFoundError, ShellRequestError
from ._executor import SHELL, ShellExecutor
from ._routes import SHELL_ROUTES, ShellRoutes
from ._types import (
    SANDBOX_POLICIES,
    JobDone,
    JobOutput,
    JobStatus,
    ShellExecRequest,
    ShellResult,
    job_state,
)


@attrs.frozen
class BashArgs:
    """The arguments of the ``bash`` tool."""

    command: str = attrs.field(metadata={"description": "the shell command line to run"})
    timeout: float | None = attrs.field(
        default=None,
        metadata={
            "description": "seconds before the command is killed (foreground default 120, "
            "at most 600; background jobs have none unless given)"
        },
    )
    run_in_background: bool = attrs.field(
        default=False,
        metadata={
            "description": "start it as a background job and answer at once with its id "
            "(bash-N); you are told when it ends"
        },
    )


@attrs.frozen
class JobArgs:
    """The arguments of ``bash_output`` and ``bash_kill``."""

    job_id: str = attrs.field(metadata={"description": "the job id, e.g. bash-1"})


def _token(call: ToolContext) -> str | None:
    agent = call.agent
    return None if agent is None else agent.id


def _status_line(
    status: JobStatus, exit_code: int | None, timed_out: bool, timeout: float | None = None
) -> str:
    return f"[{job_state(status, exit_code, timed_out=timed_out, timeout=timeout)}]"


def truncation_marker(dropped: int) -> str:
    """The line that stands for output the cap dropped."""
    return f"[... {dropped} bytes of earlier output dropped (over the output cap) ...]"


def _text(output: str, dropped: int, status_line: str) -> str:
    parts = []
    if dropped:
        parts.append(truncation_marker(dropped))
    if output:
        parts.append(output if output.endswith("\n") else output + "\n")
    return "\n".join(p.rstrip("\n") for p in parts) + ("\n" if parts else "") + status_line


def format_result(result: ShellResult, timeout: float | None) -> str:
    """The ``bash`` tool's text for a foreground run."""
    line = _status_line(result.status, result.exit_code, result.timed_out, timeout)
    return _text(result.output, result.dropped, line)


def format_output(output: JobOutput) -> str:
    """The ``bash_output`` tool's text for one read of a job."""
    line = _status_line(output.status, output.exit_code, output.timed_out)
    return _text(output.output, output.dropped, line)


def notice(event: JobDone) -> str:
    """The message injected into the owning agent when its job ends."""
    line = job_state(event.status, event.exit_code)
    return (
        f"background job {event.job_id} ended: {line}; read its output with "
        f'bash_output(job_id="{event.job_id}")'
    )


@final
class _BashTools:
    """The tools of one application of the plugin (nothing here survives a reload)."""

    def __init__(
        self,
        ctx: Context,
        executor: ShellExecutor,
        sandboxes: Mapping[str, str] | None = None,
        *,
        routes: ShellRoutes | None = None,
    ) -> None:
        self._ctx = ctx
        self._executor = executor
        self._sandboxes: Mapping[str, str] = sandboxes or {}
        self._routes = routes if routes is not None else ShellRoutes()

    def tools(self) -> tuple[Tool, ...]:
        outside: tuple[Tool, ...] = ()
        if self._executor.sandbox is not None:
            outside = (
                Tool(
                    "bash_unsandboxed",
                    f"Run a shell command outside the {self._executor.sandbox} sandbox that "
                    f"bash runs in (the network, files outside the workspace). Every call "
                    f"needs the user's approval: use bash unless the sandbox stops it.",
                    BashArgs,
                    self.bash_unsandboxed,
                    ask=True,
                ),
            )
        return (
            Tool(
                "bash",
                "Run a shell command (/bin/sh -c, no stdin). Foreground: returns its merged "
                "output and exit code. With run_in_background: returns the job id at once.",
                BashArgs,
                self.bash,
                sandboxed=self._executor.sandbox is not None,
            ),
            Tool(
                "bash_output",
                "Read a background job's output since the last read, and its status.",
                JobArgs,
                self.bash_output,
            ),
            Tool("bash_kill", "Kill a background job and wait for it to end.", JobArgs, self.kill),
            *outside,
        )

    async def bash_unsandboxed(self, call: ToolContext, args: BashArgs) -> ToolResult:
        return await self.bash(call, args, sandboxed=False)

    async def bash(
        self, call: ToolContext, args: BashArgs, *, sandboxed: bool = True
    ) -> ToolResult:
        executor = self._executor
        request = ShellExecRequest(
            args.command,
            # The agent's own working directory (an editor's project, say), if it has one.
            cwd=call.agent.cwd if call.agent is not None else None,
            timeout=args.timeout,
            owner=_token(call),
            background=args.run_in_background,
            sandboxed=sandboxed,
            policy=self._policy(call.agent) if sandboxed else None,
        )
        try:
            spec = executor.resolve(request)
        except ShellRequestError as exc:
            return ToolResult(str(exc), is_error=True, started=False)
        if not spec.background:
            # Invariant: a sandboxed command never leaves its sandbox for a routed terminal.
            terminal = self._routes.for_agent(call.agent) if executor.sandbox is None else None
            try:
                if terminal is not None:
                    result = await terminal.run(spec, call.call_id)
                else:
                    result = await executor.run(spec)
            except ShellRequestError as exc:  # refused at the start (too long for exec)
                return ToolResult(str(exc), is_error=True, started=False)
            failed = result.status is not JobStatus.EXITED or result.exit_code != 0
            return ToolResult(format_result(result, spec.timeout), is_error=failed)
        # Shielded: once the job exists it must be tied to its agent before anything can
        # interrupt us; both steps return at once.
        with trio.CancelScope(shield=True):
            try:
                task = await executor.start(spec)
            except ShellRequestError as exc:
                return ToolResult(str(exc), is_error=True, started=False)
            if call.agent is not None and not await self._tie(call.agent, task.id):
                return ToolResult(
                    f"agent {call.agent.id} is closing; {task.id} was killed", is_error=True
                )
        return ToolResult(task.id)

    def _policy(self, agent: Agent | None) -> str | None:
        """The sandbox policy the agent's commands ask for (see the module rules)."""
        if agent is None or self._executor.sandbox is None:
            return None
        mode = getattr(agent, "mode", None)
        asked = [mode.sandbox] if mode is not None else []
        ancestor: Agent | None = agent
        while ancestor is not None:
            own = self._sandboxes.get(ancestor.id)
            if own is not None:
                asked.append(own)
                break
            ancestor = getattr(ancestor, "parent", None)
        return min(asked, key=SANDBOX_POLICIES.index) if asked else None

    async def _tie(self, agent: Agent, job_id: str) -> bool:
        """Make the agent's scope own the job: its teardown kills and awaits it."""
        agents = self._ctx.get(AGENTS)
        if agents is None:
            return True
        try:
            agents.scope_of(agent).defer(self._executor.kill, job_id)
        except (ValueError, FiberClosedError):
            await self._executor.kill(job_id)
            return False
        return True

    def _refusal(self, call: ToolContext, job_id: str) -> ToolResult | None:
        try:
            owner = self._executor.owner_of(job_id)
        except JobNotFoundError:
            return ToolResult(f"no job {job_id!r}; job ids look like bash-1", is_error=True)
        if owner is not None and owner != _token(call):
            return ToolResult(f"job {job_id} belongs to another session", is_error=True)
        return None

    async def bash_output(self, call: ToolContext, args: JobArgs) -> ToolResult:
        await trio.lowlevel.checkpoint()
        refused = self._refusal(call, args.job_id)
        if refused is not None:
            return refused
        return ToolResult(format_output(self._executor.read_output(args.job_id)))

    async def kill(self, call: ToolContext, args: JobArgs) -> ToolResult:
        refused = self._refusal(call, args.job_id)
        if refused is not None:
            await trio.lowlevel.checkpoint()
            return refused
        if await self._executor.kill(args.job_id):
            return ToolResult(f"{args.job_id} killed")
        return ToolResult(f"{args.job_id} had already ended")

    def notify(self, event: JobDone) -> None:
        """Inject the completion notice into the owning live agent, if any."""
        # The executor's owner_of is the one read path of ownership (the event carries none).
        try:
            owner = self._executor.owner_of(event.job_id)
        except JobNotFoundError:
            return
        if owner is None:
            return
        agents = self._ctx.get(AGENTS)
        if agents is None:
            return
        for agent in agents.list():
            if agent.id == owner:
                # An owner being disposed has nobody left to tell.
                with contextlib.suppress(AgentClosedError):
                    agent.inject(notice(event))


def _policies(_: object, __: object, sandboxes: Mapping[str, str]) -> None:
    for agent_id, policy in sandboxes.items():
        if policy not in SANDBOX_POLICIES:
            raise ValueError(
                f"the sandbox of agent {agent_id!r} is one of {', '.join(SANDBOX_POLICIES)}; "
                f"got {policy!r}"
            )


@final
class ToolBash:
    """The plugin ``tool-bash``; apply it with ``await ctx.plugin(tool_bash)``."""

    name = "tool-bash"
    inject = (SHELL, TOOLS)

    @attrs.frozen
    class Config:
        """Where the commands of some agents are held more tightly than the sandbox's own.

        Attributes:
            sandboxes: a sandbox policy by agent id (``[[agents]] sandbox`` in the config
                file): that agent's commands, and its children's, run under the stricter
                of it and the executor's (with a sandboxed executor; otherwise unused).
        """

        sandboxes: dict[str, str] = attrs.field(factory=dict, validator=_policies)

    async def apply(self, ctx: Context, config: ToolBash.Config) -> None:
        """Register the three tools, the completion listener and the routes (``shell_routes``),
        all owned by this fiber."""
        shell, registry = ctx.service(SHELL), ctx.service(TOOLS)
        routes = ShellRoutes()
        ctx.provide(SHELL_ROUTES, routes)
        tools = _BashTools(ctx, shell, config.sandboxes, routes=routes)
        shell.on_job_done(tools.notify)
        for tool in tools.tools():
            registry.register(tool)


tool_bash = ToolBash()
