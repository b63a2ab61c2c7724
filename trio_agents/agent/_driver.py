"""``AgentDriver``: the capability to run and stop one agent, and what a factory builds.

Rules:
- :meth:`AgentFactory.build` returns a :class:`Built`: the agent, which anyone may hold, and
  its driver, which only the registry holds. Running, stopping, adopting into a parent and
  detaching are the driver's methods, so "only the handle holder can stop it" is enforced by
  who holds the object, as trio hands a ``TaskStatus`` only to the task it starts.
- The order in one agent's fiber: ``build`` (in the creating task, inside the fiber's
  ``apply``; raising rolls the creation back) → ``adopted`` (after the commit, no checkpoint
  in between) → ``run`` (a background task of the fiber) … teardown: ``stop`` (awaits
  ``run``'s exit and the agent's flushes) → the agent's scope unwinds → ``detached`` (the
  agent left the registry, just before ``AgentDisposed``). ``lose`` may come at any time
  after ``adopted``: the session can no longer be written here.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Generic, final

import attrs
from typing_extensions import TypeVar

from ._like import AgentLike

if TYPE_CHECKING:
    from ..cancel import CancelCause

A = TypeVar("A", bound=AgentLike, covariant=True)


class AgentDriver(abc.ABC):
    """Runs and stops one agent; made with the agent by its factory, held by the registry.

    The registry calls these methods, in the order of the module rules; nothing else should.
    """

    @abc.abstractmethod
    async def run(self) -> None:
        """The agent's work, from its publication until teardown: a background task of the
        agent's fiber, cancelled (with ``DisposedCancel``) after :meth:`stop` returned."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """The first step of teardown: make :meth:`run` exit and await that exit and the
        agent's last flush (quiescence, not a status flip)."""

    @abc.abstractmethod
    def adopted(self) -> None:
        """The agent is committed; if it has a parent, that parent now owns it."""

    @abc.abstractmethod
    def detached(self) -> None:
        """The agent left the registry; ``AgentDisposed`` follows."""

    @abc.abstractmethod
    def lose(self, cause: CancelCause) -> None:
        """The agent's session can no longer be written here (``cause`` says why, e.g.
        :class:`~trio_agents.cancel.LeaseLost`): stop it at once, synchronously, so that no
        model or tool call starts from now on; its teardown follows."""


@final
@attrs.frozen
class Built(Generic[A]):
    """What :meth:`AgentFactory.build` returns: the agent and the capability to drive it.

    Attributes:
        agent: the agent, as ``ctx.agents`` hands it out.
        driver: runs and stops it; the registry keeps it and gives it to nobody.
    """

    agent: A
    driver: AgentDriver = attrs.field(repr=False)
