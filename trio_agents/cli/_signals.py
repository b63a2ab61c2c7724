"""How the command ends on a signal: SIGINT, SIGTERM and SIGHUP tear down the same way.

Rules:
- While a command runs, its trio run owns SIGINT, SIGTERM and SIGHUP (one receiver, opened
  before the command starts). A command may open its own SIGINT receiver over it (``chat`` and
  ``run``: Ctrl-C cancels the turn); while that is open, SIGINT is the command's.
- The first of them cancels the *body* of the command's runtime (what runs inside
  ``open_cli_runtime``, plugins' start included), which then raises :exc:`Terminated`: the
  runtime unwinds as it does for Ctrl-C's ``KeyboardInterrupt``, with its services (the session
  writer, the shell) still running, so every shell job is killed and awaited and every session
  flushed. Outside a runtime's body (before it opens) the command itself is cancelled.
  The exit status is 128 + the signal's number (130, 143, 129), after one line on stderr.
- After the run, while the command waits for a reader to take the rest of its output
  (:func:`stoppable`), the first SIGINT, SIGTERM or SIGHUP ends the wait and the command,
  with the same line and status.
- SIGHUP means the terminal is gone: the standard streams that are terminals are pointed at
  ``/dev/null`` first, so the teardown never fails on a write to a closed terminal.
- A signal that arrives while the runtime is already tearing down, or after a first one (a
  second Ctrl-C, say), cancels nothing more: it gives the teardown :data:`FORCE_GRACE` seconds
  more. If it is not over by then, the process writes what it can of the live sessions
  (bounded), prints one line naming the plugins still tearing down, and exits at once with
  ``os._exit``. On Linux the job supervisors see their control socket close and end every job
  process on their own.
- SIGUSR1 prints the ownership tree of each runtime the command opened (``ctx.snapshot()``,
  drawn as chat's ``/tree`` draws it) to stderr, and changes nothing: the command goes on.
  Before a runtime is open it prints one line that says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import final

import trio

from ..kernel import Context, FiberState
from ._tree_view import render_tree

#: Seconds a teardown gets after a further signal before the process exits regardless.
FORCE_GRACE = 3.0
#: Seconds the forced exit spends writing live sessions.
_FLUSH_BOUND = 1.0

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The signal that prints the ownership tree (none where the platform has no SIGUSR1).
_TREE = getattr(signal, "SIGUSR1", None)
_WORDS = {
    signal.SIGINT: "interrupted",
    signal.SIGTERM: "terminated (SIGTERM)",
    signal.SIGHUP: "hung up (SIGHUP)",
}

_CURRENT: contextvars.ContextVar[Termination | None] = contextvars.ContextVar(
    "trio_agents_termination", default=None
)


class Terminated(BaseException):
    """A signal ended the runtime's body (a ``BaseException``, like ``KeyboardInterrupt``, so
    that no ``except Exception`` stops it on its way out)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"ended by signal {signum}")
        self.signum = signum


@final
class Termination:
    """What the command's signal watcher knows: the first signal and the runtime it ends."""

    def __init__(self) -> None:
        #: The first signal received, if any.
        self.signum: int | None = None
        self._roots: list[Context] = []
        self._bodies: list[trio.CancelScope] = []
        self._forcing = False
        # Asked now: once a terminal has hung up, isatty() on it is False (tcgetattr: EIO).
        self._terminals = [fd for fd in (1, 2) if os.isatty(fd)]

    @property
    def status(self) -> int | None:
        """128 + the first signal's number, or ``None`` when no signal came."""
        return None if self.signum is None else 128 + self.signum

    @property
    def line(self) -> str:
        """The line that says how the command ended."""
        assert self.signum is not None
        return ended_by(self.signum)

    def _tearing_down(self) -> bool:
        return any(root.fiber.state is not FiberState.ACTIVE for root in self._roots)

    def unloading(self) -> list[str]:
        """The plugins whose teardown is under way and has no unloading child: the stuck ones."""
        found = []
        for root in self._roots:
            for fiber in root.fiber.runtime.fibers:
                if fiber.state is not FiberState.UNLOADING or fiber is root.fiber:
                    continue
                if not any(c.state is FiberState.UNLOADING for c in fiber.children):
                    found.append(f"plugin {fiber.name!r} ({fiber.id})")
        return found

    async def watch(
        self,
        signals: trio.abc.ReceiveChannel[int],
        command: trio.CancelScope,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Cancel ``command`` on the first signal; force the exit if a later one is ignored."""
        task_status.started()
        async with trio.open_nursery() as nursery:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    _silence(self._terminals)
                again = self.signum is not None or self._tearing_down()
                if self.signum is None:
                    self.signum = signum
                if not again:
                    # Invariant: cancelling a body leaves the runtime's own tasks running.
                    for body in self._bodies or [command]:
                        body.cancel()
                elif not self._forcing:
                    self._forcing = True
                    nursery.start_soon(self._force)

    def print_trees(self) -> None:
        """Print the ownership tree of every runtime of the command to stderr."""
        if not self._roots:
            print("trio-agents: no runtime is open yet (no tree to show)", file=sys.stderr)
        width = os.get_terminal_size(2).columns if os.isatty(2) else 100
        for root in self._roots:
            try:
                tree = render_tree(root.snapshot(), width=width)
            except Exception as exc:  # a debugging aid must not end the command
                tree = f"trio-agents: the ownership tree could not be drawn: {exc!r}"
            print(tree, file=sys.stderr)
        sys.stderr.flush()

    async def show_trees(
        self,
        signals: trio.abc.ReceiveChannel[int],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Print the trees (:meth:`print_trees`) on every signal received."""
        task_status.started()
        async for _ in signals:
            self.print_trees()

    async def _force(self) -> None:
        await trio.sleep(FORCE_GRACE)
        with trio.move_on_after(_FLUSH_BOUND):
            await self._flush()
        stuck = self.unloading()
        where = f" (still tearing down: {', '.join(stuck)})" if stuck else ""
        print(
            f"trio-agents: the teardown did not end within {FORCE_GRACE:g} s of the second "
            f"signal; exiting now{where}",
            file=sys.stderr,
            flush=True,
        )
        print(self.line, file=sys.stderr, flush=True)
        os._exit(self.status or 1)

    async def _flush(self) -> None:
        for root in self._roots:
            store, agents = root.get("sessions"), root.get("agents")
            if store is None or agents is None:
                continue
            for agent in agents.list():
                try:
                    await store.flush(agent.session)
                except Exception:  # best effort on the way out: the next session may work
                    continue


def ended_by(signum: int) -> str:
    """The line that says a signal ended the command: ``trio-agents: terminated (SIGTERM)``."""
    return f"trio-agents: {_WORDS.get(signal.Signals(signum), 'signalled')}"


class _Stopped(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop(signum: int, _: object) -> None:
    raise _Stopped(signum)


def stoppable(wait: Callable[[], None]) -> int | None:
    """Run the blocking ``wait()`` (outside trio: the command's run is over) so that SIGINT,
    SIGTERM or SIGHUP end it; returns the exit status of the signal (128 + its number, after
    its line on stderr), or ``None`` when ``wait()`` returned."""
    previous = {signum: signal.signal(signum, _stop) for signum in _SIGNALS}
    try:
        wait()
    except _Stopped as stopped:
        print(ended_by(stopped.signum), file=sys.stderr)
        return 128 + stopped.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return None


def _silence(fds: list[int]) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)


@contextmanager
def terminable(root: Context) -> Iterator[None]:
    """The body of ``root``'s runtime, which a signal cancels (a no-op outside
    :func:`guarded`).

    Raises:
        Terminated: a signal cancelled the body.
    """
    termination = _CURRENT.get()
    if termination is None:
        yield
        return
    # The root stays known to the end of the command: its teardown comes after the body.
    termination._roots.append(root)
    with trio.CancelScope() as scope:
        termination._bodies.append(scope)
        try:
            yield
        finally:
            termination._bodies.remove(scope)
    if scope.cancelled_caught:
        assert termination.signum is not None
        raise Terminated(termination.signum)


async def guarded(termination: Termination, command: Callable[[], Awaitable[int]]) -> int:
    """Run ``command()`` with SIGINT, SIGTERM and SIGHUP ending it as the rules say."""
    error: BaseException | None = None
    status = 1
    with contextlib.ExitStack() as stack:
        signals = stack.enter_context(trio.open_signal_receiver(*_SIGNALS))
        trees = stack.enter_context(trio.open_signal_receiver(_TREE)) if _TREE else None
        token = _CURRENT.set(termination)
        try:
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()
                await nursery.start(termination.watch, signals, scope)
                if trees is not None:
                    await nursery.start(termination.show_trees, trees)
                with scope:
                    status = await command()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Invariant: the watcher never raises, so the group holds what the command
            # raised: the caller sees that, not the nursery's wrapper.
            if len(group.exceptions) != 1:
                raise
            error = group.exceptions[0]
        finally:
            _CURRENT.reset(token)
    if error is not None:
        raise error
    return termination.status if termination.status is not None else status
