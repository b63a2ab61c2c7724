"""Hooks: functions that run at the points of an agent's life, and may veto or edit.

Rules:
- ``await ctx.hooks.add(point, fn, ...)`` registers ``fn`` as an entry of the *calling*
  fiber: it is removed when that fiber unloads (a plugin's reload removes the old plugin's
  hooks and adds the new one's), or when the returned entry is closed.
- A hook is for every agent or for one (``agent=``); at the tool and child points ``match``
  (a regular expression) must match the whole tool name or child id.
- At one point, hooks run one after another in registration order; each async hook under its
  ``timeout`` if it has one. An edit is handed on: the next hook sees the edited event. A veto
  (a :class:`HookCancel` answered) stops the run: later hooks do not run.
- A hook that raises, times out or answers what its point does not take has *failed*: the
  failure is contained (logged, a :class:`HookFailed` event) and the hook's ``policy``
  decides: ``fail_open`` goes on as if it had answered ``None``, ``fail_closed`` vetoes.
- With no hook at a point, the agent pays one lookup of an empty tuple there
  (:meth:`HookRegistry.at`); ``benchmarks/bench_hooks.py`` pins the cost of ten.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Awaitable, Callable
from types import CoroutineType
from typing import Any, Final, Literal, TypeAlias, TypeVar, final, overload

import attrs
import trio

from .._errors import TrioAgentsError
from ..cancel import HookCancel
from ..kernel import Context, Entry, ServiceKey, current_context
from ._guardrails import GuardrailCheck, input_hook, output_hook
from ._hook_points import HOOK_POINTS, TURN_END, TURN_START, HookPoint
from ._results import ToolResult

log = logging.getLogger("trio_agents")

E = TypeVar("E")
R = TypeVar("R")

#: What happens when a hook fails: go on (``fail_open``) or veto (``fail_closed``).
HookPolicy: TypeAlias = Literal["fail_open", "fail_closed"]

#: A hook: ``fn(event)`` answering ``None``, a :class:`HookCancel`, or the point's edit;
#: async everywhere but at ``prompt_accepted``, whose hooks are plain functions.
HookFn: TypeAlias = Callable[[E], "Awaitable[R | HookCancel | None] | R | HookCancel | None"]

_POLICIES: Final = ("fail_open", "fail_closed")


class HookRefusedError(TrioAgentsError, ValueError):
    """A hook vetoed a message (``prompt_accepted``) or a child agent (``child_start``);
    nothing of it was stored.

    Attributes:
        cause: the veto, whose ``reason`` says why.
    """

    def __init__(self, message: str, cause: HookCancel) -> None:
        super().__init__(message)
        self.cause = cause


@attrs.frozen
class HookFailed:
    """A hook raised, timed out or answered what its point does not take.

    Attributes:
        agent_id: the agent the point concerned.
        point: the point's name.
        hook: the hook's name.
        error: what went wrong, one line.
        policy: its policy, which decided what happened next.
    """

    agent_id: str
    point: str
    hook: str
    error: str
    policy: HookPolicy


@final
@attrs.define(eq=False)
class _Hook:
    point: HookPoint[Any, Any]
    fn: Callable[[Any], Any]
    name: str
    agent: str | None
    match: re.Pattern[str] | None
    timeout: float | None
    policy: HookPolicy
    #: Whether it is for one agent or matches: only then is the event looked at first.
    picky: bool = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.picky = self.agent is not None or self.match is not None

    def concerns(self, event: object) -> bool:
        if self.agent is not None and self.agent != getattr(event, "agent_id", None):
            return False
        field = self.point.matches
        match = self.match
        return match is None or field is None or match.fullmatch(getattr(event, field)) is not None


#: What a run of hooks ends with, beside the (edited) event: a veto, an answer instead of a
#: tool call (``pre_tool``), or nothing.
Stop: TypeAlias = "HookCancel | ToolResult | None"


@final
@attrs.define(eq=False, repr=False)
class HookRegistry:
    """The service ``hooks``: the hooks of every point, each owned by the fiber that added it.

    ``HookRegistry(emit)`` has no hooks; ``emit`` reports :class:`HookFailed` events.
    """

    _emit: Callable[[object], None] | None = None
    # Invariant: every point has its tuple, in registration order; an add or a remove
    # replaces it, so a run in progress keeps the tuple it started with.
    _at: dict[str, tuple[_Hook, ...]] = attrs.field(
        factory=lambda: dict.fromkeys(HOOK_POINTS, ()), init=False
    )

    def at(self, point: HookPoint[Any, Any]) -> tuple[object, ...]:
        """The hooks registered at ``point`` (an empty tuple: there is nothing to run)."""
        return self._at[point.name]

    @overload
    async def add(
        self,
        point: HookPoint[E, R],
        fn: HookFn[E, R],
        *,
        agent: str | None = None,
        match: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the hook's limit, not add's)
        policy: HookPolicy = "fail_open",
        name: str | None = None,
    ) -> Entry: ...
    @overload
    async def add(
        self,
        point: str,
        fn: HookFn[Any, Any],
        *,
        agent: str | None = None,
        match: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the hook's limit, not add's)
        policy: HookPolicy = "fail_open",
        name: str | None = None,
    ) -> Entry: ...
    async def add(
        self,
        point: HookPoint[Any, Any] | str,
        fn: HookFn[Any, Any],
        *,
        agent: str | None = None,
        match: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the hook's limit, not add's)
        policy: HookPolicy = "fail_open",
        name: str | None = None,
    ) -> Entry:
        """Run ``fn`` at ``point`` for as long as the calling fiber is loaded.

        Args:
            point: a point (``ta.agent.PRE_TOOL``) or its name (``"pre_tool"``).
            fn: ``async def fn(event)`` (a plain function at ``prompt_accepted``) answering
                ``None``, a :class:`HookCancel` (a veto) or the point's edit.
            agent: the one agent id it runs for; ``None``, every agent.
            match: a regular expression the whole tool name (``pre_tool``, ``post_tool``) or
                child id (``child_start``, ``child_end``) must match.
            timeout: seconds it may take; past them it is stopped and has failed. ``None``
                (the default): no limit of its own (the turn's cancel still reaches it), and
                no cancel scope, which is most of what a quick hook would cost a turn.
            policy: what its failure does: ``fail_open`` goes on, ``fail_closed`` vetoes.
            name: its name in logs and :class:`HookFailed`; by default the function's.

        Returns:
            The calling fiber's entry; ``await entry.close()`` removes the hook early.

        Raises:
            ValueError: an unknown point, policy, timeout, or a ``match`` that is not a
                regular expression or is given at a point that has nothing to match.
            TypeError: ``fn`` is not callable, or is async at ``prompt_accepted``.
            FiberClosedError: the calling fiber is unloading.
            RuntimeError: called outside every fiber.
        """
        hook = _hook(point, fn, agent, match, timeout, policy, name)
        await trio.lowlevel.checkpoint()
        entry = current_context().defer(self._remove, hook)
        self._at[hook.point.name] = (*self._at[hook.point.name], hook)
        return entry

    async def input_guardrail(
        self,
        name: str,
        check: GuardrailCheck,
        *,
        agent: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the check's limit, not this call's)
        policy: HookPolicy = "fail_closed",
    ) -> Entry:
        """Check each message a turn claims with ``check`` (a ``turn_start`` hook named
        ``name``); a tripped guardrail blocks the turn with a :class:`HookCancel` naming it.

        ``check(text)`` answers ``None``/``False``/``""`` to pass, ``True`` or a reason to
        trip; plain or async. A guardrail that fails (raises, times out) fails closed unless
        ``policy`` says otherwise. The other arguments and the result are :meth:`add`'s.
        """
        guardrail = input_hook(name, check)
        return await self.add(
            TURN_START, guardrail, agent=agent, timeout=timeout, policy=policy, name=name
        )

    async def output_guardrail(
        self,
        name: str,
        check: GuardrailCheck,
        *,
        agent: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the check's limit, not this call's)
        policy: HookPolicy = "fail_closed",
    ) -> Entry:
        """Check the final answer of each turn with ``check`` (a ``turn_end`` hook named
        ``name``); a tripped guardrail blocks the turn, as :meth:`input_guardrail`."""
        guardrail = output_hook(name, check)
        return await self.add(
            TURN_END, guardrail, agent=agent, timeout=timeout, policy=policy, name=name
        )

    async def _remove(self, hook: _Hook) -> None:
        hooks = self._at[hook.point.name]
        if hook in hooks:
            self._at[hook.point.name] = tuple(h for h in hooks if h is not hook)
        await trio.lowlevel.checkpoint()

    async def run(self, point: HookPoint[E, Any], event: E) -> tuple[E, Stop]:
        """Run the hooks of ``point`` on ``event``, in order (see the module rules).

        Returns:
            The event as the hooks edited it, and what stopped the run: a veto, an answer
            instead of a tool call, or ``None`` (every hook let it go on).
        """
        for hook in self._at[point.name]:
            if hook.picky and not hook.concerns(event):
                continue
            if hook.timeout is None:
                answer = await _call(hook, event)
            else:
                # Invariant: a cancel scope only for a hook with a time limit (a scope is
                # most of what a no-op hook costs a turn: bench_hooks).
                timed_out = True
                with trio.move_on_after(hook.timeout):
                    answer = await _call(hook, event)
                    timed_out = False
                if timed_out:
                    answer = _Failure(f"timed out after {hook.timeout:g} s")
            if answer is None:
                continue
            if isinstance(answer, _Failure):
                answer = self._failed(hook, event, answer.error)
            if isinstance(answer, HookCancel):
                return event, answer
            if isinstance(answer, ToolResult) and point.name == "pre_tool":
                return event, attrs.evolve(answer, started=False)
            if answer is not None:
                event = _edited(point, event, answer)
        return event, None

    def run_sync(self, point: HookPoint[E, Any], event: E) -> HookCancel | None:
        """Run the plain-function hooks of a synchronous point; the veto, if any."""
        for hook in self._at[point.name]:
            if not hook.concerns(event):
                continue
            answer: object
            try:
                answer = hook.fn(event)
            except Exception as exc:
                answer = _Failure(_describe(exc))
            if inspect.isawaitable(answer):
                close = getattr(answer, "close", None)
                if close is not None:
                    close()
                answer = _Failure(f"{point.name} hooks are plain functions; {hook.name} is async")
            elif not isinstance(answer, HookCancel | None | _Failure):
                answer = _Failure(_wrong_answer(point, answer))
            if isinstance(answer, _Failure):
                answer = self._failed(hook, event, answer.error)
            if isinstance(answer, HookCancel):
                return answer
        return None

    def _failed(self, hook: _Hook, event: object, error: str) -> HookCancel | None:
        agent_id = str(getattr(event, "agent_id", ""))
        point = hook.point.name
        log.error("hook %s at %s of agent %s failed: %s", hook.name, point, agent_id, error)
        if self._emit is not None:
            self._emit(HookFailed(agent_id, hook.point.name, hook.name, error, hook.policy))
        if hook.policy == "fail_closed":
            return HookCancel(f"hook {hook.name} failed ({error}) and fails closed")
        return None

    def __repr__(self) -> str:
        counts = {name: len(hooks) for name, hooks in self._at.items() if hooks}
        return f"<HookRegistry {counts}>"


@final
@attrs.frozen
class _Failure:
    error: str


async def _call(hook: _Hook, event: object) -> object:
    """The hook's answer, or its failure (the caller's scope bounds its time)."""
    try:
        answer = hook.fn(event)
        # A coroutine is checked by its exact type first: inspect.isawaitable's general
        # checks are a measurable part of a no-op hook (bench_hooks).
        if type(answer) is CoroutineType or inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        return _Failure(_describe(exc))
    if answer is None or isinstance(answer, (HookCancel, *hook.point.answers)):
        return answer
    return _Failure(_wrong_answer(hook.point, answer))


def _edited(point: HookPoint[E, Any], event: E, answer: object) -> E:
    if point.name == "pre_model":
        return attrs.evolve(event, request=answer)  # type: ignore[misc]
    if point.name == "pre_tool":
        return attrs.evolve(event, arguments=dict(answer))  # type: ignore[misc, call-overload]
    return attrs.evolve(event, result=answer)  # type: ignore[misc]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _wrong_answer(point: HookPoint[Any, Any], answer: object) -> str:
    takes = ", ".join(["None", "HookCancel", *(t.__name__ for t in point.answers)])
    return f"answered {type(answer).__name__} {answer!r:.80}; {point.name} takes {takes}"


def _hook(
    point: HookPoint[Any, Any] | str,
    fn: Callable[[Any], Any],
    agent: str | None,
    match: str | None,
    timeout: float | None,
    policy: str,
    name: str | None,
) -> _Hook:
    if isinstance(point, str):
        found = HOOK_POINTS.get(point)
        if found is None:
            raise ValueError(f"unknown hook point {point!r}; the points: {', '.join(HOOK_POINTS)}")
        point = found
    if not callable(fn):
        raise TypeError(f"a hook is a function of the event; got {fn!r}")
    if point.sync and inspect.iscoroutinefunction(fn):
        raise TypeError(
            f"{point.name} hooks are plain functions (agent.prompt() never blocks); "
            f"{fn!r} is async: make it a plain function, or use turn_start"
        )
    if policy not in _POLICIES:
        raise ValueError(f"a hook's policy is 'fail_open' or 'fail_closed'; got {policy!r}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise ValueError(f"a hook's timeout is a number of seconds > 0, or None; got {timeout!r}")
    pattern = None
    if match is not None:
        if point.matches is None:
            raise ValueError(
                f"{point.name} has nothing to match; match= applies at pre_tool, post_tool "
                f"(the tool name), child_start and child_end (the child id)"
            )
        try:
            pattern = re.compile(match)
        except re.error as exc:
            raise ValueError(f"match {match!r} is not a regular expression: {exc}") from None
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    limit = float(timeout) if timeout is not None else None
    return _Hook(point, fn, label, agent, pattern, limit, policy)  # type: ignore[arg-type]


#: The registry of a runtime without the ``hooks`` service: nothing ever runs.
NO_HOOKS: Final = HookRegistry()

#: The key of the ``hooks`` service (provided by :data:`hooks_plugin`).
HOOKS: Final[ServiceKey[HookRegistry]] = ServiceKey("hooks")


@final
class HooksPlugin:
    """The core plugin that provides a :class:`HookRegistry` as the service ``hooks``."""

    name = "hooks"

    async def apply(self, ctx: Context, config: None) -> None:
        """Provide a fresh registry for as long as the fiber is loaded."""
        ctx.provide(HOOKS, HookRegistry(ctx.emit))


hooks_plugin = HooksPlugin()
