"""The store's bookkeeping of one session it prepared or loaded, held by the session.

Rules:
- The store that prepared or loaded a session makes its entry; every public method of a store
  takes a session only through :meth:`Entry.of`, which refuses a session of another store.
- The entry holds the backend's state for the session (of the store's type ``T``), who may end
  the session (``owner``; ``None``: anyone), whether ``SessionCreated`` was emitted, and, from
  the start of a detach or an abandon, the event that fires when that end is over (and its
  error), which every later end or flush joins.
"""

from __future__ import annotations

from typing import Generic, TypeVar, cast

import attrs
import trio

from ._errors import SessionInUseError
from ._session import Session
from ._state import SessionState

T = TypeVar("T")


@attrs.define(eq=False)
class Entry(Generic[T]):
    """The store's bookkeeping of one session (see the module's rules)."""

    store: object
    # The backend's state for the session (what `_begin` made).
    backend: T
    # Who may end the session (see SessionStore.enter), or None: anyone.
    owner: object = None
    announced: bool = False
    # Set once a detach or an abandon began; fired when it is over.
    ending: trio.Event | None = None
    end_error: BaseException | None = None

    @staticmethod
    def of(session: Session, store: object) -> Entry[object]:
        """The entry ``store`` made for ``session`` (the store knows its state's type).

        Raises:
            TypeError: ``session`` is not a :class:`Session`.
            ValueError: another store (or none) made the session.
        """
        if not isinstance(session, Session):
            raise TypeError(f"expected a Session; got {type(session).__name__}")
        entry = session._store_entry
        if not isinstance(entry, Entry) or entry.store is not store:
            raise ValueError(
                f"session {session.id!r} belongs to another store; use the store that "
                f"prepared or loaded it"
            )
        return cast("Entry[object]", entry)

    def check_owner(self, session: Session, owner: object, *, closing: bool) -> None:
        """Refuse to end ``session`` for ``owner`` unless it may (a closing store may).

        Raises:
            SessionInUseError: the session is being entered, or belongs to another owner.
        """
        if session.state is SessionState.ENTERING:
            raise SessionInUseError(
                f"session {session.id!r} is being entered; end it once enter() has returned"
            )
        if self.owner is not None and owner is not self.owner and not closing:
            raise SessionInUseError(
                f"session {session.id!r} belongs to a live agent; dispose the agent's handle "
                f"(AgentHandle.dispose) to end it"
            )

    async def join_end(self) -> None:
        """Wait until the session's end is over (a checkpoint); raise its error, if any."""
        assert self.ending is not None
        if self.ending.is_set():
            await trio.lowlevel.checkpoint()
        else:
            await self.ending.wait()
        if self.end_error is not None:
            raise self.end_error
