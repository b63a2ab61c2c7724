"""AnthropicModel against a real HTTP server on 127.0.0.1, run in-process under trio.

The server is a small raw-socket HTTP/1.1 server speaking the Messages API streaming format
(chunked bodies, one request per connection). Tests that wait on retries use the autojump
clock with ``timeout=None`` on the model: then no deadline but the retry's own sleep exists,
and the clock can only jump there. Other socket tests run on real time with
``trio.fail_after`` as a safety net (no sleeps).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import TRIO_AGENTS, FakeServer, Reply, Tools, serve
from trio_agents.model import (
    AnthropicModel,
    Finished,
    FinishReason,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelSpecError,
    SystemText,
    TextDelta,
    ToolCallRequested,
    Usage,
    UserText,
    model_from_spec,
)
from trio_agents.session import JsonlStore, StopReason, ToolCallEnded, TurnEnded

# -- the server --------------------------------------------------------------------------------


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeServer:
    return await serve(nursery, "")


# -- stream helpers: the events of the Messages API ----------------------------------------------


def sse(kind: str, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, **fields})
    return f"event: {kind}\ndata: {data}\n\n".encode()


def message_start(input_tokens: int = 9) -> bytes:
    usage = {"input_tokens": input_tokens, "output_tokens": 1}
    return sse("message_start", message={"id": "msg_1", "role": "assistant", "usage": usage})


def text_block(index: int, *pieces: str) -> list[bytes]:
    return [
        sse("content_block_start", index=index, content_block={"type": "text", "text": ""}),
        *(
            sse("content_block_delta", index=index, delta={"type": "text_delta", "text": p})
            for p in pieces
        ),
        sse("content_block_stop", index=index),
    ]


def tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[bytes]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return [
        sse("content_block_start", index=index, content_block=block),
        *(
            sse(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": p},
            )
            for p in pieces
        ),
        sse("content_block_stop", index=index),
    ]


def message_end(reason: str, output_tokens: int) -> list[bytes]:
    delta = {"stop_reason": reason, "stop_sequence": None}
    return [
        sse("message_delta", delta=delta, usage={"output_tokens": output_tokens}),
        sse("message_stop"),
    ]


def text_reply(*pieces: str) -> Reply:
    return Reply(
        chunks=[message_start(), sse("ping"), *text_block(0, *pieces), *message_end("end_turn", 5)]
    )


def error_reply(status: int, error_type: str, message: str, **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    pairs = tuple((k.replace("_", "-"), v) for k, v in headers.items())
    return Reply(status, pairs, [json.dumps(body).encode()])


REQUEST = ModelRequest(messages=(SystemText("Be brief."), UserText("hi")))


async def collect(model: AnthropicModel, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    async with aclosing(model.stream(request)) as stream:
        return [e async for e in stream]


async def collect_into(events: list[ModelEvent], model: AnthropicModel) -> None:
    async with aclosing(model.stream(REQUEST)) as stream:
        async for e in stream:
            events.append(e)


def local(server: FakeServer, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.url, api_key="sk-ant-test", **kwargs)


# -- streaming ---------------------------------------------------------------------------------


async def test_text_streams_as_deltas_with_usage(server: FakeServer) -> None:
    """Each text_delta is a TextDelta; the stream ends with Finished(stop, usage); the request
    is a streaming POST /v1/messages with the key, the version, system and max_tokens."""
    server.script(text_reply("Hel", "lo", "!"))
    with trio.fail_after(10):
        events = await collect(local(server, max_tokens=321, cache=False))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta("!"),
        Finished(FinishReason.STOP, Usage(9, 5)),
    ]
    (seen,) = server.seen
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == "sk-ant-test"
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    assert seen.body == {
        "model": "claude-test",
        "max_tokens": 321,
        "stream": True,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }


async def test_tool_use_streams_as_one_requested_call(server: FakeServer) -> None:
    """Text, then a tool_use block whose input arrives in pieces: one parsed call, then
    Finished(tool_calls) with the usage of message_start and message_delta."""
    server.script(
        Reply(
            chunks=[
                message_start(40),
                *text_block(0, "Checking."),
                *tool_block(1, "toolu_01", "lookup", '{"ke', 'y": ', '"x"}'),
                *message_end("tool_use", 17),
            ]
        )
    )
    with trio.fail_after(10):
        events = await collect(local(server))
    assert events == [
        TextDelta("Checking."),
        ToolCallRequested("toolu_01", "lookup", {"key": "x"}),
        Finished(FinishReason.TOOL_CALLS, Usage(40, 17)),
    ]


async def test_the_environment_configures_endpoint_and_key(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY are used when no argument is given."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url + "/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    server.script(text_reply("ok"))
    with trio.fail_after(10):
        await collect(AnthropicModel("claude-test"))
    assert server.seen[0].headers["x-api-key"] == "sk-ant-env"
    assert server.seen[0].path == "/v1/messages"


async def test_a_missing_key_for_the_anthropic_endpoint_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a key, the default endpoint is not even contacted."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    model = AnthropicModel("claude-test")
    assert model.url == "https://api.anthropic.com/v1/messages"
    with pytest.raises(
        ModelError, match=r"^ANTHROPIC_API_KEY is not set; export it or pass api_key=$"
    ):
        await collect(model)


async def test_a_mid_stream_disconnect_is_a_model_error_and_not_retried(
    server: FakeServer,
) -> None:
    """The connection drops after some text: ModelError, and no second request."""
    server.script(
        Reply(chunks=[message_start(), *text_block(0, "par", "tial")[:3]], cut=True),
        text_reply("again"),
    )
    seen: list[ModelEvent] = []
    with trio.fail_after(10), pytest.raises(ModelError) as info:
        await collect_into(seen, local(server))
    assert seen == [TextDelta("par"), TextDelta("tial")]
    assert str(info.value).startswith(f"the connection to {server.url}/v1/messages was lost")
    assert len(server.seen) == 1


# -- retries -----------------------------------------------------------------------------------


async def test_a_429_is_retried_after_retry_after(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 429 with retry-after: 3 is retried once, 3 s (trio time) later, then streams."""
    server.script(
        error_reply(429, "rate_limit_error", "Number of requests exceeded", retry_after="3"),
        text_reply("ok"),
    )
    events = await collect(local(server, timeout=None))
    assert events[0] == TextDelta("ok")
    first, second = server.seen
    assert 3.0 <= second.at - first.at < 3.1
    assert second.body == first.body


async def test_a_500_is_retried_after_a_jittered_backoff(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 500 without retry-after waits the first backoff step (0.5 s less up to 25%)."""
    server.script(error_reply(500, "api_error", "Internal server error"), text_reply("fine"))
    events = await collect(local(server, timeout=None))
    assert events[0] == TextDelta("fine")
    first, second = server.seen
    assert 0.375 <= second.at - first.at <= 0.5


async def test_a_529_overload_is_retried_then_named(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """Every attempt overloaded: the API's message, the advice and the number of attempts."""
    server.script(*(error_reply(529, "overloaded_error", "Overloaded") for _ in range(3)))
    with pytest.raises(
        ModelError,
        match=rf"^{server.url}/v1/messages is overloaded \(529 overloaded_error\): Overloaded; "
        r"try again later \(gave up after 3 attempts\)$",
    ):
        await collect(local(server, timeout=None, max_retries=2))
    assert len(server.seen) == 3


async def test_an_overloaded_event_before_any_output_is_retried(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 200 whose stream opens with an overloaded_error event is tried again."""
    overloaded = sse("error", error={"type": "overloaded_error", "message": "Overloaded"})
    server.script(Reply(chunks=[overloaded]), text_reply("ok"))
    events = await collect(local(server, timeout=None))
    assert events == [TextDelta("ok"), Finished(FinishReason.STOP, Usage(9, 5))]
    assert len(server.seen) == 2


async def test_an_overloaded_event_after_output_is_not_retried(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """After text was yielded, an error event ends the stream: a retry would repeat text."""
    overloaded = sse("error", error={"type": "overloaded_error", "message": "Overloaded"})
    server.script(Reply(chunks=[message_start(), *text_block(0, "so")[:2], overloaded]))
    seen: list[ModelEvent] = []
    with pytest.raises(
        ModelError,
        match=rf"^{server.url}/v1/messages reported an error mid-stream \(overloaded_error\): "
        r"Overloaded$",
    ):
        await collect_into(seen, local(server, timeout=None))
    assert seen == [TextDelta("so")]
    assert len(server.seen) == 1


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            error_reply(401, "authentication_error", "invalid x-api-key"),
            r"^http://127\.0\.0\.1:\d+/v1/messages refused the API key "
            r"\(401 authentication_error\): invalid x-api-key; check ANTHROPIC_API_KEY$",
        ),
        (
            error_reply(400, "invalid_request_error", "messages.0.content: Field required"),
            r"^http://127\.0\.0\.1:\d+/v1/messages refused the request "
            r"\(400 invalid_request_error\): messages\.0\.content: Field required$",
        ),
        (
            error_reply(404, "not_found_error", "model: claude-test"),
            r"^model 'claude-test' was not found at http://127\.0\.0\.1:\d+/v1/messages "
            r"\(404 not_found_error\): model: claude-test$",
        ),
    ],
    ids=["401", "400", "404"],
)
async def test_refusals_are_one_clear_line_and_not_retried(
    server: FakeServer, reply: Reply, message: str
) -> None:
    """401, 400 and 404 are reported at once with the API's message and what to do."""
    server.script(reply)
    with trio.fail_after(10), pytest.raises(ModelError, match=message) as info:
        await collect(local(server))
    assert "\n" not in str(info.value)
    assert len(server.seen) == 1


async def test_an_unreachable_endpoint_names_the_url(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nothing listens on the port: after the retries, a message naming the URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = AnthropicModel("m", base_url=f"http://127.0.0.1:{port}", timeout=None)
    with pytest.raises(
        ModelError,
        match=rf"^cannot reach http://127\.0\.0\.1:{port}/v1/messages: .*; is the server "
        r"running\? \(set ANTHROPIC_BASE_URL or base_url= to change the endpoint\) "
        r"\(gave up after 4 attempts\)$",
    ):
        await collect(model)


async def test_a_shared_client_is_used_and_left_open() -> None:
    """http_client= sends through the caller's client, which stays open after the stream."""
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        return httpx.Response(200, content=b"".join(text_reply("ok").chunks))

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = AnthropicModel("m", base_url="http://mock", api_key="k", http_client=client)
        assert (await collect(model))[0] == TextDelta("ok")
        assert (await collect(model))[0] == TextDelta("ok")
        assert not client.is_closed
    assert paths == ["/v1/messages", "/v1/messages"]


async def test_a_timeout_after_some_text_is_not_retried() -> None:
    """The answer stalls mid-stream: a ModelError saying so, after the text, no retry."""
    calls: list[httpx.Request] = []

    async def body() -> AsyncIterator[bytes]:
        yield b"".join([message_start(), *text_block(0, "par")[:2]])
        raise httpx.ReadTimeout("")

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200, content=body())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = AnthropicModel("m", base_url="http://mock", http_client=client, timeout=30)
        seen: list[ModelEvent] = []
        with pytest.raises(
            ModelError,
            match=r"^http://mock/v1/messages stopped sending mid-answer "
            r"\(nothing within 30 s\); try again$",
        ):
            await collect_into(seen, model)
    assert seen == [TextDelta("par")]
    assert len(calls) == 1


# -- cancellation ------------------------------------------------------------------------------


async def test_cancelling_a_slow_stream_closes_the_connection(server: FakeServer) -> None:
    """Cancelled after the first delta: the stream closes and the server sees the close."""
    server.script(Reply(chunks=[message_start(), *text_block(0, "first ")[:2]], hang=True))
    with trio.fail_after(10):
        with trio.CancelScope() as scope:
            async with aclosing(local(server).stream(REQUEST)) as stream:
                async for e in stream:
                    assert e == TextDelta("first ")
                    scope.cancel()
        assert scope.cancelled_caught
        await server.seen[0].closed.wait()


async def test_leaving_a_stream_early_closes_the_connection(server: FakeServer) -> None:
    """A consumer that stops after one delta (aclosing) closes the response at once."""
    server.script(Reply(chunks=[message_start(), *text_block(0, "first ", "more")], hang=True))
    with trio.fail_after(10):
        async with aclosing(local(server).stream(REQUEST)) as stream:
            async for e in stream:
                assert e == TextDelta("first ")
                break
        await server.seen[0].closed.wait()


async def test_cancelling_a_turn_closes_the_connection(server: FakeServer, tmp_path: Path) -> None:
    """agent.cancel() mid-stream ends the turn cancelled, and the server sees the close."""
    server.script(Reply(chunks=[message_start(), *text_block(0, "thinking ")[:2]], hang=True))
    with trio.fail_after(10):
        async with ag.open_runtime(store=JsonlStore(tmp_path), model=local(server)) as root:
            agent = (await root.agents.create()).agent
            got_text = trio.Event()
            root.on(ag.AgentOutput, lambda _: got_text.set())
            agent.prompt("go")
            await got_text.wait()
            agent.cancel()
            await agent.when_idle()
            await server.seen[0].closed.wait()
            (ended,) = [r for r in agent.session.records if isinstance(r, TurnEnded)]
            assert ended.stop_reason is StopReason.CANCELLED


# -- end to end --------------------------------------------------------------------------------


@attrs.frozen
class LookupParams:
    key: str


async def lookup(call: ag.ToolContext, params: LookupParams) -> str:
    return f"{params.key} = 42"


LOOKUP = ag.Tool("lookup", "Look a key up.", LookupParams, lookup)


async def test_an_agent_round_trips_a_tool_call_through_the_spec(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spec-built model: tool_use, the tool runs, its tool_result goes back in a user
    message after the assistant's tool_use, and the answer ends the turn."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-spec")
    server.script(
        Reply(
            chunks=[
                message_start(30),
                *text_block(0, "Let me look."),
                *tool_block(1, "toolu_1", "lookup", '{"key": ', '"x"}'),
                *message_end("tool_use", 12),
            ]
        ),
        text_reply("x ", "is ", "42"),
    )
    spec = f"anthropic:claude-test?base_url={server.url}&max_tokens=99&cache=0"
    model = model_from_spec(spec)
    with trio.fail_after(10):
        async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
            await root.plugin(Tools(LOOKUP))
            agent = (await root.agents.create(instructions="Answer from tools.")).agent
            agent.prompt("what is x?")
            await agent.when_idle()
            records = agent.session.records
    (result,) = [r for r in records if isinstance(r, ToolCallEnded)]
    assert (result.content, result.is_error) == ("x = 42", False)
    assert [r.stop_reason for r in records if isinstance(r, TurnEnded)] == [StopReason.COMPLETED]

    first, second = (s.body for s in server.seen)
    assert server.seen[0].headers["x-api-key"] == "sk-ant-spec"
    assert first["max_tokens"] == 99
    assert first["system"] == "Answer from tools."
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "what is x?"}]}
    ]
    assert first["tools"][0]["name"] == "lookup"
    assert first["tools"][0]["input_schema"]["properties"]["key"]["type"] == "string"
    assert second["messages"] == [
        *first["messages"],
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "x"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 42"}],
        },
    ]


async def run_command(*args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "NO_COLOR": "1", "ANTHROPIC_API_KEY": "sk-ant-cli"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    with trio.fail_after(60):
        return await trio.run_process(
            [str(TRIO_AGENTS), *args], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )  # fmt: skip


async def test_the_command_runs_a_prompt_on_an_anthropic_spec(
    server: FakeServer, tmp_path: Path
) -> None:
    """`trio-agents run --model anthropic:...` prints the streamed answer; a refused key is
    one line on stderr and a failing exit."""
    server.script(text_reply("pong"), error_reply(401, "authentication_error", "invalid x-api-key"))
    spec = f"anthropic:claude-test?base_url={server.url}&max_retries=0&cache=0"
    store = str(tmp_path / "sessions")
    done = await run_command("run", "ping", "--model", spec, "--store", store)
    assert (done.returncode, done.stdout) == (0, b"pong\n"), done.stderr.decode()
    assert server.seen[0].headers["x-api-key"] == "sk-ant-cli"
    assert server.seen[0].body["messages"][-1]["content"] == [{"type": "text", "text": "ping"}]
    done = await run_command("run", "ping", "--model", spec, "--store", store)
    assert done.returncode != 0
    (line,) = done.stderr.decode().splitlines()
    assert re.search(r"refused the API key \(401 authentication_error\): invalid x-api-key; "
                     r"check ANTHROPIC_API_KEY$", line)  # fmt: skip


# -- specs -------------------------------------------------------------------------------------


def test_the_anthropic_scheme_builds_the_model_with_its_parameters() -> None:
    """anthropic:MODEL?base_url=...&max_tokens=...&timeout=...&max_retries=... configures it."""
    model = model_from_spec(
        "anthropic:claude-haiku-4-5?base_url=http://127.0.0.1:8080/&max_tokens=1024"
        "&timeout=5&max_retries=0"
    )
    assert isinstance(model, AnthropicModel)
    assert (model.name, model.url, model.max_tokens) == (
        "claude-haiku-4-5",
        "http://127.0.0.1:8080/v1/messages",
        1024,
    )
    assert AnthropicModel("m", base_url="http://x").max_tokens == 8192


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (
            "anthropic:m?temperature=1",
            r"anthropic takes base_url, max_tokens, timeout, deadline, max_line, max_retries, "
            r"max_answer, context_window and cache \(got 'temperature'\)$",
        ),
        ("anthropic:m?cache=yes", r"cache must be 0 or 1, got 'yes'$"),
        ("anthropic:m?max_tokens=0", r"max_tokens must be a whole number >= 1, got '0'$"),
        ("anthropic:m?max_tokens=lots", r"max_tokens must be a whole number >= 1, got 'lots'$"),
        ("anthropic:m?timeout=0", r"timeout must be a number of seconds > 0, got '0'$"),
        ("anthropic:m?max_retries=-1", r"max_retries must be a whole number >= 0, got '-1'$"),
        ("anthropic:m?base_url=localhost", r"base_url must be an http:// or https:// URL"),
        ("anthropic:m?max_tokens=1&max_tokens=2", r"a repeated 'max_tokens'"),
    ],
)
def test_bad_anthropic_specs_say_what_is_wrong(spec: str, problem: str) -> None:
    """A bad anthropic spec is a ModelSpecError naming the problem."""
    quoted = re.escape(repr(spec))
    with pytest.raises(ModelSpecError, match=rf"^invalid model spec {quoted}: .*{problem}"):
        model_from_spec(spec)


def test_an_anthropic_spec_without_a_model_name_is_refused() -> None:
    """'anthropic:?...' has parameters but no model: the message shows the form to write."""
    with pytest.raises(
        ModelSpecError,
        match=r"^model spec 'anthropic:\?max_tokens=1' names no model; write anthropic:MODEL$",
    ):
        model_from_spec("anthropic:?max_tokens=1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, r"^max_tokens must be a whole number >= 1; got 0$"),
        ({"timeout": 0.0}, r"^timeout must be a number of seconds > 0 or None; got 0\.0$"),
        ({"max_retries": -1}, r"^max_retries must be >= 0; got -1$"),
    ],
)
def test_bad_constructor_arguments_are_value_errors(kwargs: dict[str, Any], message: str) -> None:
    """The constructor refuses values the API or the retry loop cannot use."""
    with pytest.raises(ValueError, match=message):
        AnthropicModel("m", **kwargs)


# -- live --------------------------------------------------------------------------------------


@pytest.mark.skipif(
    not os.environ.get("ANTHROPIC_API_KEY"),
    reason="live test of the real endpoint: set ANTHROPIC_API_KEY (and optionally "
    "ANTHROPIC_MODEL, ANTHROPIC_BASE_URL) to run it",
)
async def test_live_endpoint_streams_an_answer() -> None:
    """The configured endpoint answers a short prompt with text and a stop."""
    model = AnthropicModel(os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5"), max_tokens=64)
    request = ModelRequest(messages=(UserText("Reply with the single word: pong"),))
    with trio.fail_after(120):
        events = await collect(model, request)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "pong" in text.lower()
    assert isinstance(events[-1], Finished)
    assert events[-1].reason is FinishReason.STOP
