"""The Anthropic Messages wire format, sans-IO: bodies, event assembly, errors."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agents.model import (
    AssistantText,
    Finished,
    FinishReason,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    SystemText,
    TextDelta,
    ToolCallRequested,
    ToolOutput,
    ToolSpec,
    Usage,
    UserText,
)
from trio_agents.model._anthropic_wire import (
    EventAssembler,
    conversation,
    describe_failure,
    request_body,
)
from trio_agents.model._messages import ToolCallPart
from trio_agents.model._retry import StreamFailure

URL = "http://127.0.0.1:9/v1/messages"


# -- request bodies ----------------------------------------------------------------------------


def test_system_text_goes_to_the_system_field_and_max_tokens_is_sent() -> None:
    """System texts are joined into `system`; messages hold only user/assistant turns."""
    request = ModelRequest(
        messages=(SystemText("Be brief."), SystemText("Use tools."), UserText("hi")),
        tools=(ToolSpec("now", "The time.", {"type": "object", "properties": {}}),),
    )
    assert request_body("claude-x", request, max_tokens=1234, cache=False) == {
        "model": "claude-x",
        "max_tokens": 1234,
        "stream": True,
        "system": "Be brief.\n\nUse tools.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "tools": [
            {
                "name": "now",
                "description": "The time.",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
    }


def test_no_system_and_no_tools_leave_the_fields_out() -> None:
    """The API takes no empty `system` or `tools`: they are absent."""
    body = request_body("m", ModelRequest(messages=(UserText("hi"),)), max_tokens=5)
    assert set(body) == {"model", "max_tokens", "stream", "messages"}


def test_tool_calls_and_results_are_content_blocks_in_merged_messages() -> None:
    """tool_use after the text; consecutive tool results (and a steer) in one user message."""
    messages = (
        UserText("look both up"),
        AssistantText(
            "Looking.",
            (ToolCallPart("toolu_1", "lookup", {"key": "a"}), ToolCallPart("toolu_2", "now", {})),
        ),
        ToolOutput("toolu_1", "lookup", "a = 1"),
        UserText("also hurry"),
        ToolOutput("toolu_2", "now", "no clock", is_error=True),
        AssistantText("a is 1"),
    )
    system, merged = conversation(messages)
    assert system == ""
    assert merged == [
        {"role": "user", "content": [{"type": "text", "text": "look both up"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a"}},
                {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a = 1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no clock",
                    "is_error": True,
                },
                {"type": "text", "text": "also hurry"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "a is 1"}]},
    ]


def test_empty_texts_are_left_out_and_empty_messages_dropped() -> None:
    """An assistant call with no text has only tool_use; an empty answer disappears and the
    user messages around it merge."""
    messages = (
        UserText("one"),
        AssistantText("", (ToolCallPart("t", "x", {}),)),
        ToolOutput("t", "x", ""),
        AssistantText(""),
        UserText("two"),
    )
    _, merged = conversation(messages)
    assert merged == [
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t"},
                {"type": "text", "text": "two"},
            ],
        },
    ]


_message = st.one_of(
    st.builds(SystemText, st.text(max_size=3)),
    st.builds(UserText, st.text(max_size=3)),
    st.builds(
        AssistantText,
        st.text(max_size=3),
        st.lists(st.builds(ToolCallPart, st.text("ab", max_size=2), st.just("t"), st.just({}))).map(
            tuple
        ),
    ),
    st.builds(ToolOutput, st.text("ab", max_size=2), st.just("t"), st.text(max_size=3)),
)


@given(st.lists(_message, max_size=12).map(tuple))
def test_roles_always_alternate_and_no_block_is_empty_or_lost(
    messages: tuple[Any, ...],
) -> None:
    """For any conversation: roles alternate, no text block is empty, results lead a user
    message, and every non-empty text, call and result is sent exactly once."""
    system, merged = conversation(messages)
    roles = [m["role"] for m in merged]
    assert all(a != b for a, b in itertools.pairwise(roles))
    blocks = [b for m in merged for b in m["content"]]
    assert all(b["text"] for b in blocks if b["type"] == "text")
    for m in merged:
        kinds = [b["type"] == "tool_result" for b in m["content"]]
        assert kinds == sorted(kinds, reverse=True)
        assert m["content"]
    expected_calls = [
        c.call_id for m in messages if isinstance(m, AssistantText) for c in m.tool_calls
    ]
    assert [b["id"] for b in blocks if b["type"] == "tool_use"] == expected_calls
    results = [m.call_id for m in messages if isinstance(m, ToolOutput)]
    assert sorted(b["tool_use_id"] for b in blocks if b["type"] == "tool_result") == sorted(results)
    texts = [m.content for m in messages if isinstance(m, UserText | AssistantText) and m.content]
    assert sorted(b["text"] for b in blocks if b["type"] == "text") == sorted(texts)
    assert system == "\n\n".join(
        m.content for m in messages if isinstance(m, SystemText) and m.content
    )


# -- the event stream --------------------------------------------------------------------------


def ev(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


def start(input_tokens: int = 10, **usage: int) -> str:
    counts = {"input_tokens": input_tokens, "output_tokens": 1, **usage}
    return ev("message_start", message={"id": "msg_1", "role": "assistant", "usage": counts})


def text_start(index: int) -> str:
    return ev("content_block_start", index=index, content_block={"type": "text", "text": ""})


def text(index: int, piece: str) -> str:
    return ev("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})


def tool_start(index: int, call_id: str, name: str) -> str:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return ev("content_block_start", index=index, content_block=block)


def tool_json(index: int, piece: str) -> str:
    delta = {"type": "input_json_delta", "partial_json": piece}
    return ev("content_block_delta", index=index, delta=delta)


def stop(index: int) -> str:
    return ev("content_block_stop", index=index)


def message_delta(reason: str, output_tokens: int) -> str:
    return ev(
        "message_delta",
        delta={"stop_reason": reason, "stop_sequence": None},
        usage={"output_tokens": output_tokens},
    )


MESSAGE_STOP = ev("message_stop")


def play(*events: str) -> list[ModelEvent]:
    assembler = EventAssembler(URL)
    out: list[ModelEvent] = []
    for data in events:
        out += assembler.feed(data)
    return out + assembler.end()


def test_text_streams_at_once_and_finishes_with_usage() -> None:
    """text_delta -> TextDelta; end_turn -> STOP with input and final output counts."""
    assembler = EventAssembler(URL)
    assert assembler.feed(start(12)) == []
    assert assembler.feed(ev("ping")) == []
    assert assembler.feed(text_start(0)) == []
    assert assembler.feed(text(0, "Hel")) == [TextDelta("Hel")]
    assert assembler.feed(text(0, "lo")) == [TextDelta("lo")]
    assert assembler.feed(stop(0)) == []
    assert assembler.feed(message_delta("end_turn", 7)) == []
    done = [assembler.done]
    assert assembler.feed(MESSAGE_STOP) == []
    done.append(assembler.done)
    assert done == [False, True]
    assert assembler.end() == [Finished(FinishReason.STOP, Usage(12, 7))]


def test_tool_use_input_is_assembled_across_deltas() -> None:
    """Text, then two tool_use blocks whose JSON arrives in pieces; calls come out at the end."""
    events = play(
        start(20),
        text_start(0),
        text(0, "Let me look."),
        stop(0),
        tool_start(1, "toolu_a", "lookup"),
        tool_json(1, ""),
        tool_json(1, '{"ke'),
        tool_json(1, 'y": "x"}'),
        stop(1),
        tool_start(2, "toolu_b", "now"),
        stop(2),
        message_delta("tool_use", 31),
        MESSAGE_STOP,
    )
    assert events == [
        TextDelta("Let me look."),
        ToolCallRequested("toolu_a", "lookup", {"key": "x"}),
        ToolCallRequested("toolu_b", "now", {}),
        Finished(FinishReason.TOOL_CALLS, Usage(20, 31)),
    ]


def test_cached_input_tokens_count_as_input_and_apart() -> None:
    """input_tokens + cache_creation + cache_read is the request's input; the two cache
    counts are kept apart too."""
    events = play(
        start(3, cache_creation_input_tokens=100, cache_read_input_tokens=40),
        message_delta("end_turn", 2),
        MESSAGE_STOP,
    )
    usage = Usage(143, 2, cache_creation_tokens=100, cache_read_tokens=40)
    assert events == [Finished(FinishReason.STOP, usage)]


EPHEMERAL = {"type": "ephemeral"}


def test_cache_breakpoints_mark_tools_system_and_the_last_two_user_messages() -> None:
    """With caching (the default) the last tool, the system text and the last block of the
    last two user messages carry cache_control: four breakpoints, the API's most."""
    messages = (
        SystemText("Be brief."),
        UserText("first"),
        AssistantText("one"),
        UserText("second"),
        AssistantText("", (ToolCallPart("toolu_1", "now", {}),)),
        ToolOutput("toolu_1", "now", "noon"),
    )
    specs = (
        ToolSpec("now", "The time.", {"type": "object"}),
        ToolSpec("later", "Later.", {"type": "object"}),
    )
    body = request_body("m", ModelRequest(messages=messages, tools=specs), max_tokens=5)
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert [t.get("cache_control") for t in body["tools"]] == [None, EPHEMERAL]
    marks = [
        (m["role"], b["type"])
        for m in body["messages"]
        for b in m["content"]
        if b.get("cache_control") == EPHEMERAL
    ]
    assert marks == [("user", "text"), ("user", "tool_result")]
    assert body["messages"][2]["content"][-1] == {
        "type": "text",
        "text": "second",
        "cache_control": EPHEMERAL,
    }
    assert json.dumps(body).count("cache_control") == 4


def test_without_caching_nothing_is_marked() -> None:
    """``cache=False`` sends the body without a single cache_control."""
    request = ModelRequest(
        messages=(SystemText("s"), UserText("hi")), tools=(ToolSpec("t", "T.", {}),)
    )
    body = request_body("m", request, max_tokens=5, cache=False)
    assert "cache_control" not in json.dumps(body)
    assert body["system"] == "s"


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("end_turn", FinishReason.STOP),
        ("stop_sequence", FinishReason.STOP),
        ("max_tokens", FinishReason.LENGTH),
        ("refusal", FinishReason.ERROR),
        ("something_new", FinishReason.STOP),
    ],
)
def test_stop_reasons_are_mapped(reason: str, finish: FinishReason) -> None:
    """Each stop_reason of the API maps to a FinishReason; an unknown one is a stop."""
    assert play(start(), message_delta(reason, 1), MESSAGE_STOP)[-1] == Finished(
        finish, Usage(10, 1)
    )


def test_a_stream_ending_before_the_stop_is_a_lost_connection() -> None:
    """No message_delta stop reason and no message_stop: a ModelError that says so."""
    with pytest.raises(ModelError, match=rf"^the connection to {URL} was lost mid-stream"):
        play(start(), text_start(0), text(0, "half"))


def test_a_stop_reason_without_message_stop_is_enough() -> None:
    """A body that ends after the stop reason is a complete answer."""
    assert play(start(), message_delta("end_turn", 4)) == [
        Finished(FinishReason.STOP, Usage(10, 4))
    ]


def test_events_after_message_stop_are_ignored() -> None:
    """Nothing after message_stop is parsed (garbage there is no error)."""
    assembler = EventAssembler(URL)
    assembler.feed(MESSAGE_STOP)
    assert assembler.feed("garbage") == []


@pytest.mark.parametrize(
    ("error_type", "retryable"),
    [("overloaded_error", True), ("api_error", True), ("invalid_request_error", False)],
)
def test_an_error_event_is_a_stream_failure(error_type: str, retryable: bool) -> None:
    """An `error` event names its type and message; overloaded/api errors may be retried."""
    assembler = EventAssembler(URL)
    with pytest.raises(StreamFailure) as info:
        assembler.feed(ev("error", error={"type": error_type, "message": "Over\nloaded"}))
    assert str(info.value) == f"{URL} reported an error mid-stream ({error_type}): Over loaded"
    assert info.value.retryable is retryable


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ((tool_start(0, "t", "x"), tool_json(0, "[1]")), r"tool 'x' with input that is not a JSON"),
        ((tool_start(0, "t", "x"), tool_json(0, '{"a"')), r"input that is not a JSON object"),
        ((tool_start(0, "t", ""),), r"sent a tool call without a tool name$"),
    ],
)
def test_unusable_tool_calls_are_model_errors(events: tuple[str, ...], message: str) -> None:
    """Input that is not a JSON object, or no name: the turn records a ModelError."""
    with pytest.raises(ModelError, match=message):
        play(*events, message_delta("tool_use", 1))


@pytest.mark.parametrize("data", ["not json", "[1, 2]"])
def test_malformed_events_are_model_errors(data: str) -> None:
    """An event that is not a JSON object is refused with the endpoint named."""
    with pytest.raises(ModelError, match=rf"^{URL} sent a stream event that is not"):
        EventAssembler(URL).feed(data)


def test_malformed_usage_is_ignored() -> None:
    """Counts of the wrong type carry no part of the answer: they are skipped."""
    events = play(
        ev("message_start", message=[]),
        ev("message_delta", delta=None, usage={"output_tokens": True}),
        message_delta("end_turn", 1),
    )
    assert events == [Finished(FinishReason.STOP, Usage(0, 1))]


TEXT = {"type": "text_delta"}


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (ev("content_block_delta", index=0, delta={**TEXT, "text": 5}),
         r"content_block_delta\.delta\.text is 5, not a string"),
        (ev("content_block_delta", index=0, delta="x"),
         r'content_block_delta\.delta is "x", not an object'),
        (ev("content_block_delta", index="0", delta={"type": "input_json_delta"}),
         r'content_block_delta\.index is "0", not a whole number'),
        (ev("content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": {}}),
         r"content_block_delta\.delta\.partial_json is \{\}, not a string"),
        (ev("content_block_start", index=0, content_block={"type": "text", "text": 1}),
         r"content_block_start\.content_block\.text is 1, not a string"),
        (ev("content_block_start", index=0, content_block={"type": "tool_use", "name": 3}),
         r"content_block_start\.content_block\.name is 3, not a string"),
        (ev("message_delta", delta={"stop_reason": 2}),
         r"message_delta\.delta\.stop_reason is 2, not a string"),
    ],
    ids=["text", "delta", "index", "partial-json", "block-text", "tool-name", "stop-reason"],
)  # fmt: skip
def test_a_malformed_field_of_the_answer_is_a_model_error(event: str, problem: str) -> None:
    """A field that carries the answer with the wrong JSON type is refused, naming the field:
    dropping it would silently lose text or change a tool call (issue #18)."""
    with pytest.raises(ModelError, match=rf"^{URL} sent a malformed stream event: {problem}$"):
        EventAssembler(URL).feed(event)


# -- error responses ---------------------------------------------------------------------------


def error_body(error_type: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": error_type, "message": message}}).encode()


@pytest.mark.parametrize(
    ("status", "error_type", "text", "message", "retryable"),
    [
        (
            401,
            "authentication_error",
            "invalid x-api-key",
            f"{URL} refused the API key (401 authentication_error): invalid x-api-key; "
            "check ANTHROPIC_API_KEY",
            False,
        ),
        (
            400,
            "invalid_request_error",
            "messages: roles must alternate",
            f"{URL} refused the request (400 invalid_request_error): "
            "messages: roles must alternate",
            False,
        ),
        (
            400,
            "invalid_request_error",
            "max_tokens: 100000 > 64000, which is the maximum",
            f"{URL} refused the request (400 invalid_request_error): max_tokens: 100000 > "
            "64000, which is the maximum; set a smaller max_tokens (anthropic:MODEL?max_tokens=N)",
            False,
        ),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 215000 tokens > 200000 maximum",
            "the conversation is too long for model 'claude-x' (400 invalid_request_error): "
            "prompt is too long: 215000 tokens > 200000 maximum; start a new session or "
            "shorten the input",
            False,
        ),
        (
            404,
            "not_found_error",
            "model: claude-x",
            f"model 'claude-x' was not found at {URL} (404 not_found_error): model: claude-x",
            False,
        ),
        (
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
            f"{URL} kept rate-limiting the request (429 rate_limit_error): Number of requests "
            "has exceeded your rate limit",
            True,
        ),
        (
            529,
            "overloaded_error",
            "Overloaded",
            f"{URL} is overloaded (529 overloaded_error): Overloaded; try again later",
            True,
        ),
        (
            500,
            "api_error",
            "Internal server error",
            f"{URL} failed with 500 api_error: Internal server error",
            True,
        ),
    ],
    ids=["401", "400", "max-tokens", "too-long", "404-model", "429", "529", "500"],
)
def test_error_responses_are_one_line_with_what_to_do(
    status: int, error_type: str, text: str, message: str, retryable: bool
) -> None:
    """Each API error type gives one line with the API's message, and a retry verdict."""
    failure = describe_failure(status, error_body(error_type, text), {}, url=URL, model="claude-x")
    assert (failure.message, failure.retryable) == (message, retryable)


def test_a_body_that_is_not_json_is_shown_on_one_line() -> None:
    """A proxy's HTML page is folded into one clipped line."""
    failure = describe_failure(502, b"<html>\n  Bad gateway\n</html>", {}, url=URL, model="m")
    assert failure.message == f"{URL} failed with HTTP 502: <html> Bad gateway </html>"
    assert failure.retryable


def test_x_should_retry_overrides_the_verdict() -> None:
    """The server's x-should-retry header decides, either way."""
    body = error_body("invalid_request_error", "x")
    assert describe_failure(400, body, {"x-should-retry": "true"}, url=URL, model="m").retryable
    body = error_body("api_error", "x")
    assert not describe_failure(
        500, body, {"x-should-retry": "false"}, url=URL, model="m"
    ).retryable


@pytest.mark.parametrize(
    ("status", "error_type", "text", "kind", "limit"),
    [
        (401, "authentication_error", "invalid x-api-key", ModelErrorKind.AUTH, None),
        (403, "permission_error", "no", ModelErrorKind.AUTH, None),
        (404, "not_found_error", "model: x", ModelErrorKind.NOT_FOUND, None),
        (
            400,
            "invalid_request_error",
            "prompt is too long: 215000 tokens > 200000 maximum",
            ModelErrorKind.CONTEXT_TOO_LONG,
            200000,
        ),
        (
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 178959 + 64000 > 200000, "
            "decrease input length or `max_tokens` and try again",
            ModelErrorKind.CONTEXT_TOO_LONG,
            200000,
        ),
        (429, "rate_limit_error", "slow down", ModelErrorKind.RATE_LIMITED, None),
        (529, "overloaded_error", "Overloaded", ModelErrorKind.OVERLOADED, None),
        (500, "api_error", "boom", ModelErrorKind.SERVER, None),
        (400, "invalid_request_error", "messages: bad", ModelErrorKind.REFUSED, None),
    ],
    ids=["401", "403", "404", "too-long", "with-max-tokens", "429", "529", "500", "400"],
)
def test_error_responses_say_their_kind_and_the_reported_window(
    status: int, error_type: str, text: str, kind: ModelErrorKind, limit: int | None
) -> None:
    """Each API error has the kind a fallback chain and a turn act on, and a "too long" one
    the window it states (the prompt alone, or with max_tokens)."""
    failure = describe_failure(status, error_body(error_type, text), {}, url=URL, model="m")
    assert (failure.kind, failure.limit) == (kind, limit)


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("overloaded_error", ModelErrorKind.OVERLOADED),
        ("rate_limit_error", ModelErrorKind.RATE_LIMITED),
        ("api_error", ModelErrorKind.SERVER),
        ("invalid_request_error", ModelErrorKind.BROKEN),
    ],
)
def test_an_error_event_says_its_kind(error_type: str, kind: ModelErrorKind) -> None:
    """An ``error`` event mid-stream has the kind of its error type."""
    event = json.dumps({"type": "error", "error": {"type": error_type, "message": "m"}})
    with pytest.raises(StreamFailure) as caught:
        EventAssembler(URL).feed(event)
    assert caught.value.kind is kind
