"""Tools: what an agent can call, the registry that owns them, and the ``tools`` plugin.

Rules:
- A :class:`Tool` declares its arguments as an attrs class; the JSON schema the model sees and
  the validation of what the model sends both come from that one class (:mod:`._tool_schema`).
  ``@tool`` (:mod:`._tool_signature`) makes that class from a function's typed signature.
- ``ToolRegistry.register`` is an effect of the *calling* fiber: the tool is unregistered when
  that fiber unloads (or when the returned entry is closed). Names are unique while registered
  among the tools one agent sees: a tool is for every agent, or private to one agent id.
- ``ToolRegistry.invoke`` never raises for anything the model or the tool did wrong: an unknown
  tool, invalid arguments or a tool raising an :class:`Exception` become an error result the
  model can read. Cancellation is not a failure: :class:`trio.Cancelled` propagates untouched.
- Arguments are validated strictly, as JSON: no string-to-number or number-to-bool coercion.
  A tool made with a ready JSON ``schema`` instead of ``params`` (one a remote server
  describes, such as an MCP server's) gets the model's JSON object as a ``dict``; checking it
  against the schema is the remote side's job.
- Guards (``add_guard``) run in order after the arguments validated and before the tool's
  function; the first that answers with a result stops the call (``started=False``). A guard,
  like a tool, is an entry of the fiber that added it.
- The calling agent's mode (:mod:`._modes`) comes first: a tool it refuses is an error
  result before the arguments are read; a tool it runs unasked skips approval.
- Approval (:mod:`._approval`) comes after the guards: a call that needs it runs only when the
  calling agent's approver allows it; a refusal is an error result with ``started=False``.
- Every result is capped in one place, at the end of ``ToolRegistry.invoke``: past
  ``result_cap`` UTF-8 bytes (default :data:`RESULT_CAP`, 1 MiB, what bash keeps of a
  command's output) the middle is cut and replaced by one marker line saying how many bytes
  were dropped, so the model sees the start, the end and that it was cut, and nothing over
  the cap is stored or re-sent. Cutting costs time linear in the result.
- ``ToolRegistry.specs`` is computed once per set of registered tools and cached: every
  register and unregister (a reload is both) drops the cache, so a request never pays for the
  tools' JSON schemas again, and never sees a stale one.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, cast, final

import attrs
import trio
from typing_extensions import TypeVar

from .. import tracing
from .._base import api_name_refusal, count_problems, list_problems
from .._errors import TrioAgentsError
from ..cancel import CauseScope, UserCancel
from ..kernel import Context, Entry, ServiceKey, current_context
from ..model import ToolSpec
from ._approval import ApprovalRequest
from ._caller import Caller
from ._config import UNSET, Maybe, ToolNames, Unset
from ._results import RESULT_CAP, ToolResult, cap_result
from ._tool_schema import ArgumentsError, describe_params, params_schema, structure_arguments
from ._tool_schema import tools_converter as tools_converter

if TYPE_CHECKING:
    from ..model import Model
    from ._agent import Agent
    from ._approval import Approver
    from ._budget import Budget
    from ._handle import AgentHandle
    from ._like import AgentLike
    from ._usage import AgentUsage

log = logging.getLogger("trio_agents")


class ToolNameInUseError(TrioAgentsError, ValueError):
    """A tool with this name is already registered."""


#: The type of the application's dependencies a tool reads as ``ctx.deps``.
Deps = TypeVar("Deps", default=object, covariant=True)

_NO_CALLER = Caller()


class NoCallingAgentError(TrioAgentsError, RuntimeError):
    """A tool asked for what only a call by an agent has (``ctx.start_child``)."""


@attrs.frozen
class ToolContext(Generic[Deps]):
    """What a running tool can see about its call, and what it may do as the calling agent.

    ``ToolContext[MyDeps]`` types ``ctx.deps`` for a tool of an application that gives its
    agents a ``MyDeps`` (``open_runtime(deps=...)`` or ``create(..., deps=...)``); the type
    is the tool's claim, as nothing checks it at run time.

    Attributes:
        agent: the calling agent, or ``None`` (a test, a script).
        call_id: the model's id of this call, if any.
        scope: the turn's cancel scope, if any (cancelling it stops the whole turn).
        turn_id: the id of the calling turn, or ``None`` outside a turn.
        caller: the record of the calling agent the turn handed the registry.
    """

    # Typed as the default factory's agent, which is what tools meet unless the runtime was
    # given another factory (then it is that factory's agent, as ``Caller.agent`` says).
    agent: Agent | None = None
    call_id: str | None = None
    scope: CauseScope | None = None
    turn_id: str | None = None
    caller: Caller = attrs.field(default=_NO_CALLER, kw_only=True, repr=False)

    @property
    def deps(self) -> Deps:
        """The application's dependencies the calling agent was given, or ``None``."""
        return cast("Deps", self.caller.deps)

    @property
    def usage(self) -> AgentUsage | None:
        """The calling agent's token usage so far (its requests of this turn included), or
        ``None`` for a call without an agent."""
        meter = self.caller.meter
        return meter.usage if meter is not None else None

    async def start_child(
        self,
        model: Model | str | None = None,
        *,
        session_id: str | None = None,
        tools: ToolNames = None,
        instructions: str | None = None,
        max_steps: int = 50,
        cwd: str | os.PathLike[str] | None = None,
        ask: ToolNames = None,
        approver: Approver | None = None,
        deps: Maybe[object] = UNSET,
        budget: Budget | None = None,
    ) -> AgentHandle[Agent]:
        """Start a child agent owned by the calling agent: ``ctx.agents.create(...,
        parent=ctx.agent)``, with the same arguments and rules (disposing the caller
        disposes the child first; its cancel reaches the child as ``ParentCancel``).

        Args:
            deps: the child's dependencies; by default the calling agent's own.
            budget: the child's own budget; the calling agent's (and every ancestor's)
                counts the child's spending too.

        Returns:
            The child's handle (disposing it early is the tool's choice).

        Raises:
            NoCallingAgentError: the tool was called without an agent (or by an agent its
                runtime gave no ``agents`` registry).
            ValueError: the calling agent is being disposed.
        """
        caller = self.caller
        agent, registry = caller.agent, caller.agents
        if agent is None:
            raise NoCallingAgentError(
                "start_child() starts a child of the calling agent, and this tool was called "
                "without one; call it through an agent's turn, or pass the agent to "
                "ToolRegistry.invoke()"
            )
        if registry is None:
            raise NoCallingAgentError(
                f"start_child(): agent {agent.id!r} has no agents registry to start a child "
                f"through (it was not made by ctx.agents); use ctx.agents.create(parent=...)"
            )
        handle = await registry.create(
            model,
            session_id,
            tools,
            instructions,
            agent,
            max_steps=max_steps,
            cwd=cwd,
            ask=ask,
            approver=approver,
            deps=caller.deps if isinstance(deps, Unset) else deps,
            budget=budget,
        )
        # The agent type is the factory's, as for ``ctx.agent`` (typed as the default's).
        return cast("AgentHandle[Agent]", handle)


#: A tool's function: ``async def fn(ctx: ToolContext, params)`` returning a ``str``, a
#: :class:`ToolResult`, or a JSON value or attrs instance (the model reads it as JSON).
ToolFn: TypeAlias = Callable[[ToolContext[Any], Any], Awaitable[object]]

#: A guard: ``async def guard(name, arguments, ctx) -> ToolResult | None``; a result is the
#: answer of the call instead of running the tool, ``None`` lets it run.
ToolGuard: TypeAlias = Callable[
    [str, Mapping[str, Any], ToolContext[Any]], Awaitable["ToolResult | None"]
]


def _check_name(_: object, __: object, name: Any) -> None:
    refusal = api_name_refusal(name, "a tool name", 64, "what model APIs accept")
    if refusal is not None:
        raise ValueError(refusal)


def _check_params(_: object, __: object, params: Any) -> None:
    if params is None:
        return
    if not (isinstance(params, type) and attrs.has(params)):
        raise TypeError(f"a tool's params must be an attrs class or None; got {params!r}")
    describe_params(params)  # raises TypeError for a field type with no JSON schema


def _check_schema(tool: Any, _: object, schema: Any) -> None:
    if schema is None:
        return
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise TypeError(
            f"a tool's schema must be a JSON schema of an object (type 'object'); got {schema!r}"
        )
    if tool.params is not None:
        raise TypeError("a tool takes either params (an attrs class) or a JSON schema, not both")


def _check_fn(_: object, __: object, fn: Any) -> None:
    if not callable(fn):
        raise TypeError(f"a tool's fn must be an async function; got {fn!r}")


@attrs.frozen
class Tool:
    """A tool a model can call.

    Args:
        name: unique among registered tools; 1-64 of ``[A-Za-z0-9_-]``.
        description: what the tool does, for the model.
        params: an attrs class describing the arguments, or ``None`` for a tool that takes no
            arguments. A field's ``metadata={"description": ...}`` documents it for the model.
        fn: ``async def fn(ctx: ToolContext, params) -> str | ToolResult``; it receives an
            instance of ``params`` (or ``None``), or with ``schema`` the arguments as a dict.
        schema: instead of ``params``, the JSON schema of the arguments as is (an object
            schema); the model's arguments then reach ``fn`` as a ``dict``, unchecked.
        ask: every call needs approval: the calling agent's approver is asked first (see
            :doc:`/tools`).
        explicit: only agents that name the tool in their ``tools`` see it; one given every
            tool (``tools=None``) does not (the ``task`` tool: a subagent does not start
            subagents unless its definition says so).
        read_only: the tool only reads (changes nothing): it runs in the ``plan`` mode,
            which refuses every other tool (see :mod:`._modes`).
        sandboxed: what the tool changes is confined by a sandbox whose policy follows the
            calling agent's mode (``bash`` under a sandboxed shell): the ``plan`` mode runs
            it, read-only, instead of refusing it.

    Raises:
        ValueError: the name is not valid.
        TypeError: ``params`` is not an attrs class, or has a field type with no JSON schema;
            or ``schema`` is not an object schema, or is given with ``params``.
    """

    name: str = attrs.field(validator=_check_name)
    description: str
    params: type | None = attrs.field(validator=_check_params)
    fn: ToolFn = attrs.field(validator=_check_fn)
    schema: Mapping[str, Any] | None = attrs.field(
        default=None, kw_only=True, validator=_check_schema, hash=False
    )
    ask: bool = attrs.field(
        default=False, kw_only=True, validator=attrs.validators.instance_of(bool)
    )
    explicit: bool = attrs.field(
        default=False, kw_only=True, validator=attrs.validators.instance_of(bool)
    )
    read_only: bool = attrs.field(
        default=False, kw_only=True, validator=attrs.validators.instance_of(bool)
    )
    sandboxed: bool = attrs.field(
        default=False, kw_only=True, validator=attrs.validators.instance_of(bool)
    )

    def spec(self) -> ToolSpec:
        """The tool as the model sees it, with the JSON schema of its arguments."""
        if self.schema is not None:
            return ToolSpec(self.name, self.description, copy.deepcopy(dict(self.schema)))
        return ToolSpec(self.name, self.description, params_schema(self.params))


def _answer(name: str, result: object) -> ToolResult:
    """What the model reads of a tool's return value: text as is, anything else as JSON."""
    if isinstance(result, str):
        return ToolResult(result)
    if isinstance(result, ToolResult):
        return result
    try:
        return ToolResult(json.dumps(tools_converter.unstructure(result), allow_nan=False))
    except (TypeError, ValueError) as exc:
        return ToolResult(
            f"tool {name!r} returned {type(result).__name__}, which is not JSON ({exc}); "
            f"tools return str, ToolResult, a JSON value or an attrs instance",
            is_error=True,
        )


def _stop(
    agent: AgentLike, scope: CauseScope | None, turn: CauseScope | None
) -> Callable[[], object]:
    """What a ``cancel`` answer about a call stops: within the agent's turn, the agent (its
    one public stop); a call in a scope of its own, that scope; else the agent's turn, its
    queue kept (see :mod:`._approval`)."""
    if scope is not None and scope is turn:
        return lambda: agent.cancel(UserCancel())
    if scope is not None:
        return lambda: scope.cancel(UserCancel())
    return lambda: agent.cancel(UserCancel(), keep_inbox=True)


def _invalid(name: str, problems: list[str]) -> ToolResult:
    return ToolResult(
        f"invalid arguments for tool {name!r} ({count_problems(problems)}):"
        f"{list_problems(problems)}",
        is_error=True,
        started=False,
    )


# -- the registry --------------------------------------------------------------------------------


@final
@attrs.define(eq=False)
class _Registration:
    tool: Tool
    owner: str
    #: The one agent that sees the tool, or ``None`` for every agent.
    agent: str | None = None


@final
@attrs.define(eq=False)
class _Guard:
    guard: ToolGuard
    owner: str


def _check_result_cap(registry: object, attribute: object, result_cap: int) -> None:
    if (
        isinstance(result_cap, bool)
        or not isinstance(result_cap, int)
        or not 1 <= result_cap <= RESULT_CAP
    ):
        raise ValueError(
            f"result_cap is a number of bytes from 1 to {RESULT_CAP}; got {result_cap!r}"
        )


@final
# Validators at init only (no hook on every attribute set, as History).
@attrs.define(eq=False, repr=False, on_setattr=attrs.setters.NO_OP)
class ToolRegistry:
    """The service ``tools``: the tools agents can call, each owned by the fiber that
    registered it.

    ``ToolRegistry(result_cap=...)`` has no tools; ``result_cap`` is the most UTF-8 bytes of
    a tool result kept (see :func:`cap_result`), at most :data:`RESULT_CAP`, the bound the
    history re-sends results within.
    """

    _result_cap: int = attrs.field(
        default=RESULT_CAP, kw_only=True, alias="result_cap", validator=_check_result_cap
    )
    # Invariant: dict order is registration order (specs() keeps it).
    _tools: dict[str, _Registration] = attrs.field(factory=dict, init=False)
    # The tools of one agent each, by agent id. Invariant: no name is in both maps.
    _private: dict[str, dict[str, _Registration]] = attrs.field(factory=dict, init=False)
    # Invariant: the specs each agent id (None: no agent's own) sees now; emptied on every
    # register and unregister.
    _specs: dict[tuple[str | None, bool], tuple[ToolSpec, ...]] = attrs.field(
        factory=dict, init=False
    )
    # Invariant: guards run in the order they were added.
    _guards: list[_Guard] = attrs.field(factory=list, init=False)
    # The names require_approval() asks about, each with how many entries hold it.
    _asked: dict[str, int] = attrs.field(factory=dict, init=False)

    def register(self, tool: Tool, *, agent: str | None = None) -> Entry:
        """Register ``tool`` for as long as the calling fiber is loaded.

        Args:
            tool: the tool.
            agent: the id of the one agent that sees and may call the tool (an ACP session's
                own MCP servers, say); ``None``, every agent. Two agents may each have their
                own tool of one name; a name registered for every agent is taken for all.

        Returns:
            The calling fiber's entry; ``await entry.close()`` unregisters the tool early.

        Raises:
            ToolNameInUseError: a tool with the same name is registered (for every agent, or
                for this one).
            FiberClosedError: the calling fiber is unloading.
            RuntimeError: called outside every fiber.
        """
        if not isinstance(tool, Tool):
            raise TypeError(f"register() takes a Tool; got {type(tool).__name__} {tool!r}")
        existing = self._tools.get(tool.name)
        if existing is None and agent is not None:
            existing = self._private.get(agent, {}).get(tool.name)
        if existing is None and agent is None:
            existing = next(
                (tools[tool.name] for tools in self._private.values() if tool.name in tools), None
            )
        if existing is not None:
            raise ToolNameInUseError(
                f"tool {tool.name!r} is already registered by fiber {existing.owner}; "
                f"dispose that fiber (or close its registration entry) first"
            )
        ctx = current_context()
        registration = _Registration(tool, ctx.fiber.id, agent)
        entry = ctx.defer(self._unregister, registration)
        if agent is None:
            self._tools[tool.name] = registration
        else:
            self._private.setdefault(agent, {})[tool.name] = registration
        self._specs.clear()
        return entry

    async def _unregister(self, registration: _Registration) -> None:
        name, agent = registration.tool.name, registration.agent
        tools = self._tools if agent is None else self._private.get(agent, {})
        if tools.get(name) is registration:
            del tools[name]
            if agent is not None and not tools:
                del self._private[agent]
            self._specs.clear()
        await trio.lowlevel.checkpoint()

    def _visible(self, agent: str | None) -> dict[str, _Registration]:
        private = self._private.get(agent) if agent is not None else None
        return {**self._tools, **private} if private else self._tools

    def add_guard(self, guard: ToolGuard) -> Entry:
        """Run ``guard`` before every tool call, for as long as the calling fiber is loaded.

        ``await guard(name, arguments, ctx)`` runs after the arguments validated and before the
        tool's function; when it returns a :class:`ToolResult`, that is the call's answer
        (with ``started=False``) and the tool does not run. A guard that raises is reported as
        an error result, like a failing tool.

        Returns:
            The calling fiber's entry; ``await entry.close()`` removes the guard early.

        Raises:
            FiberClosedError: the calling fiber is unloading.
            RuntimeError: called outside every fiber.
        """
        if not callable(guard):
            raise TypeError(f"add_guard() takes an async function; got {guard!r}")
        ctx = current_context()
        registration = _Guard(guard, ctx.fiber.id)
        entry = ctx.defer(self._remove_guard, registration)
        self._guards.append(registration)
        return entry

    async def _remove_guard(self, registration: _Guard) -> None:
        if registration in self._guards:
            self._guards.remove(registration)
        await trio.lowlevel.checkpoint()

    async def _guarded(
        self, name: str, arguments: Mapping[str, Any], call: ToolContext
    ) -> ToolResult | None:
        for registration in tuple(self._guards):
            try:
                answer = await registration.guard(name, arguments, call)
            except Exception as exc:
                log.error("a guard of tool %r failed", name, exc_info=exc)
                return ToolResult(
                    f"tool {name!r} was refused: its guard failed: {type(exc).__name__}: {exc}",
                    is_error=True,
                    started=False,
                )
            if answer is not None:
                return attrs.evolve(answer, started=False)
        return None

    def require_approval(self, names: Iterable[str]) -> Entry:
        """Ask before every call of the tools ``names`` (by any agent), for as long as the
        calling fiber is loaded; a tool need not be registered yet to be named.

        Returns:
            The calling fiber's entry; ``await entry.close()`` stops asking.

        Raises:
            TypeError: ``names`` is one string, or holds a non-string.
            FiberClosedError: the calling fiber is unloading.
            RuntimeError: called outside every fiber.
        """
        if isinstance(names, str):
            raise TypeError(f"require_approval() takes tool names, not one string; got {names!r}")
        wanted = frozenset(names)
        for name in wanted:
            if not isinstance(name, str):
                raise TypeError(f"tool names are strings; got {type(name).__name__} {name!r}")
        entry = current_context().defer(self._stop_asking, wanted)
        for name in wanted:
            self._asked[name] = self._asked.get(name, 0) + 1
        return entry

    async def _stop_asking(self, names: frozenset[str]) -> None:
        for name in names:
            left = self._asked[name] - 1
            if left:
                self._asked[name] = left
            else:
                del self._asked[name]
        await trio.lowlevel.checkpoint()

    def needs_approval(self, name: str, *, agent: AgentLike | Caller | None = None) -> bool:
        """Whether a call of ``name`` by ``agent`` needs approval (see :mod:`._approval`)."""
        caller = Caller.of(agent)
        registration = self._visible(caller.agent_id).get(name)
        return registration is not None and self._needs(registration.tool, caller)

    def _needs(self, tool: Tool, caller: Caller) -> bool:
        approvals = caller.approvals
        # The calling agent's mode first: ``edit`` runs the file edits unasked (see _modes).
        if approvals is not None and approvals.mode.runs_unasked(
            tool.name, read_only=tool.read_only
        ):
            return False
        if tool.ask or tool.name in self._asked:
            return True
        return approvals is not None and approvals.asks(tool.name)

    async def _approved(
        self, tool: Tool, arguments: Any, call: ToolContext, caller: Caller
    ) -> ToolResult | None:
        agent, approvals = caller.agent, caller.approvals
        if agent is None or approvals is None:
            await trio.lowlevel.checkpoint()
            refusal: str | None = (
                f"tool {tool.name!r} needs approval, and a call without an agent has nobody to "
                f"ask; it did not run"
            )
        else:
            refusal = await approvals.check(
                ApprovalRequest(
                    agent_id=agent.id,
                    tool=tool.name,
                    arguments=dict(arguments) if isinstance(arguments, Mapping) else {},
                    description=tool.description,
                    call_id=call.call_id,
                ),
                turn_id=caller.turn_id,
                stop=_stop(agent, call.scope, caller.scope),
            )
        if refusal is None:
            return None
        return ToolResult(refusal, is_error=True, started=False)

    def get(self, name: str, *, agent: str | None = None) -> Tool | None:
        """The registered tool ``name`` that the agent ``agent`` sees, or ``None``."""
        registration = self._visible(agent).get(name)
        return None if registration is None else registration.tool

    def names(self, *, agent: str | None = None, explicit: bool = False) -> tuple[str, ...]:
        """The names of the tools the agent ``agent`` sees (``None``: the tools of every
        agent), in registration order; with ``explicit``, also the tools marked ``explicit``
        (``task``), which only agents that name them see."""
        return tuple(
            name
            for name, registration in self._visible(agent).items()
            if explicit or not registration.tool.explicit
        )

    def specs(self, *, agent: str | None = None, explicit: bool = False) -> tuple[ToolSpec, ...]:
        """What the model is told about every tool the agent ``agent`` sees, in registration
        order.

        The same tuple is returned until a tool is registered, replaced or unregistered; it
        is shared, so treat it (and each spec's ``parameters``) as read-only.

        Args:
            agent: the agent whose own tools are included.
            explicit: include the tools marked ``explicit`` (by default, what an agent given
                every tool sees: not them).
        """
        # Agents without tools of their own share the one tuple (10,000 agents, one copy).
        key = (agent if agent in self._private else None, explicit)
        specs = self._specs.get(key)
        if specs is None:
            specs = self._specs[key] = tuple(
                r.tool.spec()
                for r in self._visible(key[0]).values()
                if explicit or not r.tool.explicit
            )
        return specs

    def replace(self, tool: Tool) -> None:
        """Put ``tool`` in the place of the registered tool of its name (for every agent),
        keeping that registration's owner: a tool whose description changes (``task``
        lists the agent definitions) is replaced, not unregistered and registered again.

        Raises:
            KeyError: no tool of that name is registered for every agent.
        """
        registration = self._tools.get(tool.name)
        if registration is None:
            raise KeyError(f"no tool {tool.name!r} is registered for every agent")
        registration.tool = tool
        self._specs.clear()

    async def invoke(
        self,
        name: str,
        arguments: Mapping[str, Any],
        caller: Caller | AgentLike | None = None,
        *,
        call_id: str | None = None,
        scope: CauseScope | None = None,
        on_start: Callable[[], object] | None = None,
    ) -> ToolResult:
        """Call the tool ``name`` with the model's ``arguments``.

        Always a checkpoint. Problems become error results (``is_error=True``), so the model can
        read and correct them: an unknown tool, invalid arguments (every problem listed), a tool
        that raised. Those that happen before the tool's function runs have ``started=False``.
        Whatever the answer, its content is capped at the registry's ``result_cap`` bytes
        (:func:`cap_result`).

        Args:
            name: the tool to call.
            arguments: the JSON object the model sent.
            caller: who calls: the :class:`Caller` record a turn hands over, or an agent
                calling outside a turn (``Caller.of``); the tool sees its agent as
                ``ctx.agent``, and approval asks on its behalf.
            call_id: the model's id of the call.
            scope: the cancel scope the tool sees as ``ctx.scope``; by default the caller's
                (the turn's).
            on_start: called (synchronously) just before the tool's function runs, so a caller
                that sees :class:`trio.Cancelled` knows whether side effects were possible.

        Raises:
            trio.Cancelled: the call was cancelled; it propagates untouched.
        """
        who = Caller.of(caller)
        with tracing.execute_tool(name, call_id, arguments) as span:
            result = await self._invoke(name, arguments, who, call_id, scope or who.scope, on_start)
            content = cap_result(result.content, self._result_cap)
            span.answered(result.is_error, content)
        return result if content is result.content else attrs.evolve(result, content=content)

    async def _invoke(
        self,
        name: str,
        arguments: Mapping[str, Any],
        caller: Caller,
        call_id: str | None,
        scope: CauseScope | None,
        on_start: Callable[[], object] | None,
    ) -> ToolResult:
        await trio.lowlevel.checkpoint()
        visible = self._visible(caller.agent_id)
        registration = visible.get(name)
        if registration is None:
            # The tools an agent given every tool sees (not the explicit ones, ``task``).
            plain = (n for n, r in visible.items() if not r.tool.explicit)
            available = ", ".join(sorted(plain)) or "none"
            return ToolResult(
                f"unknown tool {name!r}; available: {available}", is_error=True, started=False
            )
        tool = registration.tool
        if caller.approvals is not None:
            refusal = caller.approvals.mode.refusal(
                name, read_only=tool.read_only, sandboxed=tool.sandboxed
            )
            if refusal is not None:  # the ``plan`` mode: nothing that changes anything runs
                return ToolResult(refusal, is_error=True, started=False)
        params = self._structure(tool, arguments)
        if isinstance(params, ToolResult):
            return params
        call: ToolContext[Any] = ToolContext(
            caller.agent,  # type: ignore[arg-type]
            call_id,
            scope,
            caller.turn_id,
            caller=caller,
        )
        if self._guards:
            refused = await self._guarded(name, arguments, call)
            if refused is not None:
                return refused
        if self._needs(tool, caller):
            refused = await self._approved(tool, arguments, call, caller)
            if refused is not None:
                return refused
            # A cancel that landed while the question was open stops the call unstarted.
            await trio.lowlevel.checkpoint_if_cancelled()
        if on_start is not None:
            on_start()
        try:
            result = await tool.fn(call, params)
        except Exception as exc:
            log.error("tool %r failed", name, exc_info=exc)
            return ToolResult(f"tool {name!r} failed: {type(exc).__name__}: {exc}", is_error=True)
        return _answer(name, result)

    def _structure(self, tool: Tool, arguments: object) -> Any:
        if tool.schema is not None:
            if isinstance(arguments, Mapping):
                return dict(arguments)
            return _invalid(tool.name, [f"the arguments must be a JSON object; got {arguments!r}"])
        try:
            return structure_arguments(tool.params, arguments)
        except ArgumentsError as exc:
            return _invalid(tool.name, exc.problems)

    def __repr__(self) -> str:
        return f"<ToolRegistry {list(self._tools)}>"


#: The key of the ``tools`` service (provided by :data:`tools_plugin`).
TOOLS: Final[ServiceKey[ToolRegistry]] = ServiceKey("tools")


# -- the plugin ----------------------------------------------------------------------------------


@final
class ToolsPlugin:
    """The core plugin that provides the :class:`ToolRegistry` as the service ``tools``."""

    name = "tools"

    async def apply(self, ctx: Context, config: None) -> None:
        """Provide a fresh registry for as long as the fiber is loaded."""
        ctx.provide("tools", ToolRegistry())


tools_plugin = ToolsPlugin()
