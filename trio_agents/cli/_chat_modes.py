"""The chat's conveniences: ``/mode``, Shift-Tab, ``/model``, ``/clear``, ``/resume``,
``--continue``, ``/cost`` and ``@file`` mentions.

Rules:
- ``/mode`` names the agent's mode and the others; ``/mode NAME`` switches to it; Shift-Tab
  (on a terminal) goes to the next of :data:`~trio_agents.agent.MODES` (ask, edit, plan, ask,
  ...), as in Claude Code. Each switch prints one line with the mode's description; it
  applies from the agent's next tool call and is recorded in its session. On a terminal a
  mode other than ``ask`` stands before the prompt (``[plan] you>``).
- ``/model`` names the agent's model and those the config file's ``models`` lists;
  ``/model SPEC`` switches to SPEC (any valid spec: the user is at their own terminal) from
  the next model request, recorded as the agent's definition. A bad spec or a model that
  cannot answer is one red line and nothing changes.
- ``/clear`` leaves the agent for a new session (the old one stays stored); ``/resume``
  lists the stored sessions (most recent first, the current one left out) as a numbered list,
  read when the chat started or last switched; ``/resume N`` (or ``/resume ID``) goes to one.
  Switching leaves the conversation loop (:data:`Handled.SWITCH`); the chat then disposes the
  agent it owns and attaches the next (:meth:`ChatCommands.next_agent`); a session that
  cannot be resumed is one red line and the chat goes back to the one it left.
- ``--continue`` attaches the most recently updated stored session whose ``cwd`` is the
  working directory (:func:`latest_here`); with none, a new one (said in one line).
- ``/cost``: the session's token usage so far; the cost is said to be unknown (no prices).
- ``@path`` in a prompt (a word starting with ``@`` that names a file under the working
  directory, or an absolute one) attaches the file's text after the prompt, with its path,
  and one line says so; a word that names no file is left as typed. A file over
  :data:`MENTION_LIMIT` bytes, or not UTF-8 text, is not attached (one red line says why).
- ``/compact`` prints ``compacting…`` before it starts: its progress line.
"""

from __future__ import annotations

import enum
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

import attrs

from ..agent import MODES, Agent, AgentHandle, UnknownModeError, mode_named
from ..model import ModelError, ModelSpecError
from ..session import SessionInfo
from ._options import CliError

if TYPE_CHECKING:
    from ..kernel import Context
    from ._chat_view import ChatView

#: The chat's lines of ``/help`` for these commands.
HELP: Final = (
    "/mode [NAME]  the agent's mode (ask, edit, plan), or switch to NAME; Shift-Tab cycles\n"
    "/model [SPEC] the agent's model and the listed ones, or switch to SPEC\n"
    "/clear        start a new session (this one stays stored)\n"
    "/resume [N]   list the stored sessions, or go to number N (or an id)\n"
    "/cost         the tokens this session used so far\n"
    "@path         in a prompt: attach that file's text"
)
#: The largest file an ``@path`` mention attaches, in bytes.
MENTION_LIMIT: Final = 256 * 1024
_MENTION = re.compile(r"(?<!\S)@(\S+)")


class Handled(enum.Enum):
    """What :meth:`ChatCommands.handle` did with a line (a ``str`` is the prompt to send)."""

    #: The line was a command of this module, and it is done.
    DONE = "done"
    #: Leave this agent for another (``/clear``, ``/resume N``).
    SWITCH = "switch"


#: ``/clear``'s target: a new session.
NEW: Final = ""


@final
@attrs.define(eq=False)
class ChatCommands:
    """The conveniences of one chat (see the module rules).

    Attributes:
        models: the specs the config file's ``models`` lists.
        stored: the stored sessions as last read (most recent first).
        target: where a switch goes: a session id, :data:`NEW`, or ``None`` (no switch).
    """

    models: tuple[str, ...] = ()
    stored: list[SessionInfo] = attrs.Factory(list)
    target: str | None = None
    _listed: list[str] = attrs.Factory(list)

    async def refresh(self, root: Context) -> None:
        """Read the stored sessions (what ``/resume`` lists)."""
        self.stored = await root.get("sessions").list()
        self._listed = []

    def handle(self, line: str, agent: Agent, view: ChatView) -> Handled | str | None:
        """Act on ``line`` if it is one of these commands (or holds ``@path`` mentions);
        ``None`` leaves it to the chat as it is."""
        command, _, rest = line.partition(" ")
        rest = rest.strip()
        if not line.startswith("/"):
            if "@" not in line:
                return None
            text, notes = expand_mentions(line, agent.cwd or os.getcwd())
            for note, style in notes:
                view.note(note, style)
            return text
        if command == "/mode":
            self._mode(agent, view, rest)
        elif command == "/model":
            self._model(agent, view, rest)
        elif command == "/cost":
            view.note(_cost(agent))
        elif command == "/clear":
            self.target = NEW
            return Handled.SWITCH
        elif command == "/resume":
            return self._resume(agent, view, rest)
        elif command == "/compact":
            view.note("compacting… (Ctrl-C cancels)")
            return None
        else:
            return None
        return Handled.DONE

    def cycle(self, agent: Agent, view: ChatView) -> None:
        """Shift-Tab: the next mode."""
        index = MODES.index(agent.mode)
        self._switched(view, agent, MODES[(index + 1) % len(MODES)].id)

    def _mode(self, agent: Agent, view: ChatView, name: str) -> None:
        if not name:
            others = ", ".join(m.id for m in MODES if m != agent.mode)
            view.note(f"mode: {agent.mode.id} ({agent.mode.description}); also {others}")
            return
        try:
            self._switched(view, agent, name)
        except UnknownModeError as exc:
            view.note(str(exc), "red")

    @staticmethod
    def _switched(view: ChatView, agent: Agent, name: str) -> None:
        mode = agent.set_mode(mode_named(name))
        view.note(f"mode: {mode.id} ({mode.description})", "yellow")
        view.mode(agent)

    def _model(self, agent: Agent, view: ChatView, spec: str) -> None:
        if not spec:
            listed = ", ".join(self.models) if self.models else "none (the config file's models)"
            view.note(f"model: {agent.model.name}; listed: {listed}")
            return
        try:
            model = agent.set_model(spec)
        except (ModelSpecError, ModelError) as exc:
            view.note(f"model {spec!r} cannot be used: {exc}", "red")
            return
        view.note(f"model: {model.name} (from the next request)", "yellow")

    def _resume(self, agent: Agent, view: ChatView, pick: str) -> Handled:
        others = [info for info in self.stored if info.id != agent.id and not info.damaged]
        if not pick:
            if not others:
                view.note("no other stored session")
                return Handled.DONE
            self._listed = [info.id for info in others]
            for number, info in enumerate(others, 1):
                view.note(_row(number, info))
            view.note("/resume N goes to session N")
            return Handled.DONE
        if pick.isdigit():
            listed = self._listed
            if not 1 <= int(pick) <= len(listed):
                hint = f"1 to {len(listed)}" if listed else "none yet: /resume lists them"
                view.note(f"no session number {pick}; the numbers are {hint}", "red")
                return Handled.DONE
            pick = listed[int(pick) - 1]
        if pick == agent.id:
            view.note(f"already in session {pick}")
            return Handled.DONE
        self.target = pick
        return Handled.SWITCH

    async def next_agent(
        self, root: Context, *, instructions: str | None
    ) -> tuple[Agent, AgentHandle | None]:
        """The agent a switch goes to: a new one (``/clear``), a live one, or a stored one
        resumed. Call it before disposing the current agent's handle.

        Raises:
            CliError: the session is not stored.
            TrioAgentsError, OSError: what ``agents.resume`` raises (live elsewhere, damaged).
        """
        target, self.target = self.target, None
        here = os.getcwd()
        agents = root.agents
        if not target:
            handle = await agents.create(cwd=here, instructions=instructions)
            return handle.agent, handle
        live = agents.get(target)
        if live is not None:
            return live, None
        if not await root.get("sessions").is_stored(target):
            raise CliError(f"no stored session {target!r}; /resume lists them")
        handle = await agents.resume(target, cwd=here)
        return handle.agent, handle


def _row(number: int, info: SessionInfo) -> str:
    when = info.updated.strftime("%Y-%m-%d %H:%M") if info.updated is not None else "?"
    title = info.title or "(no prompt yet)"
    return f"{number:>3}. {info.id}  {when}  {title}"


def _cost(agent: Agent) -> str:
    usage = agent.usage
    cache = ""
    if usage.cache_read_tokens or usage.cache_creation_tokens:
        cache = f" (cache: {usage.cache_read_tokens} read, {usage.cache_creation_tokens} written)"
    return (
        f"session {agent.id}: {usage.input_tokens} tokens in{cache}, {usage.output_tokens} out, "
        f"{usage.requests} requests on {agent.model.name}; cost: unknown (no prices are known)"
    )


def expand_mentions(line: str, cwd: str) -> tuple[str, list[tuple[str, str]]]:
    """``line`` with the text of each file an ``@path`` names attached after it, and the
    notes to show (text, style) (see the module rules)."""
    attached: list[str] = []
    notes: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for found in _MENTION.finditer(line):
        name = found[1].rstrip(".,;:!?)\"'")
        path = Path(cwd, os.path.expanduser(name))
        if not path.is_file() or path.resolve() in seen:
            continue
        seen.add(path.resolve())
        try:
            size = path.stat().st_size
            if size > MENTION_LIMIT:
                over = f"{size:,} bytes, over {MENTION_LIMIT:,}"
                notes.append((f"@{name} not attached: {over}", "red"))
                continue
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            notes.append((f"@{name} not attached: it is not UTF-8 text", "red"))
            continue
        except OSError as exc:
            notes.append((f"@{name} not attached: {exc.strerror or exc}", "red"))
            continue
        end = "" if text.endswith("\n") else "\n"
        attached.append(f'<file path="{name}">\n{text}{end}</file>')
        lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        notes.append((f"attached {name} ({lines} lines)", "dim"))
    if not attached:
        return line, notes
    return "\n\n".join([line, *attached]), notes


async def latest_here(root: Context, cwd: str) -> str | None:
    """The most recently updated stored session whose working directory is ``cwd``."""
    infos: list[SessionInfo] = await root.get("sessions").list()
    for info in infos:
        if info.cwd == cwd and not info.damaged and not info.live:
            return info.id
    return None
