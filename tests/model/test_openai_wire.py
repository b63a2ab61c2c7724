"""The chat-completions wire format, sans-IO: bodies, chunk assembly, errors, specs."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from trio_agents.model import (
    AssistantText,
    Finished,
    FinishReason,
    ModelError,
    ModelErrorKind,
    ModelRequest,
    ModelSpecError,
    OpenAIChatModel,
    SystemText,
    TextDelta,
    ToolCallRequested,
    ToolOutput,
    ToolSpec,
    Usage,
    UserText,
    model_from_spec,
)
from trio_agents.model._messages import ToolCallPart
from trio_agents.model._openai_wire import (
    ChunkAssembler,
    describe_failure,
    message_json,
    request_body,
)
from trio_agents.model._retry import retry_after

URL = "http://127.0.0.1:9/v1/chat/completions"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]})


def call_delta(index: int, **fields: Any) -> dict[str, Any]:
    function = {k: v for k, v in fields.items() if k in ("name", "arguments")}
    part: dict[str, Any] = {"index": index, "function": function}
    if "id" in fields:
        part.update(id=fields["id"], type="function")
    return {"tool_calls": [part]}


def test_request_body_maps_every_message_kind_and_the_tools() -> None:
    """system/user/assistant(+tool_calls)/tool messages and function tools, streamed."""
    request = ModelRequest(
        messages=(
            SystemText("be brief"),
            UserText("hi"),
            AssistantText("", (ToolCallPart("c1", "bash", {"command": "ls"}),)),
            ToolOutput("c1", "bash", "a.txt"),
            ToolOutput("c2", "bash", "boom", is_error=True),
            AssistantText("done"),
        ),
        tools=(ToolSpec("bash", "Run a command.", {"type": "object"}),),
    )
    assert request_body("m", request) == {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
            {"role": "tool", "tool_call_id": "c2", "content": "error: boom"},
            {"role": "assistant", "content": "done"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "bash",
                    "description": "Run a command.",
                    "parameters": {"type": "object"},
                },
            }
        ],
    }


def test_a_request_without_tools_sends_no_tools_key() -> None:
    """An empty tool list is left out (some servers refuse 'tools': [])."""
    assert "tools" not in request_body("m", ModelRequest(messages=(UserText("x"),)))


def test_text_deltas_stream_and_usage_arrives_last() -> None:
    """Content deltas come out at once; usage from the final chunk is in Finished."""
    assembler = ChunkAssembler(URL)
    assert assembler.feed(chunk({"role": "assistant", "content": ""})) == []
    assert assembler.feed(chunk({"content": "Hel"})) == [TextDelta("Hel")]
    assert assembler.feed(chunk({"content": "lo"}, "stop")) == [TextDelta("lo")]
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    assert assembler.feed(json.dumps({"choices": [], "usage": usage})) == []
    assert assembler.feed("[DONE]") == []
    assert assembler.done
    assert assembler.end() == [Finished(FinishReason.STOP, Usage(5, 2))]


def test_tool_call_deltas_are_assembled_by_index() -> None:
    """id and name first, argument fragments appended, two calls interleaved."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk(call_delta(0, id="a", name="bash", arguments="")))
    assembler.feed(chunk(call_delta(1, id="b", name="read", arguments='{"pa')))
    assembler.feed(chunk(call_delta(0, arguments='{"command"')))
    assembler.feed(chunk(call_delta(0, arguments=': "ls"}')))
    assembler.feed(chunk(call_delta(1, arguments='th": "x"}')))
    assembler.feed(chunk(None, "tool_calls"))
    assert assembler.end() == [
        ToolCallRequested("a", "bash", {"command": "ls"}),
        ToolCallRequested("b", "read", {"path": "x"}),
        Finished(FinishReason.TOOL_CALLS),
    ]


def test_missing_ids_and_empty_arguments_get_defaults() -> None:
    """A call without an id gets call-N; empty arguments are {}; 'stop' with calls is tool_calls."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk(call_delta(0, name="now")))
    assembler.feed(chunk(None, "stop"))
    assert assembler.end() == [
        ToolCallRequested("call-1", "now", {}),
        Finished(FinishReason.TOOL_CALLS),
    ]


@pytest.mark.parametrize(
    ("finish", "reason"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("content_filter", FinishReason.ERROR),
        ("something_new", FinishReason.STOP),
    ],
)
def test_finish_reasons_are_mapped(finish: str, reason: FinishReason) -> None:
    """The server's finish_reason becomes a FinishReason, even without [DONE]."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk({"content": "x"}, finish))
    assert assembler.end() == [Finished(reason)]


def test_a_stream_ending_before_the_finish_is_a_lost_connection() -> None:
    """No finish_reason and no [DONE]: ModelError naming the endpoint."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk({"content": "x"}))
    with pytest.raises(ModelError, match=rf"^the connection to {URL} was lost mid-stream"):
        assembler.end()


@pytest.mark.parametrize("arguments", ['{"a": 1', "[1, 2]", "null"])
def test_tool_arguments_that_are_not_a_json_object_are_a_model_error(arguments: str) -> None:
    """Invalid or non-object arguments are refused with the tool name and the raw text."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk(call_delta(0, id="a", name="bash", arguments=arguments), "tool_calls"))
    with pytest.raises(
        ModelError, match=r"^the model called tool 'bash' with arguments that are not a JSON"
    ):
        assembler.end()


def test_garbage_and_error_events_are_model_errors() -> None:
    """A non-JSON event or an error object mid-stream is a ModelError."""
    with pytest.raises(ModelError, match=r"sent a stream event that is not JSON: 'oops'$"):
        ChunkAssembler(URL).feed("oops")
    with pytest.raises(ModelError, match=r"reported an error mid-stream: overloaded$"):
        ChunkAssembler(URL).feed(json.dumps({"error": {"message": "overloaded"}}))


def _error(message: str, code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": "x", "code": code}}).encode()


@pytest.mark.parametrize(
    ("status", "body", "message", "retryable"),
    [
        (401, _error("Incorrect API key"), r"refused the API key \(401 Unauthorized\)", False),
        (
            404,
            _error("The model `gpt-9` does not exist", "model_not_found"),
            r"^model 'gpt-9' was not found at .* \(404\): The model `gpt-9` does not exist$",
            False,
        ),
        (404, b"Not Found", r"was not found \(404\): Not Found; check the base URL", False),
        (
            400,
            _error("This model's maximum context length is 8192 tokens", "context_length_exceeded"),
            r"^the conversation is too long for model 'gpt-9' \(context_length_exceeded\)",
            False,
        ),
        (429, _error("Rate limit reached"), r"kept rate-limiting the request \(429\)", True),
        (429, _error("quota", "insufficient_quota"), r"out of quota \(429\)", False),
        (503, b"<html>busy</html>", r"failed with HTTP 503: <html>busy</html>$", True),
        (400, b'{"detail": "bad field"}', r"refused the request \(HTTP 400\): bad field$", False),
    ],
)
def test_error_responses_become_messages_a_user_can_act_on(
    status: int, body: bytes, message: str, retryable: bool
) -> None:
    """Each status is one short message; only rate limits and server errors are retried."""
    failure = describe_failure(status, body, url=URL, model="gpt-9")
    assert failure.retryable is retryable
    assert re.search(message, failure.message), failure.message


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"retry-after": "600"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_reads_seconds_milliseconds_and_dates(
    headers: dict[str, str], seconds: float | None
) -> None:
    """Retry-After as seconds or a date, retry-after-ms first; out-of-range values ignored."""
    now = 1445412480.0  # 2015-10-21 07:28:00 UTC
    assert retry_after(headers, now) == seconds


def test_the_openai_scheme_builds_the_model_with_its_parameters() -> None:
    """openai:MODEL?base_url=...&timeout=...&max_retries=... configures the model."""
    model = model_from_spec("openai:llama3.2:1b?base_url=http://localhost:11434/v1/&timeout=5")
    assert isinstance(model, OpenAIChatModel)
    assert model.name == "llama3.2:1b"
    assert model.url == "http://localhost:11434/v1/chat/completions"


def test_the_openai_model_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """OPENAI_BASE_URL chooses the endpoint; the default is api.openai.com."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1")
    assert OpenAIChatModel("m").base_url == "http://127.0.0.1:8000/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIChatModel("m").base_url == "https://api.openai.com/v1"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            "openai:m?temperature=1",
            r"openai takes base_url, timeout, deadline, max_line, max_retries, max_answer and "
            r"context_window \(got 'temp",
        ),
        ("openai:m?timeout=1&timeout=2", r"a repeated 'timeout'"),
        ("openai:m?timeout=0", r"timeout must be a number of seconds > 0, got '0'"),
        ("openai:m?timeout=inf", r"timeout must be a number of seconds > 0, got 'inf'"),
        ("openai:m?max_retries=-1", r"max_retries must be a whole number >= 0, got '-1'"),
        ("openai:m?base_url=localhost:8000", r"base_url must be an http:// or https:// URL"),
        ("openai:m?", r"openai takes base_url"),
        (
            "openai:m?timeout",
            r"openai takes base_url, timeout, deadline, max_line, max_retries, max_answer and "
            r"context_window \(got ''\)$",
        ),
        ("openai:m?timeout=soon", r"timeout must be a number of seconds > 0, got 'soon'$"),
        ("openai:m?max_retries=1.5", r"max_retries must be a whole number >= 0, got '1\.5'$"),
    ],
)
def test_bad_openai_specs_say_what_is_wrong(spec: str, problem: str) -> None:
    """A bad openai spec is a ModelSpecError naming the problem."""
    quoted = re.escape(repr(spec))
    with pytest.raises(ModelSpecError, match=rf"^invalid model spec {quoted}: .*{problem}"):
        model_from_spec(spec)


def test_an_openai_spec_without_a_model_name_is_refused() -> None:
    """'openai:?...' has parameters but no model: the message shows the form to write."""
    with pytest.raises(
        ModelSpecError,
        match=r"^model spec 'openai:\?timeout=1' names no model; write openai:MODEL$",
    ):
        model_from_spec("openai:?timeout=1")


def test_a_huge_max_retries_in_a_spec_is_a_number_not_a_crash() -> None:
    """A whole number too big for a float is still a valid max_retries (no OverflowError)."""
    model = model_from_spec(f"openai:m?max_retries={'9' * 400}")
    assert isinstance(model, OpenAIChatModel)


def test_the_repr_names_the_model_and_its_endpoint() -> None:
    """repr shows the model name and the API root, without the trailing slash."""
    model = OpenAIChatModel("llama3.2", base_url="http://127.0.0.1:8000/v1/")
    assert repr(model) == "<OpenAIChatModel 'llama3.2' at http://127.0.0.1:8000/v1>"


def test_constructor_arguments_are_checked() -> None:
    """An empty name, a non-positive timeout or negative retries are refused."""
    with pytest.raises(ValueError, match=r"needs a model name"):
        OpenAIChatModel("")
    with pytest.raises(ValueError, match=r"timeout must be a number of seconds > 0 or None"):
        OpenAIChatModel("m", timeout=0)
    with pytest.raises(ValueError, match=r"max_retries must be >= 0"):
        OpenAIChatModel("m", max_retries=-1)


def test_a_value_that_is_not_a_chat_message_is_a_type_error() -> None:
    """message_json refuses anything but the four message kinds, naming what it got."""
    with pytest.raises(TypeError, match=r"^not a chat message: str 'hi'$"):
        message_json("hi")  # type: ignore[arg-type]


def test_events_after_done_are_ignored_unparsed() -> None:
    """Once [DONE] arrived, later data (even garbage or more text) yields nothing."""
    assembler = ChunkAssembler(URL)
    assembler.feed("[DONE]")
    assert assembler.feed("not json") == []
    assert assembler.feed(chunk({"content": "late"})) == []
    assert assembler.end() == [Finished(FinishReason.STOP)]


def test_a_json_event_that_is_not_an_object_is_a_model_error() -> None:
    """An event whose data is a JSON array is refused with the endpoint's name."""
    with pytest.raises(ModelError, match=rf"^{URL} sent a stream event that is not an object$"):
        ChunkAssembler(URL).feed("[1, 2]")


def test_other_choices_null_fields_and_bad_usage_are_ignored() -> None:
    """Choices other than index 0, null fields and malformed usage counts carry no part of
    the answer: they are skipped and the rest of the stream still assembles."""
    assembler = ChunkAssembler(URL)
    other = {"index": 1, "delta": {"content": 5}}
    assert assembler.feed(json.dumps({"choices": [other, None]})) == []
    assert assembler.feed(json.dumps({"choices": None, "usage": {"prompt_tokens": "3"}})) == []
    assert assembler.feed(chunk({"tool_calls": None, "content": "kept"})) == [TextDelta("kept")]
    assembler.feed(chunk(call_delta(0, id="a", name="bash", arguments=None)))
    assembler.feed(chunk(None, "tool_calls"))
    assert assembler.end() == [
        ToolCallRequested("a", "bash", {}),
        Finished(FinishReason.TOOL_CALLS),
    ]


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"choices": [{"delta": {"content": 5}}]}, r"choices\[0\]\.delta\.content is 5, not a str"),
        ({"choices": 5}, r"choices is 5, not an array"),
        ({"choices": ["x"]}, r'choices\[0\] is "x", not an object'),
        ({"choices": [{"delta": "text"}]}, r'choices\[0\]\.delta is "text", not an object'),
        ({"choices": [{"delta": {"tool_calls": 3}}]}, r"delta\.tool_calls is 3, not an array"),
        (
            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "f"}]}}]},
            r'choices\[0\]\.delta\.tool_calls\[0\]\.function is "f", not an object',
        ),
        (
            {"choices": [{"delta": call_delta(0, id=7, name="bash")}]},
            r"tool_calls\[0\]\.id is 7, not a string",
        ),
        (
            {"choices": [{"delta": call_delta(0, id="a", name=["bash"])}]},
            r'tool_calls\[0\]\.function\.name is \["bash"\], not a string',
        ),
        (
            {"choices": [{"delta": call_delta(0, id="a", name="b", arguments=1)}]},
            r"tool_calls\[0\]\.function\.arguments is 1, not a string",
        ),
        ({"choices": [{"delta": {}, "finish_reason": True}]}, r"finish_reason is true, not a"),
    ],
    ids=["content", "choices", "choice", "delta", "tool-calls", "function", "id", "name",
         "arguments", "finish"],
)  # fmt: skip
def test_a_malformed_field_of_the_answer_is_a_model_error(
    payload: dict[str, Any], problem: str
) -> None:
    """A field that carries the answer with the wrong JSON type is refused, naming the field:
    dropping it would silently lose text or change a tool call (issue #18)."""
    with pytest.raises(ModelError, match=rf"^{URL} sent a malformed stream event: .*{problem}"):
        ChunkAssembler(URL).feed(json.dumps(payload))


def test_arguments_sent_as_an_object_are_taken_as_they_are() -> None:
    """Some local servers send the arguments object itself instead of its JSON text."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk(call_delta(0, id="a", name="bash", arguments={"command": "ls"})))
    assembler.feed(chunk(None, "tool_calls"))
    assert assembler.end()[0] == ToolCallRequested("a", "bash", {"command": "ls"})


def test_a_tool_call_without_a_name_is_a_model_error() -> None:
    """Arguments with no tool name cannot run: the stream ends in a ModelError."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk(call_delta(0, id="a", arguments="{}"), "tool_calls"))
    with pytest.raises(ModelError, match=rf"^{URL} sent a tool call without a tool name$"):
        assembler.end()


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (403, _error("Country not supported"), r"denied access \(403 Forbidden\): Country not"),
        (400, b'{"error": "Invalid token"}', r"refused the request \(HTTP 400\): Invalid token$"),
        (
            422,
            b'{"error": null, "detail": "messages: field required"}',
            r"refused the request \(HTTP 422\): messages: field required$",
        ),
        (400, b'{"error": [1]}', r"refused the request \(HTTP 400\)$"),
    ],
    ids=["403", "error-string", "error-null-detail", "error-unreadable"],
)
def test_other_error_shapes_are_read_or_left_out(status: int, body: bytes, message: str) -> None:
    """A 403, an error given as a string, a detail beside a null error; unreadable: no text."""
    failure = describe_failure(status, body, url=URL, model="gpt-9")
    assert not failure.retryable
    assert re.search(message, failure.message), failure.message


@pytest.mark.parametrize(
    ("status", "body", "kind", "limit"),
    [
        (401, _error("Incorrect API key"), ModelErrorKind.AUTH, None),
        (403, _error("Forbidden"), ModelErrorKind.AUTH, None),
        (429, _error("quota", "insufficient_quota"), ModelErrorKind.AUTH, None),
        (404, _error("no model", "model_not_found"), ModelErrorKind.NOT_FOUND, None),
        (
            400,
            _error(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 204308 tokens.",
                "context_length_exceeded",
            ),
            ModelErrorKind.CONTEXT_TOO_LONG,
            128000,
        ),
        (429, _error("Rate limit reached"), ModelErrorKind.RATE_LIMITED, None),
        (503, b"busy", ModelErrorKind.SERVER, None),
        (400, _error("bad field"), ModelErrorKind.REFUSED, None),
    ],
    ids=["401", "403", "quota", "404", "too-long", "429", "503", "400"],
)
def test_error_responses_say_their_kind_and_the_reported_window(
    status: int, body: bytes, kind: ModelErrorKind, limit: int | None
) -> None:
    """Each error response has the kind a fallback chain and a turn act on, and a "too long"
    one the window it states."""
    failure = describe_failure(status, body, url=URL, model="gpt-9")
    assert (failure.kind, failure.limit) == (kind, limit)


def test_cached_prompt_tokens_are_counted_apart() -> None:
    """``prompt_tokens_details.cached_tokens`` (OpenAI's automatic prompt cache) is the
    request's cache read; the prompt tokens include it."""
    assembler = ChunkAssembler(URL)
    assembler.feed(chunk({"content": "hi"}, "stop"))
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 1920},
    }
    assembler.feed(json.dumps({"choices": [], "usage": usage}))
    assembler.feed("[DONE]")
    assert assembler.end() == [Finished(FinishReason.STOP, Usage(2006, 3, cache_read_tokens=1920))]
