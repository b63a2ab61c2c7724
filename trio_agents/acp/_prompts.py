"""The ACP sessions of a bridge: each one's prompt bookkeeping and the streaming of its updates.

Rules (ordering):
- Updates are produced by synchronous listeners in the agent's task (``AgentOutput``,
  ``SessionAppended``), and a prompt's response is produced by the listener that sees its
  ``TurnEnded``; with the one outbound queue (:mod:`._serving`), every update of a turn
  precedes its response.
- A prompt is one queued message. It is answered ``cancelled`` when a ``session/cancel``
  arrived while it was pending (whatever the turn's end), when the cancel removed it before a
  turn claimed it, or when its turn ended cancelled.
- The client shows its own prompt already: the ``UserMessage`` of the pending prompt is not
  streamed back; every other user message, tool call and tool result is (through the
  session's :class:`~._protocol.UpdateMapper`, which gives a write's or an edit's end the
  diff its :class:`~trio_agents.workspace.FileChanged` told, and a plan call's end its plan).
- A call is ``in_progress`` when it is about to run (:meth:`Sessions.started`: the bridge's
  guard for a call that needs no approval, the permission's allow for one that does, and the
  ``ToolApproval`` record of a standing ``allow_always`` answer, written just before the call
  runs, for one that nobody is asked about).
- A call that runs in the client's terminal (:mod:`._terminal`) is announced ``in_progress``
  again with the terminal as its content (:meth:`Sessions.terminal`), and its end keeps it.
- A prompt's ``image`` blocks go with its text (``agent.prompt(text, images=...)``); an agent
  of another factory takes text only, so a prompt with images is refused for it.
- A prompt a command answers itself (``/compact``) is *held* (:meth:`Sessions.hold`): pending
  with no message, so a cancel or a dispose reaches it as any prompt; :meth:`Sessions.answer`
  answers it unless that already happened.
- After every turn of a session: ``session_info_update`` the first time the session has a
  title (its first user message's first line), then ``usage_update`` when the model's window
  is known; both before the prompt's answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any, Final, final

import attrs

from .. import tracing
from ..agent import (
    Agent,
    AgentClosedError,
    AgentDisposed,
    AgentOutput,
    AgentThought,
    HookRefusedError,
    TaskEnded,
    TaskStarted,
)
from ..session import (
    InboxSpliced,
    Record,
    SessionAppended,
    StopReason,
    ToolApproval,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
)
from ..shell import Terminal
from ..workspace import FileChanged, FileSystem, PromptCommand
from ._framing import TEXT_SLOT, TextTemplate
from ._jsonrpc import ErrorCode, Request, RequestId, RpcError
from ._protocol import (
    UpdateMapper,
    child_progress,
    in_progress,
    params_object,
    prompt_images,
    prompt_text,
    replay,
    required_str,
    session_info_update,
    session_title,
    stop_reason,
    text_chunk,
    usage_update,
)
from ._serving import Serving
from ._terminal import terminal_content

log = logging.getLogger("trio_agents.acp")

#: Who a ``ToolApproval`` record names when an earlier ``*_always`` answer stood for the call.
_STANDING: Final = "standing answer"


@final
@attrs.define(eq=False)
class Prompt:
    """A ``session/prompt`` awaiting its answer."""

    request_id: RequestId
    message_id: str
    turn_id: str | None = None
    cancel_requested: bool = False


@final
@attrs.define(eq=False)
class AcpSession:
    """An ACP session: its agent, the disposer of its handle, and its pending prompt."""

    agent: Agent
    dispose: Callable[[], Awaitable[None]] = attrs.field(repr=False)
    cwd: str
    prompt: Prompt | None = None
    #: The file system of its file tools when the client offers ``fs/*`` (else ``None``).
    files: FileSystem | None = attrs.field(default=None, repr=False)
    #: Where its agent's foreground commands run when the client offers ``terminal``.
    terminal: Terminal | None = attrs.field(default=None, repr=False)
    #: The title announced (or found in its records), once it has one.
    title: str | None = None
    #: What its records stream as (open calls, their diffs).
    mapper: UpdateMapper = attrs.field(init=False, repr=False)
    #: Its prompt commands (``/name``), by name, read from its ``cwd`` when it was opened.
    commands: Mapping[str, PromptCommand] = attrs.field(factory=dict, repr=False)
    #: The text updates' templates, by kind (encoded once: one frame per delta follows).
    text_templates: dict[str, TextTemplate] = attrs.field(factory=dict, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self.mapper = UpdateMapper(self.cwd)
        self.title = _title(self.agent.session.records)


def _title(records: Iterable[Record]) -> str | None:
    """The title of a session: of its first user message that has one."""
    for record in records:
        if isinstance(record, UserMessage):
            title = session_title(record.content)
            if title is not None:
                return title
    return None


#: The most characters of a child's text shown in its ``task`` call while it answers.
_CHILD_TEXT = 4_000


@attrs.define
class _ChildCall:
    """Where a child's streamed text is shown: a session's ``task`` call."""

    session_id: str
    call_id: str
    text: str = ""


@final
class Sessions:
    """The sessions a bridge owns, by id (oldest first), and their live updates."""

    def __init__(self, serving: Serving) -> None:
        self._serving = serving
        self._live: dict[str, AcpSession] = {}
        # The children (and their children) a session's foreground ``task`` call started, by
        # child id: their streamed text is shown in that call.
        self._children: dict[str, _ChildCall] = {}

    def __iter__(self) -> Iterator[AcpSession]:
        return iter(tuple(self._live.values()))

    def ids(self) -> tuple[str, ...]:
        """The session ids, oldest first."""
        return tuple(self._live)

    def prompts(self) -> int:
        """How many prompts await their answer."""
        return sum(1 for s in self._live.values() if s.prompt is not None)

    def get(self, session_id: object) -> AcpSession | None:
        """The session ``session_id``, or ``None`` (also for a non-string id)."""
        return self._live.get(session_id) if isinstance(session_id, str) else None

    def of_prompt(self, request_id: object) -> AcpSession | None:
        """The session whose pending prompt is the request ``request_id``, or ``None``."""
        for session in self._live.values():
            prompt = session.prompt
            if (
                prompt is not None
                and type(prompt.request_id) is type(request_id)
                and prompt.request_id == request_id
            ):
                return session
        return None

    def lookup(self, params: Mapping[str, Any]) -> AcpSession:
        """The session named by ``params["sessionId"]``.

        Raises:
            RpcError: the id is missing, or names no session of this bridge.
        """
        session_id = required_str(params, "sessionId")
        session = self._live.get(session_id)
        if session is None:
            raise RpcError(
                ErrorCode.RESOURCE_NOT_FOUND,
                f"unknown session {session_id!r}; create one with session/new or load it "
                f"with session/load",
                {"sessionId": session_id},
            )
        return session

    def add(self, session: AcpSession) -> None:
        """Publish ``session`` under its agent's id."""
        self._live[session.agent.id] = session

    def replay(self, session: AcpSession) -> None:
        """Stream the conversation so far as ``session/update`` notifications."""
        for update in replay(session.agent.session.records, session.cwd):
            self._serving.update(session.agent.id, update)

    # -- prompts ------------------------------------------------------------------------------

    def claim(self, request: Request) -> tuple[AcpSession, str]:
        """``session/prompt``: its session (with no prompt pending) and its text.

        Raises:
            RpcError: unknown session, bad params, a prompt already pending.
        """
        params = params_object(request.params)
        session = self.lookup(params)
        text = prompt_text(params)
        if session.prompt is not None:
            raise RpcError(
                ErrorCode.INVALID_REQUEST,
                f"session {session.agent.id!r} is already running a prompt; wait for its "
                f"answer or send session/cancel",
            )
        return session, text

    def begin(self, request: Request, session: AcpSession, text: str) -> None:
        """Queue the claimed prompt ``text``; its answer comes when its turn ends.

        Raises:
            RpcError: a closed agent, an image that cannot be sent.
        """
        images = prompt_images(request.params)
        agent = session.agent
        if images and not isinstance(agent, Agent):
            # Another factory's agent (an AgentLike) takes text only.
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                "invalid params: this session's agent takes no images; send text only",
            )
        try:
            message_id = agent.prompt(text, images=images) if images else agent.prompt(text)
        except AgentClosedError as exc:
            raise RpcError(ErrorCode.INTERNAL_ERROR, str(exc)) from None
        except HookRefusedError as exc:  # a prompt_accepted hook vetoed it: nothing queued
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None
        session.prompt = Prompt(request.id, str(message_id))
        params = request.params
        tracing.remote_parent(
            session.agent.id, params.get("_meta") if isinstance(params, Mapping) else None
        )

    def hold(self, request: Request, session: AcpSession) -> Prompt:
        """Keep the claimed prompt pending while a command answers it (:meth:`answer`)."""
        prompt = session.prompt = Prompt(request.id, "")
        return prompt

    def answer(self, session: AcpSession, prompt: Prompt, text: str | None) -> None:
        """Answer the held ``prompt`` (``end_turn`` after ``text``; ``cancelled`` when a
        cancel came), unless it was answered already (its session disposed)."""
        if session.prompt is not prompt or self._live.get(session.agent.id) is not session:
            return
        if text is not None and not prompt.cancel_requested:
            self._serving.update(session.agent.id, text_chunk("agent_message_chunk", text))
        session.prompt = None
        reason = "cancelled" if prompt.cancel_requested else "end_turn"
        self._serving.send(self._serving.rpc.respond(prompt.request_id, {"stopReason": reason}))

    def _finish(self, session: AcpSession, ended: TurnEnded | None) -> None:
        prompt = session.prompt
        assert prompt is not None
        session.prompt = None
        rpc = self._serving.rpc
        if ended is None or prompt.cancel_requested:
            reason: str | None = "cancelled"
        else:
            reason = stop_reason(ended.stop_reason, ended.cause)
        if reason is None:
            assert ended is not None
            assert ended.stop_reason is StopReason.ERROR
            frame = rpc.respond_error(
                prompt.request_id,
                ErrorCode.INTERNAL_ERROR,
                f"the turn failed: {ended.error}",
                {"stopReason": ended.stop_reason.value},
            )
        else:
            frame = rpc.respond(prompt.request_id, {"stopReason": reason})
        self._serving.send(frame)

    # -- live events (sync, in the emitter's task) ---------------------------------------------

    def _text(self, session: AcpSession, kind: str, text: str) -> None:
        # The frame update(text_chunk(kind, text)) would queue, from the session's template.
        template = session.text_templates.get(kind)
        if template is None:
            template = session.text_templates[kind] = self._serving.update_template(
                session.agent.id, text_chunk(kind, TEXT_SLOT)
            )
        self._serving.send(template.frame(text), more=True)

    def on_output(self, event: AgentOutput) -> None:
        """Stream a chunk of the agent's reply, or of a child's into its ``task`` call."""
        session = self._live.get(event.agent_id)
        if session is not None:
            self._text(session, "agent_message_chunk", event.text)
            return
        child = self._children.get(event.agent_id)
        if child is not None:
            # The tail only: each update replaces the call's content, so a bound keeps the
            # cost of a delta constant however long the child talks.
            child.text = (child.text + event.text)[-_CHILD_TEXT:]
            self._serving.update(child.session_id, child_progress(child.call_id, child.text))

    def on_thought(self, event: AgentThought) -> None:
        """Stream a chunk of the model's reasoning (``agent_thought_chunk``)."""
        session = self._live.get(event.agent_id)
        if session is not None:
            self._text(session, "agent_thought_chunk", event.text)

    def on_task_started(self, event: TaskStarted) -> None:
        """A foreground ``task`` call of a session (or of one of its children) started a
        child: its text goes into the session's call."""
        if event.background or event.call_id is None:
            return
        if event.agent_id in self._live:
            self._children[event.child_id] = _ChildCall(event.agent_id, event.call_id)
        elif event.agent_id in self._children:
            self._children[event.child_id] = self._children[event.agent_id]

    def on_task_ended(self, event: TaskEnded) -> None:
        """A child ended: nothing more of it is shown."""
        self._children.pop(event.child_id, None)

    def on_appended(self, event: SessionAppended) -> None:
        """Stream a record, or answer the pending prompt when its turn is over."""
        session = self._live.get(event.session_id)
        if session is None:
            return
        record, prompt = event.record, session.prompt
        if isinstance(record, UserMessage):
            if prompt is not None and record.message_id == prompt.message_id:
                prompt.turn_id = record.turn_id  # the client shows its own prompt already
                return
            self._text(session, "user_message_chunk", record.content)
        elif isinstance(record, ToolCall | ToolCallEnded):
            for update in session.mapper.updates(record):
                self._serving.update(session.agent.id, update)
        elif isinstance(record, ToolApproval):
            if record.by == _STANDING and record.decision == "allow_always":
                self.started(session.agent.id, record.call_id)
        elif isinstance(record, InboxSpliced):
            if (
                prompt is not None
                and prompt.turn_id is None
                and record.op == "remove"
                and record.message_id == prompt.message_id
            ):
                self._finish(session, None)
        elif isinstance(record, TurnEnded):
            self._after_turn(session)
            if prompt is not None and record.turn_id == prompt.turn_id:
                self._finish(session, record)

    def _after_turn(self, session: AcpSession) -> None:
        """After a turn: the session's title the first time it has one
        (``session_info_update``), and a ``usage_update`` when the model's window is known
        (``size`` is required, and a guess would mislead)."""
        agent = session.agent
        if session.title is None:
            session.title = _title(agent.session.records)
            if session.title is not None:
                self._serving.update(agent.id, session_info_update(session.title))
        # Another factory's agent (an ``AgentLike``) has no meter: no usage to report.
        context = agent.context if isinstance(agent, Agent) else None
        if context is not None and context.window is not None:
            self._serving.update(agent.id, usage_update(context.tokens, context.window))

    def on_file_changed(self, event: FileChanged) -> None:
        """Keep the diff of a file a session's call changed, for the call's end."""
        session = self._live.get(event.agent_id) if event.agent_id is not None else None
        if session is not None and event.call_id is not None:
            session.mapper.file_changed(event.call_id, event.path, event.old_text, event.new_text)

    def started(self, agent_id: str, call_id: str | None) -> None:
        """The call ``call_id`` of a session's agent starts running: ``in_progress``."""
        session = self._live.get(agent_id)
        if session is not None and call_id is not None:
            self._serving.update(agent_id, in_progress(call_id))

    def terminal(self, session: AcpSession, call_id: str | None, terminal_id: str) -> None:
        """A call of ``session`` runs in the client's terminal ``terminal_id``: the call
        shows it from now on (its end too)."""
        if call_id is None or self._live.get(session.agent.id) is not session:
            return
        content = terminal_content(terminal_id)
        session.mapper.attach(call_id, content)
        self._serving.update(session.agent.id, in_progress(call_id, [content]))

    def on_disposed(self, event: AgentDisposed) -> None:
        """Forget a disposed agent's session (answering its prompt, which will never run)."""
        session = self._live.pop(event.agent_id, None)
        if session is not None and session.prompt is not None:
            # Disposed with its prompt unclaimed: that prompt will never run.
            self._finish(session, None)
