"""A second :class:`AgentFactory`: agents that echo each prompt, with no model loop.

Checked by ``nox -s typecheck`` with ``--disallow-any-expr`` (the comment below), so a seam
of the factory API that hands ``Any`` to its user fails the type check; ``assert_type`` pins
what a runtime with this factory gives. ``tests/agent/test_factory.py`` runs it.
"""
# mypy: disallow-any-expr

from __future__ import annotations

from typing import Final, assert_type

import trio

import trio_agents as ta
from trio_agents.agent import (
    AgentDriver,
    AgentFactory,
    AgentRegistry,
    AgentRequest,
    Built,
    MessageId,
)
from trio_agents.session import (
    AssistantMessage,
    Session,
    SessionStore,
    StopReason,
    TurnEnded,
    TurnStarted,
    UserMessage,
)

__all__ = ["ECHO_AGENTS", "EchoAgent", "EchoDriver", "EchoFactory", "TypedEchoPlugin"]


class EchoAgent:
    """Answers each prompt with its own text, one at a time, in arrival order: a turn of
    records (``TurnStarted``, ``UserMessage``, ``AssistantMessage``, ``TurnEnded``) and the
    text as ``AgentOutput``, which is all the ACP bridge reads of an agent."""

    def __init__(self, request: AgentRequest[EchoAgent]) -> None:
        self.session: Session = request.session
        self.parent: EchoAgent | None = request.parent
        self.answers: list[str] = []
        self._store: SessionStore = request.store
        self._emit = request.context.emit
        self._status = ta.AgentStatus.IDLE
        self._queue: list[tuple[MessageId, str]] = []
        self._numbers = 0
        self._closing = False
        self._wake = trio.Event()
        self._changed = trio.Event()
        self._done = trio.Event()

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def status(self) -> ta.AgentStatus:
        return self._status

    def prompt(self, content: str) -> MessageId:
        return self._add(content, wake=True)

    def steer(self, content: str) -> MessageId:
        return self._add(content, wake=True)

    def inject(self, content: str) -> MessageId:
        return self._add(content, wake=False)

    def cancel(self, cause: ta.CancelCause | None = None, *, keep_inbox: bool = False) -> bool:
        if keep_inbox or self._closing or not self._queue:
            return False
        self._emit(ta.AgentCancelRequested(agent_id=self.id, cause=cause or ta.UserCancel()))
        self._queue.clear()
        self._notify()
        return True

    async def when_idle(self) -> None:
        while (self._queue or self._status is ta.AgentStatus.RUNNING) and not self._done.is_set():
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    def _add(self, content: str, *, wake: bool) -> MessageId:
        if self._closing:
            raise ta.AgentClosedError(f"echo agent {self.id} is closing; it takes no messages")
        self._numbers += 1
        message_id = MessageId(f"m-{self._numbers}")
        self._queue.append((message_id, content))
        if wake:
            self._wake.set()
        return message_id

    def _move(self, new: ta.AgentStatus) -> None:
        if new is not self._status:
            old, self._status = self._status, new
            self._emit(ta.AgentStatusChanged(agent_id=self.id, old=old, new=new))
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _serve(self) -> None:
        try:
            while not self._closing:
                self._wake = trio.Event()
                if not self._queue:
                    self._move(ta.AgentStatus.IDLE)
                    await self._wake.wait()
                    continue
                self._move(ta.AgentStatus.RUNNING)
                message_id, content = self._queue.pop(0)
                turn_id = f"t-{len(self.answers) + 1}"
                self.session.append(TurnStarted(turn_id=turn_id))
                self.session.append(
                    UserMessage(message_id=message_id, content=content, turn_id=turn_id)
                )
                self._emit(ta.AgentOutput(agent_id=self.id, turn_id=turn_id, text=content))
                self.session.append(AssistantMessage(turn_id=turn_id, content=content))
                self.session.append(TurnEnded(turn_id=turn_id, stop_reason=StopReason.COMPLETED))
                self.answers.append(content)
                self._notify()
                await trio.lowlevel.checkpoint()
        finally:
            self._done.set()
            self._notify()

    async def _stop(self) -> None:
        if not self._closing:
            self._closing = True
            self._move(ta.AgentStatus.DISPOSING)
        self._wake.set()
        await self._done.wait()
        await self._store.flush(self.session)


class EchoDriver(AgentDriver):
    """Runs and stops one :class:`EchoAgent`, logging each step in its factory's log."""

    def __init__(self, agent: EchoAgent, log: list[str]) -> None:
        self._agent = agent
        self._log = log

    async def run(self) -> None:
        self._log.append(f"run {self._agent.id}")
        try:
            await self._agent._serve()
        finally:
            self._log.append(f"run exited {self._agent.id}")

    async def stop(self) -> None:
        self._log.append(f"stop {self._agent.id}")
        await self._agent._stop()

    def adopted(self) -> None:
        self._log.append(f"adopted {self._agent.id}")

    def detached(self) -> None:
        self._agent._move(ta.AgentStatus.DISPOSED)
        self._log.append(f"detached {self._agent.id}")

    def lose(self, cause: ta.CancelCause) -> None:
        self._agent.cancel(cause)


class EchoFactory(AgentFactory[EchoAgent]):
    """Builds :class:`EchoAgent` s and logs each step of their lives, in order."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def build(self, request: AgentRequest[EchoAgent]) -> Built[EchoAgent]:
        self.log.append(f"build {request.session.id}")
        agent = EchoAgent(request)
        return Built(agent, EchoDriver(agent, self.log))


#: The ``agents`` service of a runtime whose factory is :class:`EchoFactory`, typed for it.
ECHO_AGENTS: Final = ta.ServiceKey[AgentRegistry[EchoAgent]]("agents")


class TypedEchoPlugin:
    """Reaches echo agents through the typed key: the factory's agent type, not ``Agent``."""

    name = "typed-echo-plugin"
    inject = (ECHO_AGENTS,)

    def __init__(self) -> None:
        self.answers: list[str] = []

    async def apply(self, ctx: ta.Context, config: None) -> None:
        agents = ctx.service(ECHO_AGENTS)
        assert_type(agents, AgentRegistry[EchoAgent])
        handle = await agents.create(session_id="typed-echo")
        assert_type(handle.agent, EchoAgent)
        handle.agent.prompt("typed")
        await handle.agent.when_idle()
        found = agents.get("typed-echo")
        assert_type(found, EchoAgent | None)
        self.answers.extend(found.answers if found is not None else ())
        await handle.dispose()
