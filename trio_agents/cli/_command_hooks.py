"""Command hooks: the config file's ``[[hooks]]`` tables, each a shell command run as a hook.

The format::

    [[hooks]]
    event = "pre_tool"              # a hook point (docs/hooks.rst), not prompt_accepted
    match = "bash"                  # optional: a regular expression the whole tool name
                                    # (or child id) must match
    command = "./check-command"     # a /bin/sh -c command line
    timeout = 10                    # optional: seconds (default 10); then it is killed
    policy = "fail_closed"          # optional: what its failure does (default fail_open)

Rules:
- The command reads the event as one JSON object on stdin: ``event`` (the point's name),
  ``agent_id``, ``session_id`` and the event's own fields (``tool``, ``arguments``,
  ``turn_id``, ``call_id``, ``result``, ``answer``, ...).
- Its exit status answers: 0 lets it go on, 2 vetoes with its stderr as the reason (as
  Claude Code's hooks do), anything else is a failure (its policy decides). On exit 0 its
  stdout may hold one JSON object: ``{"decision": "block", "reason": "..."}`` vetoes,
  ``{"arguments": {...}}`` replaces a ``pre_tool`` call's arguments, ``{"result": "..."}``
  answers a ``pre_tool`` call instead of running it or replaces a ``post_tool`` result.
  Stdout that is not a JSON object is ignored.
- The process is owned by the hook's call, so by the agent's turn: it runs in a process
  group of its own, and the whole group is killed when the call is cancelled (the agent is
  disposed, the turn cancelled) or at its timeout (then the hook has failed).
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import re
import signal
from collections.abc import Mapping
from typing import Any, Final, final

import attrs
import trio

from .._errors import TrioAgentsError
from ..agent import HOOK_POINTS, HOOKS, HookPolicy, ToolResult
from ..cancel import HookCancel
from ..kernel import Context
from ..model import ModelRequest

#: Seconds a command hook may run before it is killed.
DEFAULT_COMMAND_TIMEOUT: Final = 10.0

#: The points a command can hook: ``prompt_accepted`` runs synchronously in ``prompt()``.
_COMMAND_POINTS: Final = tuple(name for name, point in HOOK_POINTS.items() if not point.sync)


@attrs.frozen
class HookEntry:
    """One ``[[hooks]]`` table of the config file."""

    event: str
    command: str
    match: str | None = None
    timeout: float = DEFAULT_COMMAND_TIMEOUT
    policy: str = "fail_open"


def hook_problems(entries: list[Mapping[str, Any]]) -> list[str]:
    """What is wrong with the raw ``[[hooks]]`` tables beyond their types, each with where."""
    problems: list[str] = []
    for index, table in enumerate(entries):
        where = f"hooks[{index}]"
        event, match = table.get("event"), table.get("match")
        if isinstance(event, str) and event not in _COMMAND_POINTS:
            why = (
                "runs synchronously in prompt(), so a command cannot hook it; use turn_start"
                if event in HOOK_POINTS
                else "is not a hook point"
            )
            problems.append(f"{where}.event: {event!r} {why} (one of {', '.join(_COMMAND_POINTS)})")
        point = HOOK_POINTS.get(event) if isinstance(event, str) else None
        if isinstance(match, str) and point is not None and point.matches is None:
            problems.append(
                f"{where}.match: {event} has nothing to match; match applies at pre_tool, "
                f"post_tool, child_start and child_end"
            )
        if isinstance(match, str):
            try:
                re.compile(match)
            except re.error as exc:
                problems.append(f"{where}.match: {match!r} is not a regular expression: {exc}")
        policy = table.get("policy")
        if isinstance(policy, str) and policy not in ("fail_open", "fail_closed"):
            problems.append(f"{where}.policy: {policy!r} is not 'fail_open' or 'fail_closed'")
        timeout = table.get("timeout")
        if isinstance(timeout, int | float) and not isinstance(timeout, bool) and not timeout > 0:
            problems.append(f"{where}.timeout: a number of seconds > 0; got {timeout!r}")
    return problems


class CommandHookError(TrioAgentsError, RuntimeError):
    """A command hook exited with a status other than 0 or 2 (a failure of the hook)."""


@final
class CommandHook:
    """The hook function of one ``[[hooks]]`` table: runs its command on each event."""

    __slots__ = ("entry",)

    def __init__(self, entry: HookEntry) -> None:
        self.entry = entry

    async def __call__(self, event: object) -> object:
        entry = self.entry
        payload = json.dumps({"event": entry.event, **_plain(event)}, default=_json_default)
        done = await trio.run_process(
            ["/bin/sh", "-c", entry.command],
            stdin=payload.encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            start_new_session=True,
            deliver_cancel=_kill_group,
        )
        stderr = done.stderr.decode(errors="replace").strip()
        if done.returncode == 2:
            return HookCancel(stderr or f"command {entry.command!r} exited 2")
        if done.returncode != 0:
            detail = f": {stderr}" if stderr else ""
            raise CommandHookError(f"command {entry.command!r} exited {done.returncode}{detail}")
        return _answer(entry.event, done.stdout.decode(errors="replace"))

    def __repr__(self) -> str:
        return f"<CommandHook {self.entry.event} {self.entry.command!r}>"


async def _kill_group(process: trio.Process) -> None:
    """Kill the command's whole process group (it is its own session leader)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await trio.lowlevel.checkpoint()


def _answer(event: str, stdout: str) -> object:
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        answer = json.loads(text)
    except ValueError as exc:
        raise CommandHookError(f"its stdout starts with '{{' but is not JSON: {exc}") from None
    if not isinstance(answer, dict):
        return None
    if answer.get("decision") == "block":
        return HookCancel(str(answer.get("reason") or "blocked by a command hook"))
    if event == "pre_tool" and isinstance(answer.get("arguments"), dict):
        return answer["arguments"]
    if event in ("pre_tool", "post_tool") and isinstance(answer.get("result"), str):
        return ToolResult(answer["result"], is_error=bool(answer.get("is_error", False)))
    return None


def _plain(event: Any) -> dict[str, Any]:
    return {field.name: getattr(event, field.name) for field in attrs.fields(type(event))}


def _json_default(value: object) -> object:
    if isinstance(value, ModelRequest):
        # The conversation can be long; a command is told its size and the tools on offer.
        return {"messages": len(value.messages), "tools": [t.name for t in value.tools]}
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return _plain(value)
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple | list):
        return list(value)
    return str(value)


@final
class CommandHooks:
    """The plugin that adds the config file's command hooks (on its own fiber)."""

    name = "command-hooks"
    inject = ("hooks",)

    def __init__(self, entries: tuple[HookEntry, ...]) -> None:
        self.entries = entries

    async def apply(self, ctx: Context, config: None) -> None:
        hooks = ctx.service(HOOKS)
        for index, entry in enumerate(self.entries):
            policy: HookPolicy = "fail_closed" if entry.policy == "fail_closed" else "fail_open"
            await hooks.add(
                entry.event,
                CommandHook(entry),
                match=entry.match,
                timeout=entry.timeout,
                policy=policy,
                name=f"hooks[{index}] {entry.command!r}",
            )
