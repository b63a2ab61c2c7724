"""``EventCollector``: the events a runtime emitted, kept in order for a test to read or await.

Rules:
- A collector listens through ``ctx.on`` (an entry of that context's fiber, so it stops when
  the fiber unloads) and keeps every event of its type, optionally only one agent's
  (events that carry an ``agent_id``).
- ``wait_for`` has a cursor: it returns the first matching event *after* the one it returned
  last, waiting if there is none yet; events emitted before the call count, so a test never
  misses an event by awaiting it too late.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, final, overload

import trio

from ..agent import Agent, AgentOutput
from ..kernel import Context

E = TypeVar("E")
T = TypeVar("T")


@final
class EventCollector(Generic[E]):
    """The events of one type seen since the collector started (see :func:`collect_events`)."""

    __slots__ = ("_agent_id", "_arrived", "_cursor", "_events")

    def __init__(self, agent_id: str | None = None) -> None:
        self._agent_id = agent_id
        self._events: list[E] = []
        self._cursor = 0
        self._arrived = trio.Event()

    @property
    def events(self) -> tuple[E, ...]:
        """Every collected event, oldest first (a snapshot)."""
        return tuple(self._events)

    def of_type(self, event_type: type[T]) -> list[T]:
        """The collected events that are instances of ``event_type``, oldest first."""
        return [e for e in self._events if isinstance(e, event_type)]

    def output_text(self, turn_id: str | None = None) -> str:
        """The streamed model text (:class:`AgentOutput`) joined, of one turn or of all."""
        return "".join(
            e.text for e in self.of_type(AgentOutput) if turn_id is None or e.turn_id == turn_id
        )

    def clear(self) -> None:
        """Forget the events collected so far (and reset the cursor of ``wait_for``)."""
        self._events.clear()
        self._cursor = 0

    async def wait_for(
        self, event_type: type[T], predicate: Callable[[T], bool] | None = None
    ) -> T:
        """Return the next event of ``event_type`` that satisfies ``predicate``, after the one
        this method returned last; wait if none has arrived yet.

        Args:
            event_type: the class of event wanted (``object`` for any).
            predicate: a further test the event must pass.
        """
        while True:
            for index in range(self._cursor, len(self._events)):
                event = self._events[index]
                if isinstance(event, event_type) and (predicate is None or predicate(event)):
                    self._cursor = index + 1
                    await trio.lowlevel.checkpoint()
                    return event
            await self._arrived.wait()

    def _append(self, event: E) -> None:
        if self._agent_id is not None and getattr(event, "agent_id", None) != self._agent_id:
            return
        self._events.append(event)
        self._arrived.set()
        self._arrived = trio.Event()

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        return f"<EventCollector events={len(self._events)}>"


@overload
def collect_events(ctx: Context, *, agent: Agent | str | None = None) -> EventCollector[object]: ...


@overload
def collect_events(
    ctx: Context, event_type: type[E], *, agent: Agent | str | None = None
) -> EventCollector[E]: ...


def collect_events(
    ctx: Context, event_type: type[E] | type[object] = object, *, agent: Agent | str | None = None
) -> EventCollector[E] | EventCollector[object]:
    """Start collecting the events of ``event_type`` (all, by default) emitted in ``ctx``'s
    runtime, while ``ctx``'s fiber is loaded.

    Args:
        ctx: the context whose fiber owns the listener (the test's root, usually).
        event_type: the class of event to keep; subclasses count.
        agent: keep only the events of this agent (or agent id), those with its ``agent_id``.
    """
    agent_id = agent.id if isinstance(agent, Agent) else agent
    collector: EventCollector[Any] = EventCollector(agent_id)
    ctx.on(event_type, collector._append)
    return collector
