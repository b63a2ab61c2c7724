"""``AgentLike``: an agent as everything but its builder sees it.

The registry, the ACP bridge, the shell tools, the command and every tool hold agents as this
protocol only: identity, state, the inbox and the one public stop. Running and tearing down an
agent are not here: they are its :class:`~._driver.AgentDriver`'s, held by the registry alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..cancel import CancelCause
    from ..session import Session
    from ._inbox import MessageId
    from ._status import AgentStatus


@runtime_checkable
class AgentLike(Protocol):
    """The interface of an agent as the registry, the ACP bridge, the shell tools and the
    command use it. :class:`Agent` is one; an agent of another :class:`AgentFactory` (another
    loop, a process, a remote agent) is another."""

    @property
    def id(self) -> str:
        """The agent's id, which is its session's id."""

    @property
    def session(self) -> Session:
        """The agent's session (entered by the registry before the agent was built)."""

    @property
    def parent(self) -> AgentLike | None:
        """The agent that owns this one, or ``None``."""

    @property
    def status(self) -> AgentStatus:
        """The current :class:`AgentStatus`."""

    def prompt(self, content: str) -> MessageId:
        """Queue ``content`` as the input of a turn of its own; never blocks."""

    def steer(self, content: str) -> MessageId:
        """Queue ``content`` for the next step of the running turn."""

    def inject(self, content: str) -> MessageId:
        """Queue ``content`` for the next step, without waking an idle agent."""

    def cancel(self, cause: CancelCause | None = None, *, keep_inbox: bool = False) -> bool:
        """The single public stop: whether it cleared or aborted anything."""

    async def when_idle(self) -> None:
        """Return when the agent is idle with nothing wakeable queued, or closed."""
