"""A live picture of the ownership tree: fibers, their entries in stack order, and what the
things they own say of themselves (``Fiber.snapshot``, ``Context.snapshot``).

Rules:
- A snapshot is taken synchronously, with no checkpoint: it is the tree at one instant.
- It is plain data: frozen attrs records that ``cattrs`` unstructures to JSON.
- Entries are listed in stack order, oldest first; teardown takes them newest first
  (:meth:`FiberSnapshot.teardown` lists the exits in the order they would run). A child
  fiber's tree and a section's entries are nested in the entry that owns them.
- The kernel knows fibers and entries only. What a fiber is beyond its stack, the layers
  above say through :class:`Describer`: the fiber's plugin, and each service the fiber
  provides, may define ``describe(now)``, whose record is the ``details`` of the fiber or of
  the service's entry. A describer that raises is shown as that error, never breaks the
  snapshot.
- Times are trio's clock (``trio.current_time()``), ``running_for`` in seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, final, runtime_checkable

import attrs
import trio

from ._states import FiberState

if TYPE_CHECKING:
    from ._fiber import Fiber
    from ._runtime import _Service
    from ._stack import Entry, OwnedStack

log = logging.getLogger("trio_agents")


@runtime_checkable
class Describer(Protocol):
    """What a plugin or a service defines to add to its fiber's snapshot."""

    def describe(self, now: float) -> object | None:
        """A frozen attrs record of what it is and does now (``now`` is trio's clock), or
        ``None``. Synchronous and quick: it runs while the whole tree is read."""


@final
@attrs.frozen
class EntrySnapshot:
    """One entry of a fiber's stack.

    Attributes:
        kind: what the entry owns: ``effect``, ``task``, ``defer``, ``service``, ``listener``,
            ``fiber`` or ``section``.
        label: its label (``"service shell"``, ``"task LocalShellExecutor._job"``).
        details: what a provided service says of itself (see :class:`Describer`), or ``None``.
        fiber: the child fiber a ``fiber`` entry owns.
        entries: the entries of a ``section``, oldest first.
        disposes: the id of the fiber a ``defer`` entry disposes (a co-owner's entry, such as
            the one a fiber that created an agent holds), or ``None``. That fiber is nested
            under its parent, and torn down by whichever of the two entries exits first.
    """

    kind: str
    label: str
    details: Any = None
    fiber: FiberSnapshot | None = None
    entries: tuple[EntrySnapshot, ...] = ()
    disposes: str | None = None


@final
@attrs.frozen
class FiberSnapshot:
    """One fiber and everything it owns, at the instant of the snapshot.

    Attributes:
        id: the fiber's id (``"agent:abc#12"``).
        name: its plugin's name.
        state: its :class:`FiberState`.
        running_for: seconds since the fiber was made.
        details: what its plugin says of it (see :class:`Describer`), or ``None``.
        entries: its stack, oldest first: teardown takes them newest first.
    """

    id: str
    name: str
    state: FiberState
    running_for: float
    details: Any = None
    entries: tuple[EntrySnapshot, ...] = ()

    def teardown(self) -> tuple[tuple[str, str], ...]:
        """Every exit of this tree, as ``(fiber id, entry label)``, in the order disposing the
        fiber would run them: newest entry first; a section's entries where it stands; a
        child fiber's where the first entry that disposes it stands (its own ``fiber``
        entry, or a co-owner's, see :attr:`EntrySnapshot.disposes`)."""
        exits = _Exits({fiber.id: fiber for fiber in self.fibers()})
        exits.fiber(self)
        return tuple(exits.found)

    def fibers(self) -> Iterator[FiberSnapshot]:
        """This fiber and every fiber below it, parents before children, in stack order."""
        yield self
        for entry in _walk(self.entries):
            if entry.fiber is not None:
                yield from entry.fiber.fibers()


@final
@attrs.define
class _Exits:
    """The exits of a tree in the order its teardown runs them (``FiberSnapshot.teardown``)."""

    fibers: dict[str, FiberSnapshot]
    done: set[str] = attrs.Factory(set)
    found: list[tuple[str, str]] = attrs.Factory(list)

    def fiber(self, fiber: FiberSnapshot) -> None:
        self.done.add(fiber.id)
        self.entries(fiber.id, fiber.entries)

    def entries(self, fiber_id: str, entries: tuple[EntrySnapshot, ...]) -> None:
        for entry in reversed(entries):
            target = entry.fiber.id if entry.fiber is not None else entry.disposes
            if target is not None and target in self.fibers:
                if target not in self.done:
                    self.fiber(self.fibers[target])
            elif entry.kind == "section":
                self.entries(fiber_id, entry.entries)
            else:
                self.found.append((fiber_id, entry.label))


def _walk(entries: tuple[EntrySnapshot, ...]) -> Iterator[EntrySnapshot]:
    for entry in entries:
        yield entry
        yield from _walk(entry.entries)


def snapshot_of(fiber: Fiber) -> FiberSnapshot:
    """The snapshot of ``fiber``'s tree, now (see the module rules)."""
    return _Reader(trio.current_time(), fiber.runtime._fibers, type(fiber)).fiber(fiber)


@final
@attrs.define
class _Reader:
    """Reads one tree at one instant ``now``."""

    now: float
    #: The live fibers of the runtime, with when each was made (a co-owner's entry disposes
    #: one of them).
    live: Mapping[Fiber, float]
    #: The class of fibers (this module is imported by its module, so it is handed in).
    fiber_type: type[Fiber]

    def fiber(self, fiber: Fiber) -> FiberSnapshot:
        stack = fiber._stack
        children = {child._entry: child for child in fiber._children}
        return FiberSnapshot(
            id=fiber.id,
            name=fiber.name,
            state=fiber.state,
            running_for=self.now - self.live.get(fiber, self.now),
            details=self.details(fiber.plugin),
            entries=self.entries(stack, children) if stack is not None else (),
        )

    def entries(
        self, stack: OwnedStack, children: dict[Entry | None, Fiber]
    ) -> tuple[EntrySnapshot, ...]:
        return tuple(self.entry(entry, children) for entry in stack._entries)

    def entry(self, entry: Entry, children: dict[Entry | None, Fiber]) -> EntrySnapshot:
        kind, label = entry._kind, entry.label
        child = children.get(entry)
        if child is not None:
            return EntrySnapshot(kind, label, fiber=self.fiber(child))
        # The kernel's own entries: a section's exit takes its stack first, a service's
        # exit takes its name and its record (Context.section, Runtime._provide).
        if kind == "section":
            nested: OwnedStack = entry._args[0]  # type: ignore[assignment]
            return EntrySnapshot(kind, label, entries=self.entries(nested, children))
        if kind == "service":
            service: _Service = entry._args[1]  # type: ignore[assignment]
            return EntrySnapshot(kind, label, details=self.details(service.value))
        return EntrySnapshot(kind, label, disposes=self.disposed_by(entry))

    def disposed_by(self, entry: Entry) -> str | None:
        """The id of the fiber ``entry``'s exit disposes, if it is a live fiber's disposer
        (``fiber.dispose``, or the disposer ``Fiber.guard`` handed out)."""
        fiber = getattr(entry._exit, "__self__", None)
        if not isinstance(fiber, self.fiber_type) or fiber not in self.live:
            return None
        return fiber.id if entry._exit in (fiber._dispose, fiber.dispose) else None

    def details(self, subject: object) -> object | None:
        if not isinstance(subject, Describer):
            return None
        try:
            return subject.describe(self.now)
        except Exception as exc:
            log.warning("describe() of %r failed during a snapshot", subject, exc_info=exc)
            return f"describe() failed: {type(exc).__name__}: {exc}"
