"""Public packages export each name once, sorted, and every exported name resolves."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import trio_agents


def _public_packages() -> list[str]:
    names = ["trio_agents"]
    for info in pkgutil.walk_packages(trio_agents.__path__, "trio_agents."):
        last = info.name.rsplit(".", 1)[-1]
        if info.ispkg and not last.startswith("_"):
            names.append(info.name)
    return sorted(names)


def test_kernel_and_cancel_are_public_packages() -> None:
    """The walk finds the layer-0 packages (the checks below are not vacuous)."""
    assert {"trio_agents", "trio_agents.kernel", "trio_agents.cancel"} <= set(_public_packages())


def _isort_style(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS (``AGENTS``), then Classes, then functions."""
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


@pytest.mark.parametrize("name", _public_packages())
def test_all_is_sorted_unique_and_resolves(name: str) -> None:
    """__all__ exists, is sorted and duplicate-free, and each name is an attribute."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported, key=_isort_style), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{name}.__all__ lists a name twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"


# -- private modules -------------------------------------------------------------------------------

PACKAGE = Path(trio_agents.__file__).parent

#: Run as a script by the shell (standard library only); it has no importable API.
SCRIPTS = {"trio_agents.shell._supervisor"}

#: The names private modules list in ``__all__`` for their own package and the layers above,
#: without the package exporting them: the internal surface, written down. A new name in a
#: private module's ``__all__`` is either exported by its package or added here on purpose;
#: each entry shrinking is the public API growing or an internal helper going away.
INTERNAL: dict[str, frozenset[str]] = {
    "trio_agents.acp._framing": frozenset(
        {
            "LineFramer",
            "MAX_DEPTH",
            "MAX_FRAME",
            "Oversized",
            "decode_frame",
            "encode_frame",
            "find_problem",
        }
    ),
    "trio_agents.acp._client_calls": frozenset({"ClientCalls"}),
    "trio_agents.acp._client_fs": frozenset({"ClientFileSystem", "offers_fs"}),
    "trio_agents.acp._jsonrpc": frozenset(
        {
            "Connection",
            "ConnectionStatistics",
            "ErrorCode",
            "Event",
            "Invalid",
            "Notification",
            "ProtocolStateError",
            "Request",
            "RequestId",
            "Response",
            "RpcError",
        }
    ),
    "trio_agents.acp._mcp": frozenset({"parse_mcp_servers", "start_mcp_servers"}),
    "trio_agents.acp._modes": frozenset(
        {
            "SessionSettings",
            "config_option_update",
            "config_options",
            "current_mode_update",
            "mode_state",
        }
    ),
    "trio_agents.acp._permission": frozenset({"Permissions", "restored_notice"}),
    "trio_agents.acp._prompts": frozenset({"AcpSession", "Prompt", "Sessions"}),
    "trio_agents.acp._terminal": frozenset(
        {"ClientTerminal", "offers_terminal", "terminal_content"}
    ),
    "trio_agents.acp._protocol": frozenset(
        {
            "PERMISSION_OPTIONS",
            "PROTOCOL_VERSION",
            "UpdateMapper",
            "absolute_cwd",
            "agent_capabilities",
            "available_commands_update",
            "diff_content",
            "in_progress",
            "optional_str",
            "params_object",
            "plan_update",
            "prompt_images",
            "prompt_text",
            "replay",
            "required_str",
            "session_info",
            "session_info_update",
            "session_title",
            "stop_reason",
            "text_chunk",
            "tool_call",
            "tool_call_start",
            "tool_call_update",
            "tool_kind",
            "update_of",
            "usage_update",
        }
    ),
    "trio_agents.acp._serving": frozenset({"LATER", "Serving"}),
    "trio_agents.agent._approval": frozenset({"Approvals", "standing_answers"}),
    "trio_agents.agent._agent": frozenset({"new_agent"}),
    "trio_agents.agent._ask": frozenset({"AnswerFold"}),
    "trio_agents.agent._budget": frozenset({"LIMITS", "Ledger", "tool_refusal", "within_budget"}),
    "trio_agents.agent._caller": frozenset({"ChildAgents", "HasCaller", "HasUsage", "ToolCalls"}),
    "trio_agents.agent._children": frozenset(
        {
            "ChildOutcome",
            "child_ended",
            "child_outcome",
            "close_open_children",
            "open_children",
            "parent_of",
        }
    ),
    "trio_agents.agent._compact_job": frozenset({"CompactJob"}),
    "trio_agents.agent._collector": frozenset({"check_gc_threshold", "collector_threshold"}),
    "trio_agents.agent._definitions": frozenset({"Definitions", "TASK_TOOLS"}),
    "trio_agents.agent._task": frozenset({"TaskArgs", "TaskIdArgs", "TaskTools"}),
    "trio_agents.agent._config": frozenset({"ALL_TOOLS", "UNSET", "Unset", "latest_config"}),
    "trio_agents.agent._factory": frozenset({"AGENT_FACTORY", "FactoryPlugin"}),
    "trio_agents.agent._compaction": frozenset(
        {"CompactionParts", "CompactionPlugin", "compact_after", "compact_history", "fit_window"}
    ),
    "trio_agents.agent._usage": frozenset({"usage_record"}),
    "trio_agents.agent._history": frozenset(
        {"History", "Messages", "SUMMARY_HEADING", "TurnMark", "message_chars"}
    ),
    "trio_agents.agent._meter": frozenset(
        {"CHARS_PER_TOKEN", "TOKENS_PER_MESSAGE", "ContextMeter", "estimate"}
    ),
    "trio_agents.agent._inbox": frozenset({"Inbox", "Lane"}),
    "trio_agents.agent._guardrails": frozenset(
        {"GuardrailCheck", "InputGuardrail", "OutputGuardrail"}
    ),
    "trio_agents.agent._hook_calls": frozenset(
        {
            "after_compact",
            "after_model",
            "after_tool",
            "agent_gone",
            "before_compact",
            "before_model",
            "before_tool",
            "child_starting",
            "message_accepted",
            "turn_ending",
            "turn_started",
            "vetoed_by",
        }
    ),
    "trio_agents.agent._parts": frozenset({"AgentParts"}),
    "trio_agents.agent._restore": frozenset({"restore"}),
    "trio_agents.agent._status": frozenset({"check_status"}),
    "trio_agents.session._spec": frozenset({"StoreSpec", "parse_store_spec"}),
    "trio_agents.session._state": frozenset({"check_session_state"}),
    "trio_agents.session._tree": frozenset({"subtree"}),
    "trio_agents.session._backend": frozenset({"StoreBackend", "Stored"}),
    "trio_agents.session._postgres": frozenset({"Ride"}),
    "trio_agents.session._entry": frozenset({"Entry"}),
    "trio_agents.session._batches": frozenset(
        {
            "Batch",
            "BatchWriter",
            "WriteState",
            "read_only_refusal",
            "write_failure",
        }
    ),
    "trio_agents.agent._tool_schema": frozenset(
        {
            "ArgumentsError",
            "describe_params",
            "params_schema",
            "structure_arguments",
            "tools_converter",
        }
    ),
    "trio_agents.agent._results": frozenset({"RESULT_CAP", "cap_result"}),
    "trio_agents.agent._tools": frozenset(
        {"ToolFn", "ToolGuard", "ToolsPlugin", "tools_converter", "tools_plugin"}
    ),
    "trio_agents.agent._snapshot": frozenset(
        {"ToolCallSnapshot", "TurnSnapshot", "agent_snapshot", "describe_agent", "turn_snapshot"}
    ),
    "trio_agents.agent._turn": frozenset({"Turn"}),
    "trio_agents.agent._output": frozenset(
        {
            "DEFAULT_RETRIES",
            "FINAL_ANSWER",
            "OutputFailed",
            "OutputType",
            "Outputs",
            "TurnOutput",
            "check_retries",
            "latest_output",
            "output_of",
            "text_feedback",
            "turn_output",
        }
    ),
    "trio_agents.agent._hook_points": frozenset({"HOOK_POINTS"}),
    "trio_agents.agent._hooks": frozenset({"HookFn", "HookPolicy", "HooksPlugin", "hooks_plugin"}),
    "trio_agents.agent._loop": frozenset({"AgentLoop"}),
    "trio_agents.agent._modes": frozenset(
        {"EDIT_TOOLS", "READ_TOOLS", "ToolKind", "mode_named", "tool_kind"}
    ),
    "trio_agents.cli._acp": frozenset({"acp"}),
    "trio_agents.cli._ask": frozenset({"RunApprover", "TerminalAsker", "restored_note"}),
    "trio_agents.cli._budget": frozenset({"add_budget_options", "budget_from", "stopped_line"}),
    "trio_agents.cli._chat": frozenset({"chat"}),
    "trio_agents.cli._chat_modes": frozenset(
        {
            "HELP",
            "MENTION_LIMIT",
            "NEW",
            "ChatCommands",
            "Handled",
            "expand_mentions",
            "latest_here",
        }
    ),
    "trio_agents.cli._chat_view": frozenset({"ChatView", "split_blocks"}),
    "trio_agents.cli._command_hooks": frozenset(
        {"DEFAULT_COMMAND_TIMEOUT", "CommandHook", "CommandHooks", "HookEntry", "hook_problems"}
    ),
    "trio_agents.cli._images": frozenset({"attached_images", "read_attached_images"}),
    "trio_agents.cli._edits": frozenset({"DIFF_LINES", "diff_lines", "undo_last"}),
    "trio_agents.cli._config": frozenset(
        {
            "ASKED_BY_DEFAULT",
            "Approval",
            "Config",
            "DefinitionTable",
            "ConfigFileError",
            "LoadedPlugin",
            "PluginEntry",
            "Sandbox",
            "check_asks",
            "load_config",
            "parse",
        }
    ),
    "trio_agents.cli._controls": frozenset({"visible_controls"}),
    "trio_agents.cli._demo": frozenset({"demo"}),
    "trio_agents.cli._input": frozenset({"Key", "LineEditor", "history_file"}),
    "trio_agents.cli._keys": frozenset({"Key"}),
    "trio_agents.cli._logs": frozenset({"CliLog"}),
    "trio_agents.cli._options": frozenset(
        {
            "CliError",
            "Settings",
            "announce_store",
            "attach",
            "common_parents",
            "make_store",
            "open_cli_runtime",
            "resolve_model",
            "session_path",
            "session_place",
            "settings_from",
            "store_place",
            "store_root",
        }
    ),
    "trio_agents.cli._remote": frozenset({"run_remote"}),
    "trio_agents.cli._run": frozenset({"run"}),
    "trio_agents.cli._output_schema": frozenset({"accepted_json", "load_output_schema"}),
    "trio_agents.cli._stdout": frozenset({"PipedStdout"}),
    "trio_agents.cli._usage": frozenset({"Parser", "UsageExit", "suggestion", "version"}),
    "trio_agents.cli._worker": frozenset({"add_worker_parser", "dsn_of", "worker"}),
    "trio_agents.cli._sessions": frozenset({"SHOWN", "sessions"}),
    "trio_agents.cli._tree_view": frozenset({"HEADING", "age", "render_tree", "tree_of"}),
    "trio_agents.cli._signals": frozenset(
        {
            "FORCE_GRACE",
            "Terminated",
            "Termination",
            "ended_by",
            "guarded",
            "stoppable",
            "terminable",
        }
    ),
    "trio_agents.kernel._bus": frozenset({"EventBus", "Listener"}),
    "trio_agents.kernel._origin": frozenset({"PluginOrigin", "origin_of"}),
    "trio_agents.kernel._plugin": frozenset(
        {"Plugin", "PluginSpec", "config_converter", "describe_plugin"}
    ),
    "trio_agents.kernel._reload": frozenset({"reload"}),
    "trio_agents.kernel._service_key": frozenset({"service_name"}),
    "trio_agents.kernel._snapshot": frozenset({"snapshot_of"}),
    "trio_agents.kernel._stack": frozenset({"OwnedStack"}),
    "trio_agents.kernel._states": frozenset({"Halt", "check_transition", "end_state", "halt_with"}),
    "trio_agents.kernel._context": frozenset({"current_context"}),
    "trio_agents.kernel._errors": frozenset(
        {"InvalidTransitionError", "PluginError", "ServiceAccessError", "ServiceConflictError"}
    ),
    "trio_agents.kernel._runtime": frozenset({"Runtime"}),
    "trio_agents.mcp._connection": frozenset({"Connection"}),
    "trio_agents.mcp._restart": frozenset({"Backoff"}),
    "trio_agents.mcp._process": frozenset({"GRACE", "supervised_stdio"}),
    "trio_agents.mcp._results": frozenset({"describe", "to_result", "tool_name"}),
    "trio_agents.mcp._stdio": frozenset({"LineFramer", "parse_message", "stdio_client"}),
    "trio_agents.mcp._watched": frozenset({"Watched"}),
    "trio_agents.mcp._errors": frozenset({"McpError"}),
    "trio_agents.model._anthropic": frozenset(
        {
            "API_VERSION",
            "DEFAULT_BASE_URL",
            "anthropic_from_spec",
        }
    ),
    "trio_agents.model._anthropic_wire": frozenset(
        {
            "EventAssembler",
            "StreamFailure",
            "conversation",
            "describe_failure",
            "request_body",
        }
    ),
    "trio_agents.model._http_failures": frozenset({"FailureWords", "Meaning", "error_body"}),
    "trio_agents.model._http": frozenset(
        {
            "ClientSource",
            "ERROR_BODY_LIMIT",
            "finish_body",
            "read_limited",
        }
    ),
    "trio_agents.model._openai": frozenset({"DEFAULT_BASE_URL", "openai_from_spec"}),
    "trio_agents.model._openai_wire": frozenset(
        {
            "ChunkAssembler",
            "Failure",
            "describe_failure",
            "message_json",
            "request_body",
            "retry_after",
        }
    ),
    "trio_agents.model._protocol": frozenset({"check_context_window"}),
    "trio_agents.model._endpoint": frozenset({"Endpoint", "EndpointModel", "USER_AGENT"}),
    "trio_agents.model._retry": frozenset(
        {
            "Assembler",
            "Attempts",
            "DEFAULT_DEADLINE",
            "Describe",
            "Failure",
            "StreamFailure",
            "StreamSettings",
            "backoff",
            "gave_up",
            "reported_limit",
            "retry_after",
            "retryable_transport",
            "transport_message",
        }
    ),
    "trio_agents.model._spec_query": frozenset(
        {
            "HTTP_SPEC_KEYS",
            "http_spec_kwargs",
            "spec_number",
            "spec_params",
            "spec_url",
        }
    ),
    "trio_agents.model._sse": frozenset(
        {
            "DEFAULT_MAX_LINE",
            "SSEDecoder",
            "SSEEvent",
            "SSELimitError",
        }
    ),
    "trio_agents.model._wire": frozenset(
        {
            "AnswerBudget",
            "DEFAULT_MAX_ANSWER",
            "PartialCall",
            "StreamAssembler",
            "checked",
            "clip",
            "event_object",
            "field",
            "finished",
            "loads",
            "lost_mid_stream",
        }
    ),
    "trio_agents.model._catalog": frozenset({"ModelsPlugin"}),
    "trio_agents.model._messages": frozenset(
        {
            "ChatMessage",
            "IMAGE_TYPES",
            "OutputSpec",
            "ToolCallPart",
            "image_placeholder",
            "text_with_images",
        }
    ),
    "trio_agents.model._scripted": frozenset({"Reply", "Step", "split_words"}),
    "trio_agents.model._spec": frozenset({"ModelFactory"}),
    "trio_agents.session._convert": frozenset(
        {
            "check_record",
            "check_recordable_cause",
            "converter",
            "parse_line",
            "structure_record",
            "unstructure_record",
        }
    ),
    "trio_agents.session._ids": frozenset({"check_session_id", "new_session_id"}),
    "trio_agents.session._jsonl_io": frozenset(
        {
            "FORMAT",
            "SUFFIX",
            "VERSION",
            "LockHeld",
            "Loaded",
            "Repaired",
            "RewindError",
            "Tail",
            "WriteJob",
            "check_root",
            "header_line",
            "lock_path",
            "prepare_root",
            "read_session",
            "release_lock",
            "remove_sessions",
            "repair_session",
            "repair_tail",
            "scan_parents",
            "scan_root",
            "take_lock",
            "write_batch",
        }
    ),
    "trio_agents.session._postgres_sql": frozenset(
        {
            "FORMAT_VERSION",
            "Conn",
            "Fence",
            "Listed",
            "OperationalError",
            "Outcome",
            "Rider",
            "Riding",
            "WriteJob",
            "close_quietly",
            "connect",
            "delete_tree",
            "discard_session",
            "is_stored",
            "list_sessions",
            "parents",
            "prepare_schema",
            "read_session",
            "release_lease",
            "renew_leases",
            "take_lease",
            "write_batch",
        }
    ),
    "trio_agents.session._records": frozenset({"open_turns", "record_class", "record_tag"}),
    "trio_agents.session._sqlite_io": frozenset(
        {
            "APPLICATION_ID",
            "VERSION",
            "Database",
            "WriteJob",
            "lock_path",
            "open_database",
            "open_reader",
        }
    ),
    "trio_agents.session._summary": frozenset({"Summary", "stored_info", "title_of"}),
    "trio_agents.session._writelog": frozenset({"WriteLog"}),
    "trio_agents.session._errors": frozenset({"SessionStoreClosedError", "UnstorableRecordError"}),
    "trio_agents.shell._child": frozenset(
        {"Child", "GroupChild", "SupervisedChild", "session_members", "supervisor_available"}
    ),
    "trio_agents.shell._snapshot": frozenset({"JobSnapshot", "describe_shell"}),
    "trio_agents.shell._executor": frozenset({"JobListener"}),
    "trio_agents.shell._local": frozenset({"LocalShellExecutor"}),
    "trio_agents.shell._output": frozenset({"OutputBuffer"}),
    "trio_agents.shell._routes": frozenset(
        {"SHELL_ROUTES", "ShellRoutes", "Terminal", "TerminalChooser"}
    ),
    "trio_agents.shell._sandbox": frozenset({"SANDBOX_POLICIES", "bwrap_argv", "stricter"}),
    "trio_agents.shell._tool_bash": frozenset({"BashArgs", "JobArgs", "ToolBash"}),
    "trio_agents.shell._types": frozenset({"SANDBOX_POLICIES", "job_state"}),
    "trio_agents.shell._errors": frozenset({"ShellError"}),
    "trio_agents.tracing._metrics": frozenset({"Metrics"}),
    "trio_agents.tracing._otel": frozenset({"Tracer", "cause_attributes"}),
    "trio_agents.tracing._protocols": frozenset(
        {"EventT", "RequestT", "ShellJob", "StreamingModel", "ToolAnswer"}
    ),
    "trio_agents.tracing._environ": frozenset({"open_environ_tracing"}),
    "trio_agents.tracing._points": frozenset(
        {
            "approved",
            "chat",
            "compaction",
            "environment",
            "execute_tool",
            "headers",
            "invoke_agent",
            "remote_parent",
            "shell_job",
        }
    ),
    "trio_agents.tracing._runtime": frozenset({"CAPTURE_CONTENT_ENV"}),
    "trio_agents.workspace._instructions": frozenset(
        {"INSTRUCTION_FILES", "MAX_BYTES", "instruction_files"}
    ),
    "trio_agents.workspace._text": frozenset(
        {"count_occurrences", "glob_regex", "replace_once", "select_lines"}
    ),
    "trio_agents.workspace._access": frozenset({"Chooser", "LocalFileSystem"}),
    "trio_agents.workspace._commands": frozenset(
        {"ARGUMENTS", "COMMANDS_DIR", "CommandCall", "parse_command", "prompt_commands"}
    ),
    "trio_agents.workspace._paths": frozenset({"resolve_path"}),
    "trio_agents.workspace._plan": frozenset(
        {"PlanArgs", "ToolPlan", "format_plan", "plan_entries", "plan_summary"}
    ),
    "trio_agents.workspace._tool_files": frozenset(
        {
            "EditArgs",
            "GlobArgs",
            "GrepArgs",
            "ListArgs",
            "MAX_ENTRIES",
            "MAX_MATCHES",
            "ReadArgs",
            "SKIPPED",
            "WriteArgs",
        }
    ),
    # The work queue's internals: its SQL, its database access and its decisions.
    "trio_agents.workers._lazy": frozenset({"queue_modules"}),
    "trio_agents.workers._ledger": frozenset({"Attempt", "Decision", "Ledger", "decide"}),
    "trio_agents.workers._pg": frozenset({"Listener", "pool", "where"}),
    "trio_agents.workers._sql": frozenset(
        {
            "Claimed",
            "Conn",
            "FORMAT_VERSION",
            "PROMPTS_CHANNEL",
            "PromptRow",
            "QUEUE_CHANNEL",
            "RECORDS_CHANNEL",
            "SETTLED",
            "Settle",
            "SettleRider",
            "claim",
            "close_quietly",
            "connect",
            "hand_back",
            "heartbeat",
            "prepare_queue",
            "read_prompt",
            "register_worker",
            "release_routes",
            "request_cancel",
            "settle",
            "submit",
            "unregister_worker",
            "worker_channel",
        }
    ),
    "trio_agents.workers._records": frozenset({"Policy"}),
    "trio_agents.cancel._causes": frozenset({"check_cause"}),
    "trio_agents.cancel._scope": frozenset({"forget_inherited_scopes"}),
}


def _names(path: Path) -> list[str] | None:
    """The literal ``__all__`` of the module at ``path``, or ``None`` if it has none."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            assert isinstance(node.value, ast.List | ast.Tuple), f"{path}: __all__ is not literal"
            return [ast.literal_eval(e) for e in node.value.elts]
    return None


def _private_modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("_*.py")):
        if path.name in {"__init__.py", "__main__.py"} or "__pycache__" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found.append((".".join(parts), path))
    return found


def test_private_modules_are_found() -> None:
    """The walk sees the kernel's private modules (the check below is not vacuous)."""
    assert "trio_agents.kernel._fiber" in dict(_private_modules())


@pytest.mark.parametrize(("module", "path"), _private_modules(), ids=lambda v: str(v))
def test_every_name_of_a_private_module_is_exported_or_marked_internal(
    module: str, path: Path
) -> None:
    """What a private module's __all__ lists is its package's export, or listed in INTERNAL."""
    names = _names(path)
    if module in SCRIPTS:
        assert names is None
        return
    assert names is not None, f"{module} has no __all__"
    package = importlib.import_module(module.rsplit(".", 1)[0])
    exported = set(package.__all__)
    internal = INTERNAL.get(module, frozenset())
    neither = sorted(n for n in names if n not in exported and n not in internal)
    assert not neither, (
        f"{module}.__all__ lists {neither}, which {package.__name__} does not export; "
        f"export them, or add them to INTERNAL in tests/project/test_exports.py"
    )
    stale = sorted(n for n in internal if n not in names or n in exported)
    assert not stale, f"INTERNAL[{module!r}] lists {stale}: not in its __all__, or exported"


def test_internal_names_only_modules_that_exist() -> None:
    """INTERNAL has no entry for a module that moved or went away."""
    assert set(INTERNAL) <= set(dict(_private_modules()))


# -- what a package offers the layers above it, outside __all__ ----------------------------------

#: The names a public package re-exports outside its ``__all__``: what the layers above it import
#: from it (a package may not import another's private module, ``tests/project/test_layers.py``) and
#: users do not call. Each is named in its package's docstring. A name here that no other
#: package imports any more goes back to its private module.
OFFERED: dict[str, frozenset[str]] = {
    "trio_agents.agent": frozenset(
        {"HOOK_POINTS", "HookPolicy", "TurnSnapshot", "mode_named", "standing_answers"}
    ),
    "trio_agents.cancel": frozenset({"check_cause", "forget_inherited_scopes"}),
    "trio_agents.kernel": frozenset({"config_converter", "current_context"}),
    "trio_agents.mcp": frozenset({"McpError"}),
    "trio_agents.model": frozenset({"ChatMessage", "ModelsPlugin", "OutputSpec", "ToolCallPart"}),
    "trio_agents.session": frozenset(
        {"Ride", "Stored", "check_recordable_cause", "check_session_id", "parse_store_spec"}
    ),
    "trio_agents.shell": frozenset(
        {
            "SANDBOX_POLICIES",
            "SHELL_ROUTES",
            "SupervisedChild",
            "Terminal",
            "job_state",
            "supervisor_available",
        }
    ),
    "trio_agents.tracing": frozenset(
        {
            "approved",
            "chat",
            "compaction",
            "environment",
            "execute_tool",
            "headers",
            "invoke_agent",
            "open_environ_tracing",
            "remote_parent",
            "shell_job",
        }
    ),
    "trio_agents.workspace": frozenset(
        {"ARGUMENTS", "format_plan", "parse_command", "plan_entries", "prompt_commands"}
    ),
}

#: Offered for session backends written outside the package (``docs/sessions.rst``, "Writing a
#: backend"): no other package here imports them.
FOR_BACKENDS = {"trio_agents.session": frozenset({"Stored"})}


def _reexported(package: str) -> set[str]:
    """The names the ``__init__.py`` of ``package`` re-exports (``from ._x import n as n``)."""
    path = PACKAGE.parent.joinpath(*package.split("."), "__init__.py")
    return {
        alias.name
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
        if alias.asname == alias.name
    }


@pytest.mark.parametrize("package", _public_packages())
def test_a_package_reexports_outside_all_only_what_it_offers(package: str) -> None:
    """Every re-export of a public package is in its ``__all__`` or written down in OFFERED."""
    exported = set(importlib.import_module(package).__all__)
    hidden = _reexported(package) - exported
    assert hidden == set(OFFERED.get(package, frozenset())), (
        f"{package} re-exports {sorted(hidden)} outside __all__; OFFERED lists "
        f"{sorted(OFFERED.get(package, frozenset()))}"
    )


@pytest.mark.parametrize("package", sorted(OFFERED))
def test_offered_names_are_importable_named_in_the_docstring_and_not_exported(
    package: str,
) -> None:
    """What a package offers the layers above resolves, stays out of __all__, and its
    docstring names it."""
    module = importlib.import_module(package)
    for name in OFFERED[package]:
        assert hasattr(module, name), f"{package} offers {name}, which it does not define"
        assert name not in module.__all__, f"{package} exports {name}: remove it from OFFERED"
        assert f"``{name}``" in (module.__doc__ or ""), f"{package}'s docstring omits {name}"


def _imported_from_packages() -> set[tuple[str, str]]:
    """Every (package, name) that a module of another package of trio_agents imports from a
    public package: ``from ..pkg import name`` or ``pkg.name`` after ``from .. import pkg``."""
    found: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        own, base = ".".join(parts[:2]), parts[:-1]
        aliases: dict[str, str] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                prefix = base[: len(base) - node.level + 1] if node.level else ()
                module = ".".join((*prefix, node.module) if node.module else prefix)
                for alias in node.names:
                    if module == "trio_agents":
                        aliases[alias.asname or alias.name] = f"trio_agents.{alias.name}"
                    elif module != own:
                        found.add((module, alias.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                package = aliases.get(node.value.id)
                if package is not None and package != own:
                    found.add((package, node.attr))
    return found


def test_every_offered_name_is_used_by_another_package() -> None:
    """An offered name that no other package imports any more goes back to its private module."""
    used = _imported_from_packages()
    unused = sorted(
        f"{package}.{name}"
        for package, names in OFFERED.items()
        for name in names - FOR_BACKENDS.get(package, frozenset())
        if (package, name) not in used
    )
    assert not unused, f"no other package imports {unused}: drop their re-exports"


# -- the size of the public surface ----------------------------------------------------------------

#: The most distinct public names per 1,000 lines of the package (trio has about 5.9).
MAX_NAMES_PER_KLOC = 7.0


def public_names() -> set[str]:
    """The distinct names in the ``__all__`` of the public packages (``trio_agents`` and every
    subpackage whose dotted name has no ``_`` part). A name exported by two packages
    (``trio_agents.Agent``, ``trio_agents.agent.Agent``) counts once; a public subpackage that
    ``trio_agents`` lists (``agent``) is not a name of its own: its names are counted."""
    packages = _public_packages()
    names = {n for p in packages for n in importlib.import_module(p).__all__}
    return names - {p.rsplit(".", 1)[-1] for p in packages if p != "trio_agents"}


def package_lines() -> int:
    """Every physical line of ``trio_agents/**/*.py``: code, docstrings, comments and blanks."""
    return sum(
        len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    )


def test_the_count_sees_the_public_names_and_the_lines() -> None:
    """The count includes names of several layers and every module (it is not vacuous)."""
    names = public_names()
    assert {"Agent", "Context", "UserCancel", "JsonlStore", "ScriptedModel", "main"} <= names
    assert "agent" not in names
    assert package_lines() > sum(1 for _ in PACKAGE.rglob("*.py")) * 10


def test_the_public_surface_has_at_most_7_names_per_1000_lines() -> None:
    """Distinct public names per 1,000 lines of the package stay at or under 7 (issue #38)."""
    names, lines = len(public_names()), package_lines()
    per_kloc = names / lines * 1000
    assert per_kloc <= MAX_NAMES_PER_KLOC, (
        f"{names} public names in {lines} lines: {per_kloc:.2f} per 1,000 lines, over "
        f"{MAX_NAMES_PER_KLOC}; a name only the package and its tests use belongs in a private "
        f"module (see OFFERED and INTERNAL)"
    )
