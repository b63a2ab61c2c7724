"""``LocalShell``: the Service Provider of ``shell`` that runs ``/bin/sh -c`` on this machine.

Rules:
- Every job's shell is the leader of its own process group, gets ``/dev/null`` as stdin, and
  has stdout and stderr merged into one pipe, read as it comes into a bounded
  :class:`OutputBuffer`. On Linux (unless ``supervise=False``) a per-job supervisor process
  stands between the executor and the shell and reaches every descendant, ``setsid`` or not,
  also after the executor's process died (``_child.py``, ``_supervisor.py``); elsewhere the
  job is its process group.
- One driver awaits each process (the only waiter, so ``Process.wait`` is never shared); it
  runs inside the process's own cancel scope. Cancelling that scope (``kill``), its deadline
  (the timeout) and an outer cancellation (a cancelled caller, the fiber's teardown) all end
  in the same shielded stop: SIGTERM to the job, ``kill_grace`` seconds, SIGKILL to the
  job, await the shell's exit (``kill_grace`` again, then ``Child.force``: a job that stopped
  its supervisor cannot make the stop wait for ever).
- When the shell has exited, what is left of the job gets the same treatment, and the pipe
  is drained to EOF (bounded by ``kill_grace``): no process outlives its job, and the output
  of a job that is no longer running is complete.
- Background jobs are tasks of the executor's fiber. The first of them cancelled by the
  fiber's teardown closes the executor: every process (foreground too) gets SIGTERM at once,
  so the grace periods run concurrently, and no ``JobDone`` is reported from then on.
"""

from __future__ import annotations

import errno
import itertools
import math
import os
import signal
from collections.abc import Callable, Sequence
from typing import Any, final

import attrs
import trio

from .. import tracing
from ..kernel import Context, Entry, current_context
from ._child import Child, GroupChild, SupervisedChild, supervisor_available
from ._errors import JobNotFoundError, ShellRequestError
from ._executor import SHELL, JobListener, ShellExecutor
from ._output import OutputBuffer
from ._snapshot import ShellSnapshot, describe_shell
from ._types import (
    SANDBOX_POLICIES,
    BashTask,
    JobDone,
    JobOutput,
    JobStatus,
    ShellExecRequest,
    ShellExecSpec,
    ShellResult,
)

_READ_SIZE = 65536


def max_command() -> int:
    """The longest command line, in bytes, that ``/bin/sh -c`` can be given here.

    Linux limits each argument of a program to ``MAX_ARG_STRLEN`` (32 pages, with its
    terminating NUL); elsewhere only the total, ``ARG_MAX``, applies.
    """
    # os.uname, not sys.platform: mypy would call the other branch unreachable.
    if os.uname().sysname == "Linux":
        return 32 * os.sysconf("SC_PAGE_SIZE") - 1
    return os.sysconf("SC_ARG_MAX")


def _positive(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{attribute.name} must be a positive finite number; got {value!r}")


@attrs.frozen
class ShellStatistics:
    """A snapshot of an executor, for tests and debugging."""

    running: int
    jobs: int
    closed: bool


@final
@attrs.define(eq=False)
class _Process:
    """One process and what its driver knows about it."""

    spec: ShellExecSpec
    process: Child
    buffer: OutputBuffer
    job_id: str | None
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    killed: bool = False
    timed_out: bool = False
    term_at: float | None = None
    #: When it started, on trio's clock (a snapshot's running_for).
    since: float = attrs.Factory(trio.current_time)

    @property
    def stdout(self) -> trio.abc.ReceiveStream:
        """The merged stdout and stderr pipe."""
        return self.process.stdout

    @property
    def status(self) -> JobStatus:
        if not self.done.is_set():
            return JobStatus.RUNNING
        return JobStatus.KILLED if self.killed or self.timed_out else JobStatus.EXITED


@final
class LocalShellExecutor(ShellExecutor):
    """The executor ``LocalShell`` provides; bound to the plugin's fiber."""

    def __init__(
        self,
        ctx: Context,
        config: LocalShell.Config,
        *,
        wrap: Callable[[ShellExecSpec], Sequence[str]] | None = None,
        sandbox: str | None = None,
    ) -> None:
        self._ctx = ctx
        self._config = config
        # The program (and its options) each ``/bin/sh -c`` runs under: a sandbox's
        # (``SandboxShell``); ``None``: the shell runs as it is.
        self._wrap = wrap
        self._sandbox = sandbox if wrap is not None else None
        self._ids = itertools.count(1)
        # Invariant: a job id, once given, stays here (with its owner) while the executor lives.
        self._jobs: dict[str, _Process] = {}
        self._running: dict[_Process, None] = {}
        self._listeners: dict[int, JobListener] = {}
        self._listener_ids = itertools.count()
        self._closing = False

    @property
    def config(self) -> LocalShell.Config:
        """The limits this executor resolves requests with."""
        return self._config

    @property
    def sandbox(self) -> str | None:
        """See :attr:`ShellExecutor.sandbox`."""
        return self._sandbox

    def statistics(self) -> ShellStatistics:
        """A frozen snapshot: running processes, jobs ever started, whether closed."""
        return ShellStatistics(len(self._running), len(self._jobs), self._closing)

    def describe(self, now: float) -> ShellSnapshot:
        """The running jobs and foreground runs, for a snapshot of the ownership tree."""
        return describe_shell(self._running, now)

    # -- resolution ----------------------------------------------------------------------------

    def resolve(self, request: ShellExecRequest) -> ShellExecSpec:
        """Resolve ``request``: absolute cwd, full env, explicit timeout, the output cap.

        A timeout above ``max_timeout`` is an error, not clamped: the caller asked for
        something the executor will not do, and should know. Without a timeout a foreground
        run gets ``default_timeout``; a background job gets none (it lives until killed, its
        owner is disposed, or the executor is).

        Raises:
            ShellRequestError: empty command, bad timeout, missing directory, bad env.
        """
        config = self._config
        if not isinstance(request.command, str) or not request.command.strip():
            raise ShellRequestError("the command is empty; give a shell command line to run")
        size = len(request.command.encode("utf-8", "surrogateescape"))
        if size > (limit := max_command()):
            raise ShellRequestError(
                f"the command is {size:,} bytes; this system runs a command line of at most "
                f"{limit:,} bytes; write the script to a file and run the file instead"
            )
        cwd = os.path.abspath(request.cwd if request.cwd is not None else os.getcwd())
        if not os.path.isdir(cwd):
            raise ShellRequestError(f"the working directory {cwd!r} does not exist")
        env = dict(os.environ)
        for key, value in (request.env or {}).items():
            if not isinstance(key, str) or not isinstance(value, str) or not key or "=" in key:
                raise ShellRequestError(
                    f"environment entries are non-empty names without '=' mapped to "
                    f"strings; got {key!r}: {value!r}"
                )
            env[key] = value
        timeout = request.timeout
        if timeout is None:
            timeout = None if request.background else config.default_timeout
        elif isinstance(timeout, bool) or not (
            isinstance(timeout, int | float) and timeout > 0 and math.isfinite(timeout)
        ):
            raise ShellRequestError(
                f"timeout is a positive number of seconds; got {request.timeout!r}"
            )
        elif timeout > config.max_timeout:
            raise ShellRequestError(
                f"timeout {timeout:g} s exceeds the maximum of {config.max_timeout:g} s; "
                f"ask for at most {config.max_timeout:g} s, or run it in the background"
            )
        return ShellExecSpec(
            command=request.command,
            cwd=cwd,
            env=env,
            timeout=None if timeout is None else float(timeout),
            output_cap=config.output_cap,
            owner=request.owner,
            background=request.background,
            sandboxed=bool(request.sandboxed),
            policy=_policy(request.policy),
        )

    # -- foreground ----------------------------------------------------------------------------

    async def run(self, spec: ShellExecSpec) -> ShellResult:
        """See :meth:`ShellExecutor.run`."""
        self._check_open()
        proc = await self._spawn(spec, None)
        with tracing.shell_job(proc):
            await self._drive(proc)
        output, dropped = proc.buffer.take(final=True)
        return ShellResult(
            output=output,
            exit_code=proc.process.returncode,
            status=proc.status,
            timed_out=proc.timed_out,
            dropped=dropped,
        )

    # -- background ----------------------------------------------------------------------------

    async def start(self, spec: ShellExecSpec) -> BashTask:
        """See :meth:`ShellExecutor.start`."""
        self._check_open()
        job_id = f"bash-{next(self._ids)}"
        task: BashTask = await self._ctx.start(self._job, job_id, spec)
        return task

    async def _job(
        self, job_id: str, spec: ShellExecSpec, *, task_status: trio.TaskStatus[BashTask]
    ) -> None:
        proc = await self._spawn(spec, job_id)
        # Invariant: no checkpoint between the spawn and started(): once the process exists,
        # this task (the executor's) owns it.
        self._jobs[job_id] = proc
        task_status.started(BashTask(job_id, spec.command, proc.process.pid))
        with tracing.shell_job(proc):
            await self._drive(proc)
        if not self._closing:
            self._report(
                JobDone(
                    job_id=job_id,
                    exit_code=proc.process.returncode,
                    status=proc.status,
                )
            )

    def owner_of(self, job_id: str) -> str | None:
        """See :meth:`ShellExecutor.owner_of`."""
        return self._job_of(job_id).spec.owner

    def read_output(self, job_id: str) -> JobOutput:
        """See :meth:`ShellExecutor.read_output`. Once the status is not ``running``, the
        output read so far is complete."""
        proc = self._job_of(job_id)
        done = proc.done.is_set()
        output, dropped = proc.buffer.take(final=done)
        return JobOutput(
            job_id=job_id,
            output=output,
            status=proc.status,
            exit_code=proc.process.returncode if done else None,
            dropped=dropped,
            timed_out=proc.timed_out,
        )

    async def kill(self, job_id: str) -> bool:
        """See :meth:`ShellExecutor.kill`."""
        proc = self._job_of(job_id)
        if proc.done.is_set():
            await trio.lowlevel.checkpoint()
            return False
        running = proc.process.returncode is None
        if running:
            proc.killed = True
            proc.scope.cancel()
        await proc.done.wait()
        return running

    def on_job_done(self, listener: JobListener) -> Entry:
        """See :meth:`ShellExecutor.on_job_done`."""
        if not callable(listener):
            raise TypeError(f"on_job_done() takes a callable; got {listener!r}")
        ctx = current_context()
        key = next(self._listener_ids)
        self._listeners[key] = listener
        return ctx.defer(self._unlisten, key)

    async def _unlisten(self, key: int) -> None:
        self._listeners.pop(key, None)
        await trio.lowlevel.checkpoint()

    def _report(self, event: JobDone) -> None:
        for listener in tuple(self._listeners.values()):
            self._ctx.call_listener(
                listener, event, async_error="on_job_done listeners are synchronous functions"
            )
        self._ctx.emit(event)

    # -- closing -------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Kill every process group and await every exit. Later ``run``/``start`` raise
        :exc:`trio.ClosedResourceError`; no ``JobDone`` is reported any more."""
        self._begin_close()
        for proc in tuple(self._running):
            await proc.done.wait()
        await trio.lowlevel.checkpoint()

    def _begin_close(self) -> None:
        if self._closing:
            return
        self._closing = True
        for proc in tuple(self._running):
            if proc.process.returncode is None:
                proc.killed = True
                self._signal(proc, signal.SIGTERM)
            proc.scope.cancel()

    def _check_open(self) -> None:
        if self._closing:
            raise trio.ClosedResourceError(
                f"the shell executor of fiber {self._ctx.fiber.id} is closed; "
                f"use the current ctx.get('shell')"
            )

    def _job_of(self, job_id: str) -> _Process:
        proc = self._jobs.get(job_id)
        if proc is None:
            raise JobNotFoundError(f"no job {job_id!r} was started by this shell")
        return proc

    # -- processes -----------------------------------------------------------------------------

    async def _spawn(self, spec: ShellExecSpec, job_id: str | None) -> _Process:
        process: Child
        prefix = list(self._wrap(spec)) if self._wrap is not None and spec.sandboxed else []
        environ = tracing.environment(spec.env)
        try:
            if self._config.supervise and supervisor_available():
                process = await SupervisedChild.spawn(
                    [*prefix, "/bin/sh", "-c", spec.command],
                    spec.cwd,
                    environ,
                    self._config.kill_grace,
                )
            else:
                process = await GroupChild.spawn(spec.command, spec.cwd, environ, prefix=prefix)
        except OSError as exc:
            if exc.errno != errno.E2BIG:
                raise
            # Otherwise the error would name the program run (the supervisor's python).
            size = len(spec.command.encode("utf-8", "surrogateescape"))
            env = sum(len(k) + len(v) + 2 for k, v in spec.env.items())
            raise ShellRequestError(
                f"the command ({size:,} bytes) and its environment ({env:,} bytes) exceed "
                f"this system's limit for starting a program (ARG_MAX, "
                f"{os.sysconf('SC_ARG_MAX'):,} bytes); shorten them, or write the script to a "
                f"file and run the file instead"
            ) from None
        return _Process(spec, process, OutputBuffer(spec.output_cap), job_id)

    async def _drive(self, proc: _Process) -> None:
        self._running[proc] = None
        try:
            with proc.scope:
                if proc.spec.timeout is not None:
                    proc.scope.deadline = trio.current_time() + proc.spec.timeout
                if self._closing:
                    proc.killed = True
                    proc.scope.cancel()
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._drain, proc)
                        await proc.process.wait()
                        nursery.cancel_scope.cancel()
                except BaseExceptionGroup as group:
                    _, rest = group.split(trio.Cancelled)
                    if rest is None:
                        # Only cancellations, so an enclosing scope is cancelled: this
                        # checkpoint raises a plain Cancelled (callers catch trio.Cancelled,
                        # not a group).
                        await trio.lowlevel.checkpoint()
                    raise
            if proc.process.returncode is None and not proc.killed:
                proc.timed_out = True
        except trio.Cancelled:
            if proc.job_id is not None:
                # Only the fiber's teardown cancels a job's task (kill() cancels proc.scope):
                # close the whole executor now, so every group's grace runs concurrently.
                self._begin_close()
            raise
        finally:
            with trio.CancelScope(shield=True):
                await self._finish(proc)

    async def _finish(self, proc: _Process) -> None:
        try:
            if proc.process.returncode is None:
                if not proc.timed_out:
                    proc.killed = True
                await self._terminate(proc)
            await self._sweep(proc)
        finally:
            self._running.pop(proc, None)
            proc.done.set()

    async def _terminate(self, proc: _Process) -> None:
        self._signal(proc, signal.SIGTERM)
        assert proc.term_at is not None
        with trio.move_on_at(proc.term_at + self._config.kill_grace):
            await proc.process.wait()
        if proc.process.returncode is None:
            self._signal(proc, signal.SIGKILL)
            with trio.move_on_after(self._config.kill_grace):
                await proc.process.wait()
        if proc.process.returncode is None:
            # Nothing acted on the SIGKILL (the job stopped or killed its supervisor).
            await proc.process.force()
            await proc.process.wait()

    async def _sweep(self, proc: _Process) -> None:
        """The shell has exited: end what is left of the job, then drain the pipe."""
        grace = self._config.kill_grace
        eof = False
        if proc.process.signal(signal.SIGTERM):
            with trio.move_on_after(grace):
                await proc.process.settle()
                eof = await self._drain(proc)
            if not eof:
                proc.process.signal(signal.SIGKILL)
        if not eof:
            with trio.move_on_after(grace):
                await proc.process.settle()
                await self._drain(proc)
        await proc.process.aclose()

    async def _drain(self, proc: _Process) -> bool:
        """Read until EOF; ``True`` once it came."""
        stdout = proc.stdout
        while True:
            try:
                data = await stdout.receive_some(_READ_SIZE)
            except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                return True
            if not data:
                return True
            proc.buffer.feed(data)

    def _signal(self, proc: _Process, signum: signal.Signals) -> None:
        if signum is signal.SIGTERM:
            if proc.term_at is not None:
                return
            proc.term_at = trio.current_time()
        # Invariant: only called while the driver owns the process (before `done`).
        proc.process.signal(signum)


@final
class LocalShell:
    """The plugin that provides a :class:`LocalShellExecutor` as the service ``shell``."""

    name = "shell"

    @attrs.frozen
    class Config:
        """Limits of the executor.

        Attributes:
            default_timeout: seconds a foreground run gets when it asks for none.
            max_timeout: the largest timeout a request may ask for (more is an error).
            output_cap: bytes of unread output kept per process (older bytes are dropped).
            kill_grace: seconds between SIGTERM and SIGKILL.
            supervise: run each job under a supervisor process where the platform allows
                (Linux), so that no process of a job outlives it (see docs/shell.rst).
        """

        default_timeout: float = attrs.field(default=120.0, validator=_positive)
        max_timeout: float = attrs.field(default=600.0, validator=_positive)
        output_cap: int = attrs.field(default=1 << 20, validator=_positive)
        kill_grace: float = attrs.field(default=2.0, validator=_positive)
        supervise: bool = True

        def __attrs_post_init__(self) -> None:
            if self.default_timeout > self.max_timeout:
                raise ValueError(
                    f"default_timeout ({self.default_timeout:g} s) exceeds max_timeout "
                    f"({self.max_timeout:g} s)"
                )

    async def apply(self, ctx: Context, config: LocalShell.Config) -> None:
        """Provide the executor; its teardown kills every process and awaits every exit."""
        executor = LocalShellExecutor(ctx, config)
        ctx.defer(executor.aclose)
        ctx.provide(SHELL, executor)


def _policy(policy: str | None) -> str | None:
    """A request's sandbox policy, checked (the names of ``SANDBOX_POLICIES``)."""
    if policy is not None and policy not in SANDBOX_POLICIES:
        raise ShellRequestError(f"policy is one of {', '.join(SANDBOX_POLICIES)}; got {policy!r}")
    return policy
