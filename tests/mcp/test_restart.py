"""An MCP server that goes away after it started: restarted under its policy, or left down;
never a failure of its fiber or of the runtime."""

from __future__ import annotations

import logging
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.mcp_support import SERVERS, invoke, registry, tools_server
from tests.helpers.support import gone, unreaped
from trio_agents.kernel import Context, FiberFailed, FiberState
from trio_agents.mcp import (
    McpConfigError,
    McpRestart,
    McpServer,
    McpServerError,
    McpServerFailed,
    McpServerRestarted,
)
from trio_agents.mcp._restart import Backoff

#: Restarts at once (the backoff's arithmetic is tested on its own, without a server).
QUICK = McpRestart(first_delay=0.0)


@attrs.define
class Seen:
    """The failures and restarts of the MCP servers of a runtime, as they are emitted."""

    failed: list[McpServerFailed] = attrs.Factory(list)
    restarted: list[McpServerRestarted] = attrs.Factory(list)
    fiber_failed: list[FiberFailed] = attrs.Factory(list)
    _changed: trio.Event = attrs.Factory(trio.Event)

    def attach(self, root: Context) -> None:
        root.on(McpServerFailed, self._note)
        root.on(McpServerRestarted, self._note)
        root.on(FiberFailed, self._note)

    def _note(self, event: McpServerFailed | McpServerRestarted | FiberFailed) -> None:
        if isinstance(event, McpServerFailed):
            self.failed.append(event)
        elif isinstance(event, McpServerRestarted):
            self.restarted.append(event)
        else:
            self.fiber_failed.append(event)
        self._changed.set()
        self._changed = trio.Event()

    async def until(self, failed: int, restarted: int) -> None:
        with trio.fail_after(30):
            while len(self.failed) < failed or len(self.restarted) < restarted:
                await self._changed.wait()


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with ag.open_runtime() as root:
        yield root


async def test_a_crashed_server_is_restarted_and_its_tools_work_again(root: Context) -> None:
    """The server exits mid-call: an event says it failed and when it restarts; it comes back
    (a new process), its tools are registered again and answer; the fiber stays active."""
    seen = Seen()
    seen.attach(root)
    fiber = await root.plugin(tools_server(restart=QUICK))
    first = int((await invoke(root, "t__pid")).content)
    crashed = await invoke(root, "t__crash")
    assert crashed.is_error
    assert re.match(
        r"^MCP server 't' closed its connection during the call to 'crash'", (crashed.content)
    )
    await seen.until(failed=1, restarted=1)
    [failure] = seen.failed
    assert (failure.server, failure.failures, failure.retry_in) == ("t", 1, 0.0)
    assert re.match(r"^MCP server 't' closed its connection \(.*tools_server\.py\)", failure.reason)
    assert failure.reason.endswith("its stderr ends with: crashing on purpose")
    assert seen.restarted == [McpServerRestarted(server="t", failures=1)]
    assert {"t__add", "t__pid"} <= set(registry(root).names())
    assert (await invoke(root, "t__add", a=2, b=3)).content == "5"
    assert int((await invoke(root, "t__pid")).content) != first
    await gone(unreaped, first)
    assert fiber.state is FiberState.ACTIVE
    assert seen.fiber_failed == []


async def test_past_the_limit_the_server_stays_down_and_the_runtime_exits_cleanly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """max_restarts=1: the second crash leaves it down (retry_in None, an error log line), its
    tools removed, its fiber active; leaving the runtime raises nothing."""
    seen = Seen()
    with caplog.at_level(logging.WARNING, "trio_agents"):
        async with ag.open_runtime() as root:
            seen.attach(root)
            fiber = await root.plugin(tools_server(restart=attrs.evolve(QUICK, max_restarts=1)))
            await invoke(root, "t__crash")
            await seen.until(failed=1, restarted=1)
            pid = int((await invoke(root, "t__pid")).content)
            await invoke(root, "t__crash")
            await seen.until(failed=2, restarted=1)
            assert [(f.failures, f.retry_in) for f in seen.failed] == [(1, 0.0), (2, None)]
            assert registry(root).names() == ()
            down = await invoke(root, "t__add", a=1, b=1)
            assert down.is_error
            assert down.content.startswith("unknown tool 't__add'")
            assert fiber.state is FiberState.ACTIVE
    await gone(unreaped, pid)
    assert seen.fiber_failed == []
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    [line] = errors
    assert re.match(r"^MCP server 't' closed its connection \(", line)
    assert line.endswith("; it stays down after 2 failures in a row: apply the plugin again")
    [warning] = [r.getMessage() for r in caplog.records if "restarting it in" in r.getMessage()]
    assert warning.endswith("; restarting it in 0 s (restart 1 of at most 1 in a row)")


async def test_without_restart_a_crashed_server_stays_down(root: Context) -> None:
    """restart=None: the first exit leaves it down at once, its fiber active, its tools gone."""
    seen = Seen()
    seen.attach(root)
    fiber = await root.plugin(tools_server(restart=None))
    pid = int((await invoke(root, "t__pid")).content)
    os.kill(pid, signal.SIGKILL)
    await seen.until(failed=1, restarted=0)
    [failure] = seen.failed
    assert (failure.failures, failure.retry_in) == (1, None)
    assert registry(root).names() == ()
    assert fiber.state is FiberState.ACTIVE
    with trio.fail_after(10):
        await fiber.dispose()
    assert fiber.state.is_final
    assert seen.restarted == []


async def test_a_restart_that_fails_to_start_counts_as_a_failure(
    root: Context, tmp_path: Path
) -> None:
    """A server that will not start again: each try is a failure naming its stderr, until the
    limit leaves it down."""
    seen = Seen()
    seen.attach(root)
    script = str(SERVERS / "start_once.py")
    server = McpServer(
        "once",
        command=sys.executable,
        args=(script, str(tmp_path / "started")),
        restart=attrs.evolve(QUICK, max_restarts=2),
    )
    fiber = await root.plugin(server)
    await invoke(root, "once__crash")
    await seen.until(failed=3, restarted=0)
    assert [(f.failures, f.retry_in) for f in seen.failed] == [(1, 0.0), (2, 0.0), (3, None)]
    for failure in seen.failed[1:]:
        assert re.match(r"^MCP server 'once' failed to start \(", failure.reason)
        assert failure.reason.endswith("refusing to start again")
    assert registry(root).names() == ()
    assert fiber.state is FiberState.ACTIVE


async def test_leaving_the_runtime_right_after_a_crash_raises_nothing() -> None:
    """The server dies during a call and the application leaves at once (the race that made
    open_runtime's exit raise McpServerError now and then): a clean exit, every time."""
    for _ in range(3):
        async with ag.open_runtime() as root:
            await root.plugin(tools_server())
            pid = int((await invoke(root, "t__pid")).content)
            assert (await invoke(root, "t__crash")).is_error
        await gone(unreaped, pid)


async def test_leaving_the_runtime_while_a_restart_waits_ends_it(root: Context) -> None:
    """A teardown during the backoff cancels the restart: no new process, the fiber disposed."""
    seen = Seen()
    seen.attach(root)
    fiber = await root.plugin(
        tools_server(restart=McpRestart(first_delay=3600.0, max_delay=3600.0))
    )
    await invoke(root, "t__crash")
    await seen.until(failed=1, restarted=0)
    assert seen.failed[0].retry_in == 3600.0
    with trio.fail_after(10):
        await fiber.dispose()
    assert fiber.state is FiberState.DISPOSED
    assert seen.restarted == []


async def test_a_server_that_fails_at_start_is_still_the_plugins_error(root: Context) -> None:
    """Restarts are for a server that had started: one that never does makes ctx.plugin
    raise, with the default policy, and no failure event is emitted."""
    seen = Seen()
    seen.attach(root)
    server = McpServer("bad", command=sys.executable, args=(str(SERVERS / "not_mcp.py"),))
    assert server.restart == McpRestart()
    with pytest.raises(McpServerError, match=r"^MCP server 'bad' failed to start \("):
        await root.plugin(server)
    assert seen.failed == []


def test_the_backoff_doubles_up_to_its_cap_and_gives_up_past_the_limit() -> None:
    """Defaults: 5 restarts waiting 0.5, 1, 2, 4, 8 s; the 6th failure in a row is final."""
    backoff = Backoff(McpRestart())
    backoff.up(0.0)
    delays = [backoff.ended(1.0) for _ in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, None]
    capped = Backoff(McpRestart(max_restarts=100))
    assert [capped.ended(0.0) for _ in range(9)][-3:] == [30.0, 30.0, 30.0]


def test_a_stable_connection_starts_the_count_again() -> None:
    """A connection that stayed up reset_after seconds resets the failures; a short one not."""
    backoff = Backoff(McpRestart(max_restarts=2, reset_after=60.0))
    backoff.up(0.0)
    assert backoff.ended(10.0) == 0.5
    backoff.up(11.0)
    assert backoff.ended(12.0) == 1.0
    backoff.up(13.0)
    assert backoff.ended(73.0) == 0.5
    assert backoff.failures == 1
    assert Backoff(None).ended(0.0) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, McpRestart()), (False, None), (None, None), (McpRestart(3), McpRestart(3))],
)
def test_restart_takes_a_policy_true_or_off(value: object, expected: McpRestart | None) -> None:
    """``restart``: a policy, True (the defaults), or None/False (stays down)."""
    assert McpServer("s", command="x", restart=value).restart == expected


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_restarts": -1}, r"^restart max_restarts must be an integer >= 0; got -1$"),
        ({"first_delay": float("inf")}, r"^restart first_delay must be seconds >= 0; got inf$"),
        ({"reset_after": "1"}, r"^restart reset_after must be seconds >= 0; got '1'$"),
    ],
)
def test_a_bad_policy_is_refused(fields: dict[str, object], message: str) -> None:
    """Negative, infinite or non-numeric fields of McpRestart are refused, naming the field."""
    with pytest.raises(McpConfigError, match=message):
        McpRestart(**fields)  # type: ignore[arg-type]
