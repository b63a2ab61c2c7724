"""``LocalShell``: real processes in their own groups, jobs, ownership tokens, disposal."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests.helpers.sandbox_support import require_bwrap
from tests.helpers.support import (
    gone,
    group_members,
    marker,
    processes_with,
    read_fifo,
    shell_of,
    write_fifo,
)
from trio_agents.kernel import Context, ListenerFailed, open_root
from trio_agents.shell import (
    BashTask,
    JobDone,
    JobNotFoundError,
    JobStatus,
    LocalShell,
    SandboxShell,
    ShellExecRequest,
    ShellExecSpec,
    ShellRequestError,
    ShellResult,
    ShellStatistics,
)
from trio_agents.shell._local import LocalShellExecutor


async def wait_for_output(shell: LocalShellExecutor, job_id: str, text: str) -> str:
    """Read the job until ``text`` has appeared; return everything read.

    It polls because the executor's output API is pull-based (no "output arrived" event); the
    deadline turns a missing output into a failure instead of a hang.
    """
    seen = ""
    with trio.fail_after(10):
        while text not in seen:
            seen += shell.read_output(job_id).output
            if text not in seen:
                await trio.sleep(0.01)
    return seen


def relative_to_cwd(path: Path) -> str:
    return os.path.relpath(path)


@pytest.fixture(params=[True, False, "sandboxed"], ids=["supervised", "group", "sandboxed"])
async def root(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Context]:
    """A shell with a short grace, with the per-job supervisor (Linux), without it, and the
    sandboxed one (``SandboxShell``: the same contract under bubblewrap; the test's temporary
    directory, where its fifos are, writable)."""
    async with open_root() as root:
        if request.param == "sandboxed":
            require_bwrap()
            await root.plugin(
                SandboxShell(), SandboxShell.Config(kill_grace=0.5, writable=(str(tmp_path),))
            )
        else:
            await root.plugin(
                LocalShell(), LocalShell.Config(kill_grace=0.5, supervise=request.param)
            )
        yield root


async def start(shell: LocalShellExecutor, command: str, owner: str | None = None) -> BashTask:
    return await shell.start(shell.resolve(ShellExecRequest(command, owner=owner, background=True)))


# -- resolve -------------------------------------------------------------------------------------


async def test_resolve_makes_every_value_explicit(root: Context) -> None:
    """Defaults: the current directory, the full environment, 120 s, 1 MiB, owner None."""
    spec = shell_of(root).resolve(ShellExecRequest("true", env={"EXTRA": "1"}))
    assert spec.cwd == os.getcwd()
    assert spec.env["EXTRA"] == "1"
    assert spec.env["PATH"] == os.environ["PATH"]
    assert spec.timeout == 120.0
    assert spec.output_cap == 1 << 20
    assert spec.owner is None
    assert not spec.background
    assert spec.sandboxed


async def test_background_request_without_timeout_has_none(root: Context) -> None:
    """A background job lives until killed unless it asked for a timeout."""
    shell = shell_of(root)
    assert shell.resolve(ShellExecRequest("true", background=True)).timeout is None
    assert shell.resolve(ShellExecRequest("true", background=True, timeout=5)).timeout == 5.0


async def test_resolve_makes_a_relative_cwd_absolute(root: Context, tmp_path: Path) -> None:
    """A relative cwd is resolved against the process's current directory."""
    (tmp_path / "sub").mkdir()
    relative = relative_to_cwd(tmp_path / "sub")
    assert shell_of(root).resolve(ShellExecRequest("true", cwd=relative)).cwd == str(
        tmp_path / "sub"
    )


async def test_timeout_above_the_maximum_is_an_error(root: Context) -> None:
    """Not clamped: the caller learns the limit."""
    with pytest.raises(ShellRequestError, match=r"^timeout 601 s exceeds the maximum of 600 s"):
        shell_of(root).resolve(ShellExecRequest("true", timeout=601))


@pytest.mark.parametrize("seconds", [0, -1, float("inf"), float("nan")])
async def test_nonpositive_or_infinite_timeout_is_an_error(root: Context, seconds: float) -> None:
    """A timeout is a positive finite number of seconds."""
    with pytest.raises(ShellRequestError, match=r"^timeout is a positive number"):
        shell_of(root).resolve(ShellExecRequest("true", timeout=seconds))


async def test_missing_cwd_and_empty_command_are_errors(root: Context, tmp_path: Path) -> None:
    """Nothing runs for a request that cannot be honoured."""
    shell = shell_of(root)
    with pytest.raises(ShellRequestError, match=r"^the working directory .* does not exist$"):
        shell.resolve(ShellExecRequest("true", cwd=str(tmp_path / "absent")))
    with pytest.raises(ShellRequestError, match=r"^the command is empty"):
        shell.resolve(ShellExecRequest("  "))


def test_spec_owner_has_no_default() -> None:
    """A spec cannot be built without saying who owns it (a forgotten owner is visible)."""
    fields = {f.name: f for f in attrs.fields(ShellExecSpec)}
    assert fields["owner"].default is attrs.NOTHING
    with pytest.raises(TypeError, match="owner"):
        ShellExecSpec(  # type: ignore[call-arg]
            command="true",
            cwd="/",
            env={},
            timeout=None,
            output_cap=1,
            background=False,
            sandboxed=True,
        )


# -- foreground ----------------------------------------------------------------------------------


async def test_run_returns_merged_output_and_exit_code(root: Context, tmp_path: Path) -> None:
    """stdout and stderr arrive in one text; the exit status is reported; cwd and env apply."""
    shell = shell_of(root)
    spec = shell.resolve(
        ShellExecRequest(
            'echo out; echo "$GREETING" >&2; pwd; exit 3',
            cwd=str(tmp_path),
            env={"GREETING": "err"},
        )
    )
    with trio.fail_after(10):
        result = await shell.run(spec)
    assert result.output == f"out\nerr\n{tmp_path}\n"
    assert (result.exit_code, result.status, result.timed_out) == (3, JobStatus.EXITED, False)


@contextlib.contextmanager
def stdin_is_an_open_pipe() -> Iterator[None]:
    """Make this process's fd 0 a pipe nobody closes, so an inherited stdin would block."""
    saved = os.dup(0)
    read_end, write_end = os.pipe()
    try:
        os.dup2(read_end, 0)
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)


async def test_child_gets_no_stdin(root: Context) -> None:
    """`cat` sees end of input at once even when our own stdin stays open: it gets /dev/null."""
    shell = shell_of(root)
    with stdin_is_an_open_pipe(), trio.fail_after(10):
        result = await shell.run(shell.resolve(ShellExecRequest("cat; readlink /proc/$$/fd/0")))
    assert (result.output, result.exit_code) == ("/dev/null\n", 0)


async def test_run_timeout_kills_the_process_group(root: Context) -> None:
    """On timeout the group is killed and awaited; the result says it timed out."""
    shell = shell_of(root)
    tag = marker()
    with trio.fail_after(10):
        result = await shell.run(
            shell.resolve(ShellExecRequest(f"echo started; sleep 1000 # {tag}", timeout=0.3))
        )
    assert result.timed_out
    assert result.status is JobStatus.KILLED
    assert result.output == "started\n"
    assert processes_with(tag) == []


async def test_cancelled_run_kills_the_process_group(root: Context, tmp_path: Path) -> None:
    """A cancelled caller kills the command (and its children) before Cancelled propagates."""
    shell = shell_of(root)
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    tag = marker()
    spec = shell.resolve(ShellExecRequest(f"sleep 1000 & echo ready > {fifo}; sleep 1000 # {tag}"))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shell.run, spec)
            assert await read_fifo(fifo) == "ready\n"
            nursery.cancel_scope.cancel()
    assert processes_with(tag) == []
    assert shell.statistics().running == 0


async def test_output_cap_keeps_the_newest_bytes_and_counts_the_rest() -> None:
    """Beyond the cap the oldest output is dropped, and the result says how much."""
    async with open_root() as root:
        await root.plugin(LocalShell(), {"output_cap": 100})
        shell = shell_of(root)
        with trio.fail_after(10):
            result = await shell.run(
                shell.resolve(ShellExecRequest("yes abc | head -c 5000; echo END"))
            )
    assert result.output.endswith("abc\nEND\n")
    assert len(result.output) == 100
    assert result.dropped == 5004 - 100
    assert result.truncated


async def test_run_after_disposal_is_refused() -> None:
    """A disposed executor starts nothing."""
    async with open_root() as root:
        fiber = await root.plugin(LocalShell())
        shell = shell_of(root)
        spec = shell.resolve(ShellExecRequest("true"))
        await fiber.dispose()
        with pytest.raises(trio.ClosedResourceError, match=r"^the shell executor of fiber"):
            await shell.run(spec)
        with pytest.raises(trio.ClosedResourceError):
            await shell.start(spec)


# -- background jobs -----------------------------------------------------------------------------


async def test_job_ids_are_sequential_and_tasks_carry_no_owner(root: Context) -> None:
    """bash-1, bash-2, ...; ownership is read only through owner_of."""
    shell = shell_of(root)
    with trio.fail_after(10):
        first = await start(shell, "true", owner="a")
        second = await start(shell, "true")
    assert (first.id, second.id) == ("bash-1", "bash-2")
    assert first.pid > 0
    assert not hasattr(first, "owner")


async def test_owner_of_returns_the_token_unchanged(root: Context) -> None:
    """The executor stores the opaque token, including the empty string and None."""
    shell = shell_of(root)
    with trio.fail_after(10):
        jobs = {owner: await start(shell, "true", owner=owner) for owner in ("a", "", None)}
    assert {owner: shell.owner_of(job.id) for owner, job in jobs.items()} == {
        "a": "a",
        "": "",
        None: None,
    }


async def test_unknown_job_is_an_error_not_an_unowned_job(root: Context) -> None:
    """owner_of never answers None for a job that does not exist (None means open)."""
    shell = shell_of(root)
    for call in (shell.owner_of, shell.read_output):
        with pytest.raises(JobNotFoundError, match=r"^no job 'bash-9' was started"):
            call("bash-9")
    with pytest.raises(JobNotFoundError):
        await shell.kill("bash-9")


async def test_read_output_is_incremental(root: Context, tmp_path: Path) -> None:
    """Each read returns what was written since the previous one; the final read is complete."""
    shell = shell_of(root)
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    done = trio.Event()
    shell.on_job_done(lambda event: done.set())
    with trio.fail_after(10):
        job = await start(shell, f'echo one; read line < {fifo}; echo "$line"; exit 5')
        assert await wait_for_output(shell, job.id, "one\n") == "one\n"
        running = shell.read_output(job.id)
        assert (running.output, running.status, running.exit_code) == ("", JobStatus.RUNNING, None)
        await write_fifo(fifo, "two\n")
        await done.wait()
    final = shell.read_output(job.id)
    assert (final.output, final.status, final.exit_code) == ("two\n", JobStatus.EXITED, 5)
    assert shell.read_output(job.id).output == ""


async def test_job_output_cap_reports_dropped_bytes() -> None:
    """A job that writes more than the cap between reads is marked truncated."""
    async with open_root() as root:
        await root.plugin(LocalShell(), {"output_cap": 10})
        shell = shell_of(root)
        done = trio.Event()
        shell.on_job_done(lambda event: done.set())
        with trio.fail_after(10):
            job = await start(shell, "printf 0123456789abcdef")
            await done.wait()
        output = shell.read_output(job.id)
    assert (output.output, output.dropped, output.truncated) == ("6789abcdef", 6, True)


async def test_kill_stops_the_whole_group_and_awaits_its_exit(root: Context) -> None:
    """After kill() returns no process of the job is left; a second kill reports False."""
    shell = shell_of(root)
    tag = marker()
    with trio.fail_after(10):
        job = await start(shell, f"sleep 1000 & echo ready; sleep 1000 # {tag}")
        await wait_for_output(shell, job.id, "ready")
        assert group_members(job.pid) != []
        assert await shell.kill(job.id) is True
    assert processes_with(tag) == []
    await gone(group_members, job.pid)
    output = shell.read_output(job.id)
    assert (output.status, output.exit_code) == (JobStatus.KILLED, -15)
    assert await shell.kill(job.id) is False


async def test_a_job_ignoring_sigterm_is_killed_after_the_grace() -> None:
    """SIGTERM, the grace period, then SIGKILL to the group."""
    async with open_root() as root:
        await root.plugin(LocalShell(), {"kill_grace": 0.2})
        shell = shell_of(root)
        with trio.fail_after(10):
            job = await start(shell, "trap '' TERM; echo ready; sleep 1000")
            await wait_for_output(shell, job.id, "ready")
            await shell.kill(job.id)
        assert shell.read_output(job.id).exit_code == -9
        await gone(group_members, job.pid)


async def test_leftover_children_of_an_exited_job_are_ended(root: Context) -> None:
    """When the shell exits, what is left of its group does not become an orphan."""
    shell = shell_of(root)
    tag = marker()
    done = trio.Event()
    shell.on_job_done(lambda event: done.set())
    with trio.fail_after(10):
        job = await start(shell, f"sh -c 'sleep 1000 # {tag}' & echo bye")
        await done.wait()
    assert shell.read_output(job.id).status is JobStatus.EXITED
    await gone(processes_with, tag)


async def test_job_done_fires_once_to_listeners_and_on_the_bus(root: Context) -> None:
    """One JobDone per job, with its owner and exit code, for listeners and bus alike."""
    shell = shell_of(root)
    heard: list[JobDone] = []
    on_bus: list[JobDone] = []
    done = trio.Event()
    root.on(JobDone, on_bus.append)
    shell.on_job_done(heard.append)
    shell.on_job_done(lambda event: done.set())
    with trio.fail_after(10):
        job = await start(shell, "exit 4", owner="a")
        await done.wait()
        assert await shell.kill(job.id) is False
        await trio.testing.wait_all_tasks_blocked()
    expected = JobDone(job_id=job.id, exit_code=4, status=JobStatus.EXITED)
    assert heard == on_bus == [expected]


async def test_job_done_listener_is_owned_by_the_calling_fiber(root: Context) -> None:
    """Registered from a plugin's apply, the listener goes when that plugin's fiber goes."""
    shell = shell_of(root)
    heard: list[str] = []

    @attrs.frozen
    class Listening:
        name = "listening"

        async def apply(self, ctx: Context, config: None) -> None:
            shell.on_job_done(lambda event: heard.append(event.job_id))

    fiber = await root.plugin(Listening())
    done = trio.Event()
    shell.on_job_done(lambda event: done.set())
    with trio.fail_after(10):
        await start(shell, "true")
        await done.wait()
        await fiber.dispose()
        done = trio.Event()
        await start(shell, "true")
        await done.wait()
    assert heard == ["bash-1"]


@pytest.mark.listener_failures
async def test_a_failing_listener_does_not_stop_the_others(root: Context) -> None:
    """Listener failures are contained."""
    shell = shell_of(root)

    def broken(event: JobDone) -> None:
        raise RuntimeError("boom")

    done = trio.Event()
    shell.on_job_done(broken)
    shell.on_job_done(lambda event: done.set())
    with trio.fail_after(10):
        await start(shell, "true")
        await done.wait()
    assert shell.statistics().running == 0


# -- disposal ------------------------------------------------------------------------------------


async def test_disposal_kills_every_job_and_reports_no_completion() -> None:
    """Disposing the shell kills every job and awaits it; no JobDone fires for them."""
    tag = marker()
    heard: list[JobDone] = []
    async with open_root() as root:
        fiber = await root.plugin(LocalShell())
        shell = shell_of(root)
        # Registered on the root, so these outlive the shell's fiber.
        root.on(JobDone, heard.append)
        shell.on_job_done(heard.append)
        with trio.fail_after(10):
            jobs = [await start(shell, f"echo ready; sleep 1000 # {tag}") for _ in range(3)]
            for job in jobs:
                await wait_for_output(shell, job.id, "ready")
            assert len(processes_with(tag)) >= 3
            await fiber.dispose()
        assert all(shell.read_output(job.id).status is JobStatus.KILLED for job in jobs)
        assert processes_with(tag) == []
        for job in jobs:
            await gone(group_members, job.pid)
        assert heard == []
        assert shell.statistics().closed


async def test_leaving_the_runtime_leaves_no_process_behind() -> None:
    """Jobs still running when the runtime closes, and their children, are all gone."""
    tag = marker()
    async with open_root() as root:
        await root.plugin(LocalShell())
        shell = shell_of(root)
        with trio.fail_after(10):
            job = await start(shell, f"sh -c 'sleep 1000 # {tag}' & echo ready; sleep 1000")
            await wait_for_output(shell, job.id, "ready")
        assert processes_with(tag) != []
    await gone(processes_with, tag)
    await gone(group_members, job.pid)


async def test_disposal_kills_a_foreground_run_in_another_fiber(tmp_path: Path) -> None:
    """A foreground run in progress when the executor goes is killed and returns."""
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    tag = marker()
    async with open_root() as root:
        fiber = await root.plugin(LocalShell())
        shell = shell_of(root)
        spec = shell.resolve(ShellExecRequest(f"echo ready > {fifo}; sleep 1000 # {tag}"))
        results = []

        async def run() -> None:
            results.append(await shell.run(spec))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await read_fifo(fifo)
                await fiber.dispose()
    assert [r.status for r in results] == [JobStatus.KILLED]
    assert processes_with(tag) == []


def test_config_rejects_a_default_timeout_above_the_maximum() -> None:
    """The plugin's configuration is validated."""
    with pytest.raises(ValueError, match=r"^default_timeout \(700 s\) exceeds max_timeout"):
        LocalShell.Config(default_timeout=700)


# -- configuration and arguments -----------------------------------------------------------------


@pytest.mark.parametrize("field", ["default_timeout", "max_timeout", "output_cap", "kill_grace"])
@pytest.mark.parametrize("value", [0, -1, float("inf")])
def test_config_limits_are_positive_and_finite(field: str, value: float) -> None:
    """Every limit is validated, and the error names the field."""
    with pytest.raises(ValueError, match=rf"^{field} must be a positive finite number; got "):
        LocalShell.Config(**{field: value})  # type: ignore[arg-type]


async def test_the_executor_exposes_its_configuration(root: Context) -> None:
    """``config`` is the plugin configuration it was applied with."""
    assert shell_of(root).config.kill_grace == 0.5


@pytest.mark.parametrize("env", [{"": "x"}, {"A=B": "x"}, {"A": 1}, {1: "x"}])
async def test_bad_environment_entries_are_errors(root: Context, env: dict[object, object]) -> None:
    """Names are non-empty, without '=', and both sides are strings."""
    with pytest.raises(ShellRequestError, match=r"^environment entries are non-empty names"):
        shell_of(root).resolve(ShellExecRequest("true", env=env))  # type: ignore[arg-type]


async def test_on_job_done_takes_a_callable(root: Context) -> None:
    """A listener that cannot be called is refused at once."""
    with pytest.raises(TypeError, match=r"^on_job_done\(\) takes a callable; got 'nope'$"):
        shell_of(root).on_job_done("nope")  # type: ignore[arg-type]


@pytest.mark.listener_failures
async def test_an_async_listener_is_reported_and_the_others_still_run(root: Context) -> None:
    """Listeners are synchronous: an async one fails as ListenerFailed (its coroutine closed,
    never left unawaited), and the next listener and the bus still get the JobDone."""
    shell = shell_of(root)
    failures: list[ListenerFailed] = []
    on_bus: list[JobDone] = []
    root.on(ListenerFailed, failures.append)
    root.on(JobDone, on_bus.append)

    async def wrong(event: JobDone) -> None:
        raise AssertionError("never runs")

    done = trio.Event()
    shell.on_job_done(wrong)
    shell.on_job_done(lambda event: done.set())
    with trio.fail_after(10):
        job = await start(shell, "true")
        await done.wait()
    [failure] = failures
    assert failure.event == on_bus[0]
    assert on_bus[0].job_id == job.id
    assert failure.listener.endswith("wrong")
    assert isinstance(failure.error, TypeError)
    assert str(failure.error) == "on_job_done listeners are synchronous functions"


# -- the sweep: the shell exited, what is left of its group has not ------------------------------


def unreaped(pid: int) -> list[int]:
    """``[pid]`` while the process has a /proc entry (running, or a zombie not yet reaped)."""
    return [pid] if os.path.exists(f"/proc/{pid}") else []


async def reaped(pid: int) -> None:
    """Wait until the process ``pid`` has been reaped by its driver."""
    # Reaping is the driver's own step; no event announces it to a test.
    await gone(unreaped, pid)


def lingering(fifo: Path, tag: str) -> str:
    """A job whose shell exits at once, leaving a child that ignores SIGTERM, holds the
    output pipe, and ends when a line arrives on ``fifo``."""
    return f"trap '' TERM; (read line < {fifo}) & exit 0 # {tag}"


@pytest.fixture
async def patient_root() -> AsyncIterator[Context]:
    """A shell whose grace period is far longer than any of these tests."""
    async with open_root() as root:
        await root.plugin(LocalShell(), LocalShell.Config(kill_grace=60))
        yield root


async def test_a_job_runs_until_its_whole_group_has_ended(
    patient_root: Context, tmp_path: Path
) -> None:
    """After its shell exited, a job is still running while a child holds its output; kill()
    then reports it was not running any more, and returns only once the child is gone."""
    shell = shell_of(patient_root)
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    tag = marker()
    killed: list[bool] = []

    async def kill(job_id: str) -> None:
        killed.append(await shell.kill(job_id))

    with trio.fail_after(10):
        job = await start(shell, lingering(fifo, tag))
        await reaped(job.pid)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill, job.id)
            await trio.testing.wait_all_tasks_blocked()
            assert killed == []
            assert shell.read_output(job.id).status is JobStatus.RUNNING
            await write_fifo(fifo, "go\n")
    assert killed == [False]
    output = shell.read_output(job.id)
    assert (output.status, output.exit_code) == (JobStatus.EXITED, 0)
    assert processes_with(tag) == []


async def test_closing_waits_for_a_job_being_swept_and_reports_nothing(
    patient_root: Context, tmp_path: Path
) -> None:
    """aclose() awaits the leftover child of a job whose shell already exited; no JobDone is
    reported for it, since the executor is closing."""
    shell = shell_of(patient_root)
    heard: list[JobDone] = []
    patient_root.on(JobDone, heard.append)
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    tag = marker()
    closed = trio.Event()

    async def close() -> None:
        await shell.aclose()
        closed.set()

    with trio.fail_after(10):
        job = await start(shell, lingering(fifo, tag))
        await reaped(job.pid)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(close)
            await trio.testing.wait_all_tasks_blocked()
            assert not closed.is_set()
            assert shell.statistics() == ShellStatistics(running=1, jobs=1, closed=True)
            await write_fifo(fifo, "go\n")
    assert shell.statistics() == ShellStatistics(running=0, jobs=1, closed=True)
    assert shell.read_output(job.id).status is JobStatus.EXITED
    assert heard == []
    assert processes_with(tag) == []


async def test_a_leftover_child_ignoring_sigterm_is_killed_after_the_grace() -> None:
    """The sweep's SIGTERM, the grace period, then SIGKILL: no process outlives its job."""
    tag = marker()
    async with open_root() as root:
        await root.plugin(LocalShell(), {"kill_grace": 0.2})
        shell = shell_of(root)
        done: list[JobDone] = []
        finished = trio.Event()

        def heard(event: JobDone) -> None:
            done.append(event)
            finished.set()

        shell.on_job_done(heard)
        with trio.fail_after(10):
            job = await start(shell, f"trap '' TERM; sleep 1000 & echo started; exit 0 # {tag}")
            await finished.wait()
        assert done == [JobDone(job_id=job.id, exit_code=0, status=JobStatus.EXITED)]
        assert shell.read_output(job.id).output == "started\n"
        assert processes_with(tag) == []


async def test_a_run_spawned_while_the_executor_closes_is_killed_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that comes into existence after the close began is killed straight away."""
    real_open_process = trio.lowlevel.open_process
    spawning, release = trio.Event(), trio.Event()

    async def held_open_process(*args: Any, **kwargs: Any) -> trio.Process:
        spawning.set()
        await release.wait()
        return await real_open_process(*args, **kwargs)

    tag = marker()
    results: list[ShellResult] = []
    async with open_root() as root:
        await root.plugin(LocalShell(), {"kill_grace": 0.5})
        shell = shell_of(root)
        spec = shell.resolve(ShellExecRequest(f"sleep 1000 # {tag}"))

        async def run() -> None:
            results.append(await shell.run(spec))

        monkeypatch.setattr(trio.lowlevel, "open_process", held_open_process)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await spawning.wait()
                await shell.aclose()  # nothing runs yet, so this returns at once
                release.set()
    [result] = results
    assert (result.status, result.timed_out, result.exit_code) == (JobStatus.KILLED, False, -15)
    assert processes_with(tag) == []
