"""The common options (``--config``, ``--store``, ``--model``, ``--watch``) and the runtime they
describe.

Rules:
- Every subcommand takes ``--config`` and ``--store`` (one set, built once: argparse parents);
  those that run a model take ``--model``, those that load the config file's plugins
  ``--watch``. The config file is read for every subcommand, so its ``store`` is the default
  of ``sessions`` too.
- Everything the user can get wrong in the options is checked by :func:`settings_from`, before
  trio starts: the model spec and what the model needs (its API key: ``model.preflight``),
  the config file (every problem at once), ``--watch`` without ``watchfiles``. What fails
  later (a store directory that cannot be created, a plugin whose ``apply`` raises) surfaces
  as a :class:`TrioAgentsError` or :class:`OSError`, which the entry point prints as one line.
- ``--model`` beats the config file's ``model``, which beats ``echo``.
- Without ``--store``, the first command that writes sessions to the default directory (one
  that does not exist yet) says where, once, on stderr (:func:`announce_store`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import trio

from .._errors import TrioAgentsError
from ..agent import Agent, AgentHandle, Budget, open_runtime
from ..kernel import Context, watch_plugins
from ..model import Model, ModelError, model_from_spec, preflight
from ..session import (
    JsonlStore,
    MemoryStore,
    SessionNotFoundError,
    SessionStore,
    SqliteStore,
    default_root,
    parse_store_spec,
)
from ..shell import SANDBOX_POLICIES, LocalShell, SandboxShell, tool_bash
from ..tracing import open_environ_tracing
from ..workspace import LocalFiles, project_instructions, tool_files, tool_plan
from ._command_hooks import CommandHooks
from ._config import ASKED_BY_DEFAULT, Config, check_asks, load_config
from ._signals import terminable
from ._usage import Parser


class CliError(TrioAgentsError, ValueError):
    """A mistake in how the command was called; the message says what to do."""


_CONFIG_HELP = (
    "a TOML file: model, store, [[plugins]], [[mcp_servers]], [[agents]] and [approval] "
    "(see docs/cli.rst, 'The config file')"
)


def _common() -> Parser:
    """The options every subcommand takes: where the config file and the sessions are."""
    common = Parser(add_help=False)
    group = common.add_argument_group("common options")
    group.add_argument("--config", default=None, metavar="FILE", help=_CONFIG_HELP)
    group.add_argument(
        "--store",
        default=None,
        metavar="SPEC",
        help="where sessions are kept: DIR (JSONL files), 'memory', sqlite:PATH, "
        "postgresql://... or 'host=... dbname=...' (default: the config file's store, else "
        "$TRIO_AGENTS_HOME/sessions, else $XDG_STATE_HOME/trio-agents/sessions)",
    )
    return common


def _model() -> Parser:
    """The option of the subcommands that run a model."""
    model = Parser(add_help=False)
    model.add_argument(
        "--model",
        default=None,
        metavar="SPEC",
        help="model spec: echo, echo?delay=SECONDS, openai:MODEL, anthropic:MODEL "
        "(default: the config file's model, else echo)",
    )
    return model


def _watch() -> Parser:
    """The options of the subcommands that load the config file's plugins and run its agents
    (``--watch``; ``--forget-approvals``, as they resume sessions)."""
    watch = Parser(add_help=False)
    watch.add_argument(
        "--watch",
        action="store_true",
        help="reload the config file's plugin modules when their source changes",
    )
    watch.add_argument(
        "--sandbox",
        default=None,
        choices=SANDBOX_POLICIES,
        metavar="POLICY",
        help="run shell commands under bubblewrap: read-only, workspace-write (writable: the "
        "working directory) or danger-full-access (no sandbox); sandboxed bash is not asked "
        "about (default: the config file's sandbox, else none)",
    )
    watch.add_argument(
        "--no-project-files",
        dest="project_files",
        action="store_false",
        help="leave AGENTS.md and CLAUDE.md (of the working directory and its parents, up to "
        "the repository root) out of a new session's system prompt",
    )
    watch.add_argument(
        "--forget-approvals",
        action="store_true",
        help="ignore the 'always' answers stored in a resumed session: ask again "
        "(a session file is trusted input)",
    )
    return watch


# Invariant: built once; every subcommand's parser copies its actions (argparse ``parents``).
_COMMON = _common()
_MODEL = _model()
_WATCH = _watch()


def common_parents(*, model: bool = False, watch: bool = False) -> list[Parser]:
    """The parent parsers of a subcommand: ``--config`` and ``--store``, which every
    subcommand takes, and ``--model`` / ``--watch`` for the subcommands that use them."""
    return [_COMMON, *([_MODEL] if model else []), *([_WATCH] if watch else [])]


@attrs.frozen
class Settings:
    """What the common options resolved to."""

    model: Model
    store: str | None = None
    config: Config = attrs.Factory(Config)
    watch: bool = False
    #: Ignore the standing approvals restored from a session (``--forget-approvals``, or the
    #: config file's ``[approval] forget_approvals``).
    forget_approvals: bool = False
    #: The sandbox of shell commands (``--sandbox``, else the config file's ``sandbox``), or
    #: ``None``: no sandbox (``LocalShell``).
    sandbox: SandboxShell.Config | None = None
    #: Whether a new session's system prompt holds the project instructions (``AGENTS.md``,
    #: ``CLAUDE.md``); ``--no-project-files`` turns it off.
    project_files: bool = True


def settings_from(args: argparse.Namespace) -> Settings:
    """Resolve and check the common options (synchronous: it runs before trio starts).

    Raises:
        ConfigFileError: the config file is missing or has problems (all listed).
        ModelSpecError: the model spec is not valid.
        ModelError: the model cannot answer as configured (a missing API key).
        StoreSpecError: the store spec is not valid.
        CliError: ``--watch`` without the ``watchfiles`` package.
    """
    path = getattr(args, "config", None)
    config = load_config(path) if path is not None else Config()
    model = resolve_model(getattr(args, "model", None) or config.model)
    try:
        preflight(model)  # a missing API key is refused before anything is stored
    except ModelError as exc:
        if getattr(args, "command", None) != "demo":
            raise
        raise CliError(
            f"the demo stopped: model {model.name} cannot answer: {exc}; "
            "run it without --model to use the embedded echo model"
        ) from None
    watch = bool(getattr(args, "watch", False))
    if watch and importlib.util.find_spec("watchfiles") is None:
        raise CliError("--watch needs the watchfiles package: pip install 'trio-agents[watch]'")
    store = args.store if args.store is not None else config.store
    parse_store_spec(store)  # refused before trio starts
    forget = bool(getattr(args, "forget_approvals", False)) or config.forget_approvals
    return Settings(
        model=model,
        store=store,
        config=config,
        watch=watch,
        forget_approvals=forget,
        sandbox=_sandbox(getattr(args, "sandbox", None), config),
        project_files=bool(getattr(args, "project_files", True)),
    )


def _sandbox(policy: str | None, config: Config) -> SandboxShell.Config | None:
    """``--sandbox`` over the config file's ``sandbox`` (whose directories and network
    stay); ``None`` when neither asks for one, or the policy is ``danger-full-access``."""
    table = config.sandbox
    policy = policy if policy is not None else (table.policy if table is not None else None)
    if policy is None or policy == "danger-full-access":
        return None
    if table is None:
        return SandboxShell.Config(policy=policy)
    return SandboxShell.Config(policy=policy, writable=tuple(table.writable), network=table.network)


def make_store(store: str | None, *, read_only: bool = False) -> SessionStore:
    """The store named by ``--store`` (a spec: DIR, ``memory``, ``sqlite:PATH``,
    ``postgresql://...``); ``read_only`` for the commands that only read (a JSONL or SQLite
    store then writes nothing and works on a read-only directory).

    Raises:
        StoreSpecError: the spec is not valid, or its backend is not available.
    """
    return parse_store_spec(store).make(read_only=read_only)


def announce_store(store: str | None) -> None:
    """Say where sessions go when the default directory is about to be used the first time."""
    if store is not None:
        return
    root = default_root()
    if not root.exists():
        print(
            f"trio-agents: sessions are kept in {root} (set --store DIR, or --store memory)",
            file=sys.stderr,
        )


def store_root(store: str | None) -> Path | None:
    """The local directory sessions are written in (JSONL: the sessions directory; SQLite:
    the database's directory), or ``None`` (memory, PostgreSQL)."""
    return parse_store_spec(store).directory


def session_path(root: Context, session_id: str) -> Path | None:
    """The file ``session_id`` is written to, or ``None`` when the store keeps no files."""
    store = root.get("sessions")
    if isinstance(store, JsonlStore):
        return store.path_of(session_id)
    return store.path if isinstance(store, SqliteStore) else None


def session_place(root: Context, session_id: str) -> str:
    """Where ``session_id`` is kept, said for a person (the last line of ``chat``)."""
    path = session_path(root, session_id)
    if path is not None:
        return str(path)
    store = root.get("sessions")
    if isinstance(store, MemoryStore):
        return "memory only (--store memory): not kept"
    return f"in {type(store).__name__}"


def store_place(store: str | None) -> str | None:
    """Where the store of spec ``store`` keeps sessions, for messages: the directory (JSONL)
    or database file (SQLite); ``None`` for memory and PostgreSQL (a DSN may hold a
    password)."""
    spec = parse_store_spec(store)
    return str(spec.target) if spec.kind in ("jsonl", "sqlite") else None


def resolve_model(spec: str | None) -> Model:
    """The model named by ``--model`` (``None``: echo).

    Raises:
        ModelSpecError: the spec is not valid; the message lists the valid forms.
    """
    return model_from_spec(spec if spec is not None else "echo")


@asynccontextmanager
async def open_cli_runtime(
    settings: Settings, *, shell: bool = True, allow: Iterable[str] = ()
) -> AsyncIterator[Context]:
    """Open the runtime the options describe and yield its root.

    Applies, in order: the core plugins (with the declared agents, owned by the AgentLoop),
    what needs approval (``tools.require_approval``: the ``[approval]`` table's ``ask``, and
    ``bash``, ``bash_kill``, ``write_file`` and ``edit_file`` unless its ``allow`` or
    ``allow`` here names them, or a sandbox holds the shell's commands), ``LocalShell``
    (``SandboxShell`` with a sandbox), ``tool_bash``, ``LocalFiles``, ``tool_files`` (with the
    config file's ``[files]``) and ``tool_plan`` (when ``shell``), the config file's plugins
    with their
    configs, its MCP servers (each a plugin; one that cannot start is an error), the check
    that every ``ask`` of the config file names a tool (:func:`check_asks`), and with
    ``--watch`` a background task that reloads their modules on change.

    A SIGINT, SIGTERM or SIGHUP that the command itself does not take ends the body (plugin
    start included) with :exc:`Terminated`, and the runtime unwinds (``_signals.py``).

    Raises:
        CliError: a plugin of the config file failed to start.
        SandboxUnavailableError: a sandbox was asked for and bubblewrap cannot make it.
        ConfigFileError: an ``ask`` of the config file names no tool (every such listed).
        Terminated: a signal ended the body.
    """
    config = settings.config
    # Declared agents without a cwd work in the directory the command was started in.
    here = os.getcwd()
    declared = [a if a.cwd is not None else attrs.evolve(a, cwd=here) for a in config.agents]
    announce_store(settings.store)
    async with (
        open_environ_tracing() as tracer_provider,
        open_runtime(
            store=make_store(settings.store),
            model=settings.model,
            agents=declared,
            definitions=list(config.definitions),
            tracer_provider=tracer_provider,
            prices=config.prices or None,
        ) as root,
    ):
        with terminable(root):
            # A sandboxed command cannot leave the sandbox: nothing to ask about (as Codex).
            # The file tools run in this process, outside it: their writes are still asked.
            sandboxed = shell and settings.sandbox is not None
            held = ("bash", "bash_kill") if sandboxed else ()
            allowed = {*config.allow, *allow, *held}
            asked = {*config.ask, *(n for n in ASKED_BY_DEFAULT if n not in allowed)}
            if asked:
                root.get("tools").require_approval(sorted(asked))
            if shell and settings.sandbox is not None:
                await root.plugin(SandboxShell(), settings.sandbox)
                # A declared agent's own sandbox holds its commands more tightly.
                held_agents = {a.id: a.sandbox for a in config.agents if a.id and a.sandbox}
                await root.plugin(tool_bash, {"sandboxes": held_agents})
            elif shell:
                await root.plugin(LocalShell())
                await root.plugin(tool_bash)
            if shell:
                # The file tools and the plan, beside bash (writes asked about by default).
                await root.plugin(LocalFiles())
                await root.plugin(tool_files, config.files)
                await root.plugin(tool_plan)
            if config.hooks:
                await root.plugin(CommandHooks(config.hooks))
            for loaded in config.plugins:
                try:
                    await root.plugin(loaded.plugin, loaded.config)
                except TrioAgentsError:
                    raise
                except Exception as exc:
                    raise CliError(
                        f"plugin {loaded.label} failed to start: {type(exc).__name__}: {exc}"
                    ) from exc
            for server in config.mcp_servers:
                await root.plugin(server)
            check_asks(config, root.get("tools").names(explicit=True))
            if settings.watch:
                files = sorted({p.file for p in config.plugins if p.file is not None})
                if files:
                    directories = sorted({os.path.dirname(f) for f in files})
                    root.start_soon(watch_plugins, root, directories, name="watch plugins")
            yield root


async def attach(
    root: Context,
    session_id: str | None,
    *,
    project_files: bool = True,
    budget: Budget | None = None,
) -> tuple[Agent, AgentHandle | None]:
    """The agent a ``chat`` or ``run`` talks to, and its handle when this command owns it.

    - ``session_id`` of a live agent (one declared in the config file): that agent, which
      the AgentLoop owns (no handle).
    - ``session_id`` of a stored session: resumed (with the instructions it was made with);
      otherwise a new agent with that id.
    - no ``session_id``: the first declared agent if there is one, else a new agent.

    A new agent's system prompt is the project instructions of the working directory
    (:func:`~trio_agents.workspace.project_instructions`), unless ``project_files`` is false.
    ``budget`` (the ``--max-*`` options) is a new or resumed agent's budget; a declared
    agent takes its budget from the config file, so it is refused there.

    Raises:
        CliError: a ``budget`` for an agent declared in the config file.
    """
    agents = root.agents
    here = os.getcwd()  # the agent's shell commands run where the command was started
    instructions = (
        await trio.to_thread.run_sync(project_instructions, here) if project_files else None
    )
    if session_id is not None:
        live = agents.get(session_id)
        if live is not None:
            return _declared(live, budget), None
        try:
            if budget is None:
                handle = await agents.resume(session_id, cwd=here)
            else:
                handle = await agents.resume(session_id, cwd=here, budget=budget)
        except SessionNotFoundError:
            handle = await agents.create(
                session_id=session_id,
                cwd=here,
                instructions=instructions,
                tools=agents.lead_tools(),
                budget=budget,
            )
        return handle.agent, handle
    declared = agents.list()
    if declared:
        return _declared(declared[0], budget), None
    handle = await agents.create(
        cwd=here, instructions=instructions, tools=agents.lead_tools(), budget=budget
    )
    return handle.agent, handle


def _declared(agent: Agent, budget: Budget | None) -> Agent:
    if budget is not None:
        raise CliError(
            f"agent {agent.id!r} is declared in the config file, which gives its budget; "
            f"set budget = {{...}} in its [[agents]] table instead of --max-* options"
        )
    return agent
