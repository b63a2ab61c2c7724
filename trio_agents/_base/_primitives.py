"""Low-level primitives: one-shot signals that cost less than :class:`trio.Event` while idle.

Contract (what the kernel and the agent rely on):
- :class:`Signal` is a :class:`trio.Event` (``set``, ``is_set``, ``wait``) for any number of
  waiters. ``set()`` is sticky and idempotent; ``wait()`` is a checkpoint either way and
  returns once the signal is set. It makes its event (an event and its parking lot, about
  0.5 KiB) only when a ``wait()`` has to block: a fiber or an agent holds signals that nobody
  awaits for most of its life (its end, its application's end).
- :class:`Wake` is a one-shot wake-up for **one** waiting task, what a fiber's task and an
  agent's loop park on while idle. ``set()`` is sticky and idempotent; ``wait()`` is a
  checkpoint either way; a second task waiting while one waits raises ``RuntimeError``. The
  waiter parks itself with :func:`trio.lowlevel.wait_task_rescheduled` and ``set()``
  reschedules it, so an idle task holds no event and no parking lot. A cancelled waiter
  leaves, and the next task may wait.
- Both are async functions, like every blocking call of trio: calling ``wait()`` does
  nothing until it is awaited, in the task that awaits it (``nursery.start_soon(wake.wait)``
  parks the new task, pinned by ``tests/base/test_primitives.py``).
"""

from __future__ import annotations

from typing import final

import attrs
import trio


@final
@attrs.define(eq=False, repr=False)
class Signal:
    """Like :class:`trio.Event` (``set``, ``is_set``, ``wait``), its event made lazily.

    Trick: the event is made by the first ``wait()`` that blocks. An idle agent holds five
    signals nobody awaits (its fiber's end and its application's end, its task's end, its
    own end...): eager events would be 1,360 B more per idle agent (``python -m benchmarks
    --only memory``; docs/design.rst, "Memory per idle agent").
    """

    _set: bool = attrs.field(default=False, init=False)
    _event: trio.Event | None = attrs.field(default=None, init=False)

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Set the signal and wake every waiter."""
        if not self._set:
            self._set = True
            if self._event is not None:
                self._event.set()

    async def wait(self) -> None:
        """Return once the signal is set (a checkpoint either way)."""
        if self._set:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()

    def __repr__(self) -> str:
        return f"<Signal {'set' if self._set else 'unset'}>"


@final
@attrs.define(eq=False, repr=False)
class Wake:
    """A one-shot wake-up for a single waiting task (see the module's contract).

    Trick: an idle agent's fiber task and its loop each park on one. Parked on a lazy
    :class:`Signal` instead (an event, its parking lot and their frames) they would hold
    1,360 B more per idle agent (``python -m benchmarks --only memory``; docs/design.rst,
    "Memory per idle agent"). ``wait()`` is a coroutine like any async call: its frame is
    224 B per parked task, 448 B per idle agent.

    Raises:
        RuntimeError: a second task waits while one is waiting.
    """

    _set: bool = attrs.field(default=False, init=False)
    _task: trio.lowlevel.Task | None = attrs.field(default=None, init=False)

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def set(self) -> None:
        """Set it and wake the waiter, if one waits."""
        if self._set:
            return
        self._set = True
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        """Return once it is set (a checkpoint either way).

        Raises:
            RuntimeError: another task is waiting already.
        """
        if self._set:
            await trio.lowlevel.checkpoint()
            return
        if self._task is not None:
            raise RuntimeError(f"{self!r} already has a waiter ({self._task.name})")
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED

    def __repr__(self) -> str:
        return f"<Wake {'set' if self._set else 'unset'}>"
