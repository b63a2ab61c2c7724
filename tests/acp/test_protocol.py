"""ACP shapes as plain functions: params reading, prompt blocks, updates, session/list entries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from trio_agents.acp._jsonrpc import ErrorCode, RpcError
from trio_agents.acp._protocol import (
    UpdateMapper,
    absolute_cwd,
    in_progress,
    optional_str,
    params_object,
    prompt_text,
    replay,
    required_str,
    session_info,
    session_info_update,
    session_title,
    stop_reason,
    tool_call,
    tool_call_start,
    tool_kind,
    usage_update,
)
from trio_agents.session import (
    AssistantMessage,
    SessionInfo,
    StopReason,
    ToolCall,
    ToolCallEnded,
    TurnEnded,
    UserMessage,
)


def test_null_params_are_an_empty_object_and_others_are_refused() -> None:
    """params null (or absent) reads as {}; an array is -32602 invalid params."""
    assert params_object(None) == {}
    assert params_object({"a": 1}) == {"a": 1}
    with pytest.raises(RpcError, match=r"^invalid params: expected an object$") as caught:
        params_object([1, 2])
    assert caught.value.code == ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize(
    ("params", "got"),
    [({}, "nothing"), ({"sessionId": 7}, "int 7"), ({"sessionId": None}, "NoneType None")],
)
def test_required_str_names_the_field_and_what_came(params: dict[str, Any], got: str) -> None:
    """A missing or mistyped field is -32602 naming the field and what was sent."""
    with pytest.raises(
        RpcError, match=rf"^invalid params: 'sessionId' must be a string; got {got}$"
    ):
        required_str(params, "sessionId")


def test_optional_str_takes_absent_and_null_as_none_but_checks_the_type() -> None:
    """Absent or null is None; a present non-string is still refused."""
    assert optional_str({}, "cwd") is None
    assert optional_str({"cwd": None}, "cwd") is None
    assert optional_str({"cwd": "/x"}, "cwd") == "/x"
    with pytest.raises(RpcError, match=r"^invalid params: 'cwd' must be a string; got int 3$"):
        optional_str({"cwd": 3}, "cwd")


def test_cwd_must_be_absolute() -> None:
    """A relative cwd is refused, naming it."""
    assert absolute_cwd({"cwd": "/abs"}) == "/abs"
    with pytest.raises(
        RpcError, match=r"^invalid params: 'cwd' must be an absolute path; got 'r'$"
    ):
        absolute_cwd({"cwd": "r"})


def test_prompt_text_joins_text_links_and_embedded_text_resources_in_order() -> None:
    """text gives its text, resource_link its URI, an embedded text resource its URI then
    its text."""
    blocks = [
        {"type": "text", "text": "look at"},
        {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
        {"type": "resource", "resource": {"uri": "file:///b.py", "text": "print(1)"}},
    ]
    assert prompt_text({"prompt": blocks}) == "look at\nfile:///a.py\nfile:///b.py\nprint(1)"
    assert prompt_text({"prompt": []}) == ""


@pytest.mark.parametrize(
    "block",
    [
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource", "resource": {"uri": "file:///b", "blob": "AAAA"}},
        {"type": "resource", "resource": "file:///b"},
        {"type": "resource", "resource": {"text": "no uri"}},
        {"type": "text", "text": 3},
        {"type": "resource_link"},
        "just a string",
    ],
)
def test_unsupported_prompt_blocks_are_refused_by_index(block: object) -> None:
    """Audio, binary resources and malformed blocks are -32602 naming the index."""
    with pytest.raises(RpcError, match=r"^invalid params: prompt\[1\] is not supported ") as caught:
        prompt_text({"prompt": [{"type": "text", "text": "ok"}, block]})
    assert caught.value.code == ErrorCode.INVALID_PARAMS


@pytest.mark.parametrize("prompt", [None, "hello", {"type": "text", "text": "x"}])
def test_prompt_must_be_an_array(prompt: object) -> None:
    """A missing or non-array prompt is -32602."""
    with pytest.raises(RpcError, match=r"^invalid params: 'prompt' must be an array"):
        prompt_text({} if prompt is None else {"prompt": prompt})


def test_stop_reasons_map_and_error_has_none() -> None:
    """Each stop reason maps as the module says; error has no ACP stop reason."""
    assert {r: stop_reason(r) for r in StopReason} == {
        StopReason.COMPLETED: "end_turn",
        StopReason.CANCELLED: "cancelled",
        StopReason.INTERRUPTED: "cancelled",
        StopReason.MAX_STEPS: "max_turn_requests",
        StopReason.BLOCKED: "refusal",
        StopReason.ERROR: None,
    }


def test_tool_call_titles_bash_by_its_command_and_others_by_name() -> None:
    """bash is an 'execute' titled by its command; another tool is 'other' titled by name."""
    bash = tool_call(
        ToolCall(turn_id="t-1", call_id="c1", name="bash", arguments={"command": "ls"})
    )
    assert (bash["title"], bash["kind"], bash["status"]) == ("bash: ls", "execute", "pending")
    odd = tool_call(ToolCall(turn_id="t-1", call_id="c2", name="bash", arguments={"command": 1}))
    assert odd["title"] == "bash"
    other = tool_call(ToolCall(turn_id="t-1", call_id="c3", name="read", arguments={"p": "a"}))
    assert (other["title"], other["kind"], other["rawInput"]) == ("read", "other", {"p": "a"})


def test_replay_maps_each_record_to_at_most_one_update() -> None:
    """User, assistant, tool call and tool result records replay; a turn end does not."""
    records = [
        UserMessage(message_id="m-1", content="hi", turn_id="t-1"),
        AssistantMessage(turn_id="t-1", content="hello"),
        ToolCall(turn_id="t-1", call_id="c1", name="bash", arguments={"command": "x"}),
        ToolCallEnded(turn_id="t-1", call_id="c1", name="bash", content="boom", is_error=True),
        TurnEnded(turn_id="t-1", stop_reason=StopReason.COMPLETED),
    ]
    updates = replay(records)
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
    ]
    assert updates[3]["status"] == "failed"
    assert updates[3]["rawOutput"] == {"content": "boom", "isError": True}


def test_session_info_leaves_out_what_is_not_known() -> None:
    """No title and no update time: only sessionId and cwd; both known: both given."""
    bare = SessionInfo(id="s-1", records=0, updated=None, live=False, title=None)
    assert session_info(bare, "/w") == {"sessionId": "s-1", "cwd": "/w"}
    when = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    full = SessionInfo(id="s-2", records=3, updated=when, live=True, title="a title")
    assert session_info(full, "/w") == {
        "sessionId": "s-2",
        "cwd": "/w",
        "title": "a title",
        "updatedAt": "2024-05-06T07:08:09+00:00",
    }


def test_tool_calls_carry_their_kind_title_and_file() -> None:
    """Each built-in tool has its ACP kind and title; a file tool its absolute location (a
    read its line) and an edit or a write the diff its arguments ask for."""
    read = tool_call_start("read_file", "c", {"path": "a.py", "offset": 7}, "/w")
    assert (read["kind"], read["title"], read["locations"]) == (
        "read",
        "read_file: a.py",
        [{"path": "/w/a.py", "line": 7}],
    )
    assert "content" not in read
    edit = tool_call_start("edit_file", "c", {"path": "/x/../b.py", "old_text": "1",
                                              "new_text": "2"}, "/w")  # fmt: skip
    assert edit["kind"] == "edit"
    assert edit["content"] == [{"type": "diff", "path": "/b.py", "oldText": "1", "newText": "2"}]
    write = tool_call_start("write_file", "c", {"path": "n.txt", "content": "hi"}, "/w")
    assert write["content"] == [
        {"type": "diff", "path": "/w/n.txt", "oldText": None, "newText": "hi"}
    ]
    assert [tool_kind(n) for n in ("grep", "glob", "list_files", "plan", "bash_output", "x")] == [
        "search", "search", "search", "think", "execute", "other",
    ]  # fmt: skip
    grep = tool_call_start("grep", "c", {"pattern": "TODO", "path": "src"}, "/w")
    assert (grep["title"], "locations" in grep) == ("grep: TODO", False)
    assert tool_call_start("read_file", "c", {"path": "rel"}, None)["title"] == "read_file: rel"
    assert "locations" not in tool_call_start("read_file", "c", {"path": "rel"}, None)
    assert "locations" not in tool_call_start("read_file", "c", {"path": 3}, "/w")


def test_the_mapper_gives_a_calls_end_its_diffs_and_a_plans_end_its_plan() -> None:
    """A change told while a call is open rides on its end, before the text; a change for
    no open call is dropped; a plan call that failed sends no plan."""
    mapper = UpdateMapper("/w")
    write = ToolCall(turn_id="t", call_id="w", name="write_file",
                     arguments={"path": "a", "content": "new"})  # fmt: skip
    [announced] = mapper.updates(write)
    assert announced["locations"] == [{"path": "/w/a"}]
    mapper.file_changed("w", "/w/a", "old", "new")
    mapper.file_changed("nobody", "/w/b", None, "x")
    [ended] = mapper.updates(ToolCallEnded(turn_id="t", call_id="w", name="write_file",
                                           content="overwrote a"))  # fmt: skip
    assert [c["type"] for c in ended["content"]] == ["diff", "content"]
    assert ended["content"][0] == {"type": "diff", "path": "/w/a", "oldText": "old",
                                   "newText": "new"}  # fmt: skip
    plan = ToolCall(turn_id="t", call_id="p", name="plan", arguments={"entries": []})
    mapper.updates(plan)
    failed = mapper.updates(
        ToolCallEnded(turn_id="t", call_id="p", name="plan", content="bad", is_error=True)
    )
    assert [u["sessionUpdate"] for u in failed] == ["tool_call_update"]
    assert mapper.updates(TurnEnded(turn_id="t", stop_reason=StopReason.COMPLETED)) == []


def test_titles_usage_and_info_updates() -> None:
    """A title is the first non-empty line, cut at 60 characters; the updates' shapes."""
    assert session_title("\n\n  fix it\nmore") == "fix it"
    assert session_title("   ") is None
    long = session_title("x" * 70)
    assert long is not None
    assert (len(long), long[-1]) == (60, "…")
    assert usage_update(10, 100) == {"sessionUpdate": "usage_update", "used": 10, "size": 100}
    assert session_info_update("t") == {"sessionUpdate": "session_info_update", "title": "t"}
    assert in_progress("c") == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "status": "in_progress",
    }
