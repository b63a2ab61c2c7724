"""``--config FILE``: the TOML file that names the model, plugins and declared agents.

The format::

    model = "echo?delay=0.5"          # the default model (``--model`` wins over it); a list
                                      # of specs is a fallback chain
    store = "sqlite:~/agents.db"      # the session store (``--store`` wins over it): DIR,
                                      # memory, sqlite:PATH or postgresql://...
    models = ["openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5"]
                                      # optional: the models a session may switch to
                                      # (chat's /model, an editor's model selector)

    [[plugins]]
    module = "my_plugins.greeter"     # imported with the file's directory first on sys.path
    attr = "plugin"                   # optional: the plugin object in the module
    config = { greeting = "hi" }      # optional: structured into the plugin's Config

    [[mcp_servers]]                   # an MCP server: its tools are <name>__<tool>
    name = "files"
    command = "npx"                   # a stdio server (or: url = "http://..." and headers)
    args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
    tools = ["read_file"]             # optional allow-list (the server's own tool names)

    ask = ["write_file"]              # optional: its tools whose calls need approval;
                                      # without this key, all of them ("*"); [] for none

    [[agents]]                        # owned by the AgentLoop
    id = "helper"
    model = "echo"
    instructions = "You are terse."
    tools = ["bash"]
    ask = ["bash"]                    # optional: tools whose calls need approval in this agent
    budget = { tokens = 1000, cost = 0.5 }  # optional: what it and its children may spend
    sandbox = "read-only"             # optional: its commands' sandbox policy, when the shell
                                      # is sandboxed (the stricter of this and the shell's)

    [prices]                          # optional: US dollars per million tokens, by model name
    "gpt-4o" = { input = 2.5, output = 10.0, cache_read = 1.25 }

    [[agent_definitions]]             # a child the model may start with the task tool
    name = "reviewer"                 # (then the command's own agent is given task,
    description = "Reviews a diff"    # task_output and task_cancel)
    instructions = "Review strictly."
    model = "echo"                    # optional: the default model otherwise
    tools = ["read_file", "grep"]     # optional: every tool but task when absent
    ask = ["bash"]                    # optional, as for agents
    max_steps = 20                    # optional
    budget = { output_tokens = 5000 } # optional: what each such child may spend

    [approval]                        # optional: tools whose calls need approval in every agent
    ask = ["bash", "files__write_file"]
    allow = ["bash_kill"]             # optional: of bash and bash_kill (asked by default),
                                      # those that run unasked
    forget_approvals = true           # optional: ignore the "always" answers stored in a
                                      # resumed session (as --forget-approvals)

    [files]                           # optional: where read_file, write_file, edit_file,
                                      # list_files, glob and grep may reach
    add_dirs = ["../shared"]          # optional: directories besides the working directory
                                      # (relative ones: to the file's directory)
    confined = false                  # optional: reach every path (default: true)

    [sandbox]                         # optional: run shell commands under bubblewrap; or a
                                      # top-level sandbox = "read-only" (the policy alone)
    policy = "workspace-write"        # optional: read-only, workspace-write (the default),
                                      # danger-full-access (none; --sandbox wins over it)
    writable = ["../shared"]          # optional: more writable directories (relative to
                                      # the file's directory)
    network = false                   # optional: whether commands reach the network

    [[hooks]]                         # a command hook (docs/hooks.rst): the event as JSON
    event = "pre_tool"                # on stdin; exit 0 allows, 2 blocks (stderr: why)
    match = "bash"                    # optional: the tool name (a regular expression)
    command = "./check.sh"
    timeout = 10                      # optional: seconds, then it is killed (default 10)
    policy = "fail_closed"            # optional: if it fails (default fail_open)

Rules:
- Validation collects every problem (types, unknown keys, model specs, imports, plugin shapes
  and plugin configs) and raises one :class:`ConfigFileError` listing them all, each with the
  place it is at (``agents[0].tools``).
- An ``ask`` name must match a tool: :func:`check_asks` lists those that match none, once
  the tools are known (after the MCP servers listed theirs). An MCP server's ``ask`` takes
  the server's own tool names, with or without its prefix.
- What the command asks about by default (:data:`ASKED_BY_DEFAULT`, every MCP server's tools
  unless its table says ``ask``) is decided here and in :func:`~._options.open_cli_runtime`;
  a name in both ``[approval] ask`` and ``[approval] allow`` is a problem. With a sandbox
  (``sandbox``, or ``--sandbox``) other than ``danger-full-access``, ``bash`` and
  ``bash_kill`` are not asked about by default: their commands cannot leave it.
- A file nested too deeply for Python's parser (a ``RecursionError`` in ``tomllib`` or in
  structuring) is one problem, never a traceback.
- Numbers are checked by the classes' validators (``max_steps >= 1``, timeouts > 0); each
  refusal is a problem at its field (``agents[0].max_steps``), listed with the others.
- Values are not coerced: a number where a string belongs, or a string where a list belongs,
  is a problem, never ``"3"`` or ``["b", "a", "s", "h"]`` (the kernel's strict policy, the
  same that structures each plugin's ``config`` table).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final, final

import attrs

from .._base import StrictConverter, count_problems, list_problems
from ..agent import AgentDefinition, Budget, DeclaredAgent
from ..kernel import ConfigError, config_converter
from ..mcp import McpServer
from ..model import ModelSpecError, Price, model_from_spec
from ..session import InvalidSessionIdError, StoreSpecError, check_session_id, parse_store_spec
from ..shell import SANDBOX_POLICIES
from ..workspace import ToolFiles
from ._command_hooks import HookEntry, hook_problems


class ConfigFileError(ConfigError):
    """The ``--config`` file cannot be used; ``problems`` lists every reason, each with where."""


@attrs.frozen
class PluginEntry:
    """One ``[[plugins]]`` table."""

    module: str
    attr: str | None = None
    config: dict[str, Any] | None = None


#: The tools that change the world and that the command asks about unless ``[approval] allow``
#: names them (``bash_output``, ``read_file``, ``list_files``, ``glob``, ``grep`` and ``plan``
#: only read, and run unasked).
ASKED_BY_DEFAULT: Final = ("bash", "bash_kill", "write_file", "edit_file")


@attrs.frozen
class DefinitionTable:
    """One ``[[agent_definitions]]`` table (:class:`AgentDefinition`, a model by its spec)."""

    name: str
    description: str
    instructions: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    ask: list[str] | None = None
    max_steps: int = 50
    budget: dict[str, float] | None = None


@attrs.frozen
class Approval:
    """The ``[approval]`` table."""

    #: The tools whose calls need approval, in every agent.
    ask: list[str] = attrs.Factory(list)
    #: Of :data:`ASKED_BY_DEFAULT`, the tools that run unasked.
    allow: list[str] = attrs.Factory(list)
    #: Ignore the standing answers (``allow_always``) restored from a resumed session.
    forget_approvals: bool = False


@attrs.frozen
class Sandbox:
    """The ``sandbox`` key: a policy name, or a table (``--sandbox`` wins over its policy)."""

    #: ``read-only``, ``workspace-write`` or ``danger-full-access``.
    policy: str = "workspace-write"
    #: Directories writable besides the workspace (relative ones: to the file's directory).
    writable: list[str] = attrs.Factory(list)
    #: Whether commands may reach the network.
    network: bool = False


@attrs.frozen
class _File:
    """The whole file, as written."""

    model: str | None = None
    store: str | None = None
    models: list[str] = attrs.Factory(list)
    approval: Approval = attrs.Factory(Approval)
    # A policy name is made a table before structuring.
    sandbox: Sandbox | None = None
    files: ToolFiles.Config = attrs.Factory(ToolFiles.Config)
    plugins: list[PluginEntry] = attrs.Factory(list)
    mcp_servers: list[McpServer] = attrs.Factory(list)
    agents: list[DeclaredAgent] = attrs.Factory(list)
    agent_definitions: list[DefinitionTable] = attrs.Factory(list)
    prices: dict[str, Price] = attrs.Factory(dict)
    hooks: list[HookEntry] = attrs.Factory(list)


@final
@attrs.frozen
class LoadedPlugin:
    """A plugin entry resolved to its object, ready for ``ctx.plugin(plugin, config)``."""

    entry: PluginEntry
    plugin: object = attrs.field(eq=False)
    #: The source file of the plugin's module (what ``--watch`` watches), if it has one.
    file: str | None

    @property
    def config(self) -> dict[str, Any] | None:
        """The raw configuration table (the kernel structures it)."""
        return self.entry.config

    @property
    def label(self) -> str:
        """``module`` or ``module:attr``, for messages."""
        entry = self.entry
        return entry.module if entry.attr is None else f"{entry.module}:{entry.attr}"


@final
@attrs.frozen
class Config:
    """A validated configuration (empty when no ``--config`` is given)."""

    path: Path | None = None
    model: str | None = None
    plugins: tuple[LoadedPlugin, ...] = ()
    agents: tuple[DeclaredAgent, ...] = ()
    mcp_servers: tuple[McpServer, ...] = ()
    #: The ``[approval]`` table's ``ask``: tools asked about in every agent.
    ask: tuple[str, ...] = ()
    #: The store spec (``--store`` wins over it), or ``None``.
    store: str | None = None
    #: The ``[approval]`` table's ``allow``: of :data:`ASKED_BY_DEFAULT`, those run unasked.
    allow: tuple[str, ...] = ()
    #: The ``[approval]`` table's ``forget_approvals`` (``--forget-approvals``).
    forget_approvals: bool = False
    #: The ``sandbox`` key (writable paths made absolute), or ``None``.
    sandbox: Sandbox | None = None
    #: The ``[files]`` table (``add_dirs`` made absolute): where the file tools may reach.
    files: ToolFiles.Config = attrs.Factory(ToolFiles.Config)
    #: The ``models`` list: the specs a session may switch to (``/model``, ACP's option).
    models: tuple[str, ...] = ()
    #: The ``[[agent_definitions]]`` tables: children the ``task`` tool starts.
    definitions: tuple[AgentDefinition, ...] = ()
    #: The ``[prices]`` table: model prices added to (or replacing) the default table.
    prices: Mapping[str, Price] = attrs.Factory(dict)
    #: The ``[[hooks]]`` tables: command hooks (:mod:`._command_hooks`).
    hooks: tuple[HookEntry, ...] = ()


#: The converter of the config file: the kernel's strict policy, in its config wording.
_CONVERTER = StrictConverter()


def _problems(exc: Exception, path: str) -> list[str]:
    found = []
    for line in _CONVERTER.problems(exc, path=path):
        # "message @ $.agents[0].id" → "agents[0].id: message"
        message, _, where = line.rpartition(" @ ")
        where = where.removeprefix("$.").removeprefix("$")
        found.append(f"{where or 'top level'}: {message}" if message else line)
    return found


def load_config(path: str | Path) -> Config:
    """Read and validate the TOML file at ``path``.

    Plugin modules are imported with the file's directory first on ``sys.path``.

    Raises:
        ConfigFileError: the file is missing, not TOML, or has problems (all listed).
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"config file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(f"cannot read config file {str(path)!r}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigFileError(_too_deep(path)) from None
    directory = str(path.resolve().parent)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return parse(data, path=path)
    except RecursionError:
        raise ConfigFileError(_too_deep(path)) from None


def _too_deep(path: Path) -> str:
    return (
        f"config file {str(path)!r} nests arrays or tables too deeply to read; "
        f"a configuration needs a few levels"
    )


def parse(data: Mapping[str, Any], *, path: Path | None = None) -> Config:
    """Validate an already parsed configuration table (see the module docstring).

    Raises:
        ConfigFileError: listing every problem, each with where it is.
    """
    problems: list[str] = []
    raw: _File | None = None
    data = _chained(data)
    if isinstance(data.get("sandbox"), str):
        data["sandbox"] = {"policy": data["sandbox"]}
    elif not isinstance(data.get("sandbox"), Mapping | None):
        problems.append(
            f"sandbox: a policy name or a table; got {data.pop('sandbox')!r} "
            f'(e.g. sandbox = "workspace-write")'
        )
    try:
        raw = _CONVERTER.structure(data, _File)
    except Exception as exc:
        problems.extend(_problems(exc, "$"))
    # The checks beyond types read the well-typed parts of the raw tables, so a file with
    # type errors still gets them (every problem at once).
    problems.extend(_check_model("model", _text(data, "model")))
    problems.extend(_check_store("store", _text(data, "store")))
    models = data.get("models")
    for index, spec in enumerate(models if isinstance(models, list) else []):
        problems.extend(_check_model(f"models[{index}]", spec if isinstance(spec, str) else None))
    seen: dict[str, int] = {}
    for index, agent in enumerate(_tables(data, "agents")):
        problems.extend(_check_model(f"agents[{index}].model", _text(agent, "model")))
        agent_id = _text(agent, "id")
        if agent_id is not None:
            try:
                check_session_id(agent_id)
            except InvalidSessionIdError as exc:
                problems.append(f"agents[{index}].id: {exc}")
            if agent_id in seen:
                problems.append(
                    f"agents[{index}].id: {agent_id!r} is declared already "
                    f"(agents[{seen[agent_id]}]); ids are unique"
                )
            seen.setdefault(agent_id, index)
        policy = agent.get("sandbox")
        if isinstance(policy, str) and policy not in SANDBOX_POLICIES:
            problems.append(
                f"agents[{index}].sandbox: {policy!r} is not a policy; use one of "
                f"{', '.join(SANDBOX_POLICIES)}"
            )
    definitions = _definitions(raw, data, problems)
    names: dict[str, int] = {}
    for index, server in enumerate(_tables(data, "mcp_servers")):
        name = _text(server, "name")
        if name is not None:
            if name in names:
                problems.append(
                    f"mcp_servers[{index}].name: {name!r} is declared already "
                    f"(mcp_servers[{names[name]}]); names are unique"
                )
            names.setdefault(name, index)
    problems.extend(_check_allow(data))
    problems.extend(_check_sandbox(data))
    problems.extend(hook_problems(_tables(data, "hooks")))
    plugins = []
    for index, table in enumerate(_tables(data, "plugins")):
        entry = _entry(table)
        loaded = _load_plugin(f"plugins[{index}]", entry, problems) if entry else None
        if loaded is not None:
            plugins.append(loaded)
    if problems or raw is None:
        where = f"config file {str(path)!r}" if path is not None else "the configuration"
        raise ConfigFileError(
            f"{where} has {count_problems(problems)}:{list_problems(problems)}", tuple(problems)
        )
    servers = tuple(
        # Every MCP tool changes the world as far as the command knows: asked unless the
        # server's table says which (``ask = []`` for none). A name given with the server's
        # prefix (the name agents see) means the server's own name.
        attrs.evolve(server, ask=tuple(_unprefixed(server, n) for n in server.ask))
        if "ask" in table
        else attrs.evolve(server, ask=("*",))
        for server, table in zip(raw.mcp_servers, _tables(data, "mcp_servers"), strict=True)
    )
    return Config(
        path,
        raw.model,
        tuple(plugins),
        tuple(raw.agents),
        servers,
        tuple(raw.approval.ask),
        store=raw.store,
        allow=tuple(raw.approval.allow),
        forget_approvals=raw.approval.forget_approvals,
        sandbox=_sandbox(raw.sandbox, path),
        files=_files(raw.files, path),
        models=tuple(raw.models),
        definitions=definitions,
        prices=raw.prices,
        hooks=tuple(raw.hooks),
    )


def _definitions(
    raw: _File | None, data: Mapping[str, Any], problems: list[str]
) -> tuple[AgentDefinition, ...]:
    """The ``[[agent_definitions]]`` as definitions; their problems added to ``problems``."""
    for index, raw_table in enumerate(_tables(data, "agent_definitions")):
        where = f"agent_definitions[{index}].model"
        problems.extend(_check_model(where, _text(raw_table, "model")))
    if raw is None:
        return ()
    made: list[AgentDefinition] = []
    seen: dict[str, int] = {}
    for index, table in enumerate(raw.agent_definitions):
        where = f"agent_definitions[{index}]"
        if table.name in seen:
            problems.append(
                f"{where}.name: {table.name!r} is defined already "
                f"(agent_definitions[{seen[table.name]}]); names are unique"
            )
            continue
        seen[table.name] = index
        try:
            budget = Budget.of(table.budget) if table.budget is not None else None
            made.append(AgentDefinition(**{**attrs.asdict(table), "budget": budget}))
        except (TypeError, ValueError) as exc:
            problems.append(f"{where}: {exc}")
    return tuple(made)


def _files(files: ToolFiles.Config, path: Path | None) -> ToolFiles.Config:
    base = path.resolve().parent if path is not None else Path.cwd()
    return attrs.evolve(files, add_dirs=[str(base / d) for d in files.add_dirs])


def _sandbox(sandbox: Sandbox | None, path: Path | None) -> Sandbox | None:
    if sandbox is None:
        return None
    base = path.resolve().parent if path is not None else Path.cwd()
    return attrs.evolve(sandbox, writable=[str(base / p) for p in sandbox.writable])


def _check_sandbox(data: Mapping[str, Any]) -> list[str]:
    table = data.get("sandbox")
    policy = table.get("policy") if isinstance(table, Mapping) else None
    if isinstance(policy, str) and policy not in SANDBOX_POLICIES:
        return [
            f"sandbox.policy: {policy!r} is not a policy; use one of {', '.join(SANDBOX_POLICIES)}"
        ]
    return []


def _unprefixed(server: McpServer, name: str) -> str:
    prefix = server.tool_prefix
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def check_asks(config: Config, names: Collection[str]) -> None:
    """Check, once the tools are known (``names``: every registered tool, the MCP servers'
    included), that each ``ask`` of ``config`` names one.

    Raises:
        ConfigFileError: listing every ``ask`` name that matches no tool.
    """
    known = ", ".join(sorted(names)) or "none"
    problems = [
        f"approval.ask: {name!r} matches no tool (the tools: {known})"
        for name in config.ask
        if name not in names
    ]
    for index, agent in enumerate(config.agents):
        problems += [
            f"agents[{index}].ask: {name!r} matches no tool (the tools: {known})"
            for name in agent.ask or ()
            if name not in names
        ]
    for index, server in enumerate(config.mcp_servers):
        prefix = server.tool_prefix
        offered = sorted(n[len(prefix) :] for n in names if n.startswith(prefix))
        problems += [
            f"mcp_servers[{index}].ask: {name!r} matches no tool of server {server.name!r} "
            f"(its tools: {', '.join(offered) or 'none'})"
            for name in server.ask
            if name != "*" and f"{prefix}{name}" not in names
        ]
    if problems:
        where = (
            f"config file {str(config.path)!r}" if config.path is not None else "the configuration"
        )
        raise ConfigFileError(
            f"{where} has {count_problems(problems)}:{list_problems(problems)}", tuple(problems)
        )


def _check_allow(data: Mapping[str, Any]) -> list[str]:
    table = data.get("approval")
    if not isinstance(table, Mapping):
        return []
    allow, ask = table.get("allow"), table.get("ask")
    if not isinstance(allow, list):
        return []
    problems = []
    for name in allow:
        if isinstance(name, str) and name not in ASKED_BY_DEFAULT:
            problems.append(
                f"approval.allow: {name!r} is not asked about by default; allow names "
                f"{' or '.join(repr(n) for n in ASKED_BY_DEFAULT)} (an MCP server's tools: "
                f"its 'ask')"
            )
        elif isinstance(ask, list) and name in ask:
            problems.append(f"approval.allow: {name!r} is in approval.ask too; keep one")
    return problems


def _chained(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data``, with a ``model`` given as a list of specs (here and in each agent's table)
    written as the fallback chain ``SPEC | SPEC``, the one form the rest reads."""

    def chain(table: Mapping[str, Any]) -> dict[str, Any]:
        table = dict(table)
        specs = table.get("model")
        if isinstance(specs, list) and specs and all(isinstance(s, str) for s in specs):
            table["model"] = " | ".join(specs)
        return table

    data = chain(data)
    if isinstance(data.get("agents"), list):
        data["agents"] = [chain(a) if isinstance(a, Mapping) else a for a in data["agents"]]
    return data


def _text(table: Mapping[str, Any], key: str) -> str | None:
    value = table.get(key)
    return value if isinstance(value, str) else None


def _tables(data: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    items = data.get(key)
    if not isinstance(items, list):
        return []
    return [item if isinstance(item, Mapping) else {} for item in items]


def _entry(table: Mapping[str, Any]) -> PluginEntry | None:
    """The entry, if its keys have the right types (else structuring reported it)."""
    try:
        entry: PluginEntry = _CONVERTER.structure(dict(table), PluginEntry)
    except Exception:
        return None
    return entry


def _check_model(where: str, spec: str | None) -> list[str]:
    if spec is None:
        return []
    try:
        model_from_spec(spec)
    except ModelSpecError as exc:
        return [f"{where}: {exc}"]
    return []


def _check_store(where: str, spec: str | None) -> list[str]:
    if spec is None:
        return []
    try:
        parse_store_spec(spec)
    except StoreSpecError as exc:
        return [f"{where}: {exc}"]
    return []


def _load_plugin(where: str, entry: PluginEntry, problems: list[str]) -> LoadedPlugin | None:
    try:
        module = importlib.import_module(entry.module)
    except SystemExit as exc:
        # A module that ends the process at import would end the command silently.
        problems.append(
            f"{where}.module: importing {entry.module!r} called sys.exit({exc.code!r}); "
            f"a plugin module must not exit when it is imported"
        )
        return None
    except Exception as exc:
        problems.append(
            f"{where}.module: cannot import {entry.module!r}: {type(exc).__name__}: {exc}"
        )
        return None
    plugin: object = module
    if entry.attr is not None:
        if not hasattr(module, entry.attr):
            problems.append(f"{where}.attr: module {entry.module!r} has no {entry.attr!r}")
            return None
        plugin = getattr(module, entry.attr)
    name, apply = getattr(plugin, "name", None), getattr(plugin, "apply", None)
    if not isinstance(name, str) or not name or not inspect.iscoroutinefunction(apply):
        what = entry.module if entry.attr is None else f"{entry.module}:{entry.attr}"
        hint = "" if entry.attr is not None else " (or name the plugin object with 'attr')"
        problems.append(
            f"{where}: {what} is not a plugin: it needs 'name: str' and "
            f"'async def apply(ctx, config)'{hint}"
        )
        return None
    problems.extend(_check_plugin_config(where, name, plugin, entry.config))
    return LoadedPlugin(entry, plugin, getattr(module, "__file__", None))


def _check_plugin_config(
    where: str, name: str, plugin: object, config: dict[str, Any] | None
) -> list[str]:
    config_type = getattr(plugin, "Config", None)
    if not (isinstance(config_type, type) and attrs.has(config_type)):
        if config is not None:
            return [f"{where}.config: plugin {name!r} takes no configuration"]
        return []
    try:
        # The kernel's converter: exactly what ctx.plugin() will do with this table.
        config_converter.structure(dict(config or {}), config_type)
    except Exception as exc:
        return _problems(exc, f"{where}.config")
    return []
