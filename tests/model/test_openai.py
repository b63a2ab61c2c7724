"""OpenAIChatModel against a real HTTP server on 127.0.0.1, run in-process under trio.

The server is a small raw-socket HTTP/1.1 server speaking the chat-completions streaming
format (chunked bodies, one request per connection). Tests that wait on retries use the
autojump clock with ``timeout=None`` on the model: then no deadline but the retry's own sleep
exists, and the clock can only jump there. Other socket tests run on real time with
``trio.fail_after`` as a safety net (no sleeps). Pure retry bookkeeping uses httpx's
``MockTransport``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import FakeServer, Reply, Tools, serve
from trio_agents.model import (
    Finished,
    FinishReason,
    ModelError,
    ModelEvent,
    ModelRequest,
    OpenAIChatModel,
    TextDelta,
    ToolCallRequested,
    Usage,
    UserText,
)
from trio_agents.session import JsonlStore, StopReason, ToolCallEnded, TurnEnded

# -- the server --------------------------------------------------------------------------------


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeServer:
    return await serve(nursery, "/v1")


# -- stream helpers ----------------------------------------------------------------------------


def event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def delta(content: str | None = None, finish: str | None = None, **extra: Any) -> bytes:
    body: dict[str, Any] = dict(extra)
    if content is not None:
        body["content"] = content
    return event({"choices": [{"index": 0, "delta": body, "finish_reason": finish}]})


def call(index: int, **fields: Any) -> bytes:
    part: dict[str, Any] = {"index": index, "function": {}}
    if "id" in fields:
        part.update(id=fields["id"], type="function")
    for key in ("name", "arguments"):
        if key in fields:
            part["function"][key] = fields[key]
    return delta(tool_calls=[part])


def usage(prompt: int, completion: int) -> bytes:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return event({"choices": [], "usage": counts})


DONE = b"data: [DONE]\n\n"


def text_reply(*words: str, finish: str = "stop") -> Reply:
    return Reply(chunks=[*(delta(w) for w in words), delta(None, finish), usage(3, 2), DONE])


def error_reply(status: int, message: str, code: str | None = None, **headers: str) -> Reply:
    body = json.dumps({"error": {"message": message, "type": "x", "code": code}}).encode()
    return Reply(status, tuple((k.replace("_", "-"), v) for k, v in headers.items()), [body])


REQUEST = ModelRequest(messages=(UserText("hi"),))


async def collect(model: OpenAIChatModel, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    async with aclosing(model.stream(request)) as stream:
        return [e async for e in stream]


async def collect_into(events: list[ModelEvent], model: OpenAIChatModel) -> None:
    async with aclosing(model.stream(REQUEST)) as stream:
        async for e in stream:
            events.append(e)


def local(server: FakeServer, **kwargs: Any) -> OpenAIChatModel:
    return OpenAIChatModel("test-model", base_url=server.url, **kwargs)


# -- streaming ---------------------------------------------------------------------------------


async def test_text_streams_as_deltas_with_usage(server: FakeServer) -> None:
    """Each content delta is a TextDelta; the stream ends with Finished(stop, usage)."""
    server.script(text_reply("Hel", "lo", "!"))
    with trio.fail_after(10):
        events = await collect(local(server))
    assert events == [
        TextDelta("Hel"),
        TextDelta("lo"),
        TextDelta("!"),
        Finished(FinishReason.STOP, Usage(3, 2)),
    ]
    (seen,) = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert "authorization" not in seen.headers  # a local server gets no key it did not need


async def test_tool_call_deltas_across_events_are_assembled(server: FakeServer) -> None:
    """Id and name first, then argument fragments over several events, parsed at the end."""
    server.script(
        Reply(
            chunks=[
                delta(role="assistant", content=None),
                call(0, id="call_a", name="bash", arguments=""),
                call(0, arguments='{"comm'),
                call(0, arguments='and": "ec'),
                call(1, id="call_b", name="now", arguments=""),
                call(0, arguments='ho hi"}'),
                delta(None, "tool_calls"),
                usage(10, 7),
                DONE,
            ]
        )
    )
    with trio.fail_after(10):
        events = await collect(local(server))
    assert events == [
        ToolCallRequested("call_a", "bash", {"command": "echo hi"}),
        ToolCallRequested("call_b", "now", {}),
        Finished(FinishReason.TOOL_CALLS, Usage(10, 7)),
    ]


async def test_the_environment_configures_endpoint_and_key(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL and OPENAI_API_KEY are used when no argument is given."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server.script(text_reply("ok"))
    with trio.fail_after(10):
        await collect(OpenAIChatModel("m"))
    assert server.seen[0].headers["authorization"] == "Bearer sk-test"
    assert server.seen[0].path == "/v1/chat/completions"


async def test_a_missing_key_for_the_openai_endpoint_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a key, the default endpoint is not even contacted."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(
        ModelError, match=r"^OPENAI_API_KEY is not set; export it or pass api_key=$"
    ):
        await collect(OpenAIChatModel("gpt-4o-mini"))


async def test_a_mid_stream_disconnect_is_a_model_error_and_not_retried(
    server: FakeServer,
) -> None:
    """The connection drops after some text: ModelError, and no second request."""
    server.script(Reply(chunks=[delta("par"), delta("tial")], cut=True), text_reply("again"))
    seen: list[ModelEvent] = []
    with trio.fail_after(10), pytest.raises(ModelError) as info:
        await collect_into(seen, local(server))
    assert seen == [TextDelta("par"), TextDelta("tial")]
    assert str(info.value).startswith(f"the connection to {server.url}/chat/completions was lost")
    assert len(server.seen) == 1


async def test_a_body_ending_before_the_finish_is_a_model_error(server: FakeServer) -> None:
    """A complete body that never said finish_reason or [DONE] is a broken stream too."""
    server.script(Reply(chunks=[delta("half")]))
    with trio.fail_after(10), pytest.raises(ModelError, match=r"was lost mid-stream"):
        await collect(local(server, max_retries=0))


# -- retries -----------------------------------------------------------------------------------


async def test_a_429_is_retried_after_retry_after(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 429 with Retry-After: 2 is retried once, 2 s (trio time) later, then streams."""
    server.script(error_reply(429, "Rate limit reached", retry_after="2"), text_reply("ok"))
    events = await collect(local(server, timeout=None))
    assert events[0] == TextDelta("ok")
    first, second = server.seen
    assert 2.0 <= second.at - first.at < 2.1
    assert second.body == first.body


async def test_a_500_is_retried_after_a_jittered_backoff(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 500 without Retry-After waits the first backoff step (0.5 s less up to 25%)."""
    server.script(error_reply(500, "boom"), text_reply("fine"))
    events = await collect(local(server, timeout=None))
    assert events[0] == TextDelta("fine")
    first, second = server.seen
    assert 0.375 <= second.at - first.at <= 0.5


async def test_retries_give_up_with_the_last_error(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """Every attempt failing ends with the server's message and the number of attempts."""
    server.script(*(error_reply(503, "overloaded") for _ in range(3)))
    with pytest.raises(
        ModelError,
        match=r"failed with HTTP 503: overloaded \(gave up after 3 attempts\)$",
    ):
        await collect(local(server, timeout=None, max_retries=2))
    assert len(server.seen) == 3


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            error_reply(401, "Incorrect API key provided"),
            r"^http://127\.0\.0\.1:\d+/v1/chat/completions refused the API key "
            r"\(401 Unauthorized\): Incorrect API key provided; check OPENAI_API_KEY$",
        ),
        (
            error_reply(404, "The model `test-model` does not exist", "model_not_found"),
            r"^model 'test-model' was not found at http://127\.0\.0\.1:\d+/v1/chat/completions "
            r"\(404\): The model `test-model` does not exist$",
        ),
        (
            error_reply(
                400,
                "This model's maximum context length is 8192 tokens.",
                "context_length_exceeded",
            ),
            r"^the conversation is too long for model 'test-model' \(context_length_exceeded\): "
            r"This model's maximum context length is 8192 tokens\.; start a new session",
        ),
    ],
    ids=["401", "404", "context-length"],
)
async def test_refusals_are_one_clear_message_and_not_retried(
    server: FakeServer, reply: Reply, message: str
) -> None:
    """401, 404 and context-length errors are reported at once, with what to do."""
    server.script(reply)
    with trio.fail_after(10), pytest.raises(ModelError, match=message):
        await collect(local(server))
    assert len(server.seen) == 1


async def test_an_unreachable_endpoint_names_the_url(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nothing listens on the port: after the retries, a message naming the URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", timeout=None)
    with pytest.raises(
        ModelError,
        match=rf"^cannot reach http://127\.0\.0\.1:{port}/v1/chat/completions: .*; is the server "
        r"running\? \(set OPENAI_BASE_URL or base_url= to change the endpoint\) "
        r"\(gave up after 4 attempts\)$",
    ):
        await collect(model)


def mock_model(handler: Any, **kwargs: Any) -> tuple[OpenAIChatModel, httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = OpenAIChatModel("m", base_url="http://mock/v1", http_client=client, **kwargs)
    return model, client


async def test_connection_errors_are_retried_with_growing_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two refused connections, then an answer: waits of about 0.5 s, then 1 s."""
    times: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        times.append(trio.current_time())
        if len(times) < 3:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, content=b"".join(text_reply("ok").chunks))

    model, client = mock_model(handler)
    async with client:
        events = await collect(model)
    assert events[0] == TextDelta("ok")
    assert 0.375 <= times[1] - times[0] <= 0.5
    assert 0.75 <= times[2] - times[1] <= 1.0


async def test_retry_after_ms_and_max_retries_zero(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """retry-after-ms is honoured; with max_retries=0 the first failure is final."""
    times: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        times.append(trio.current_time())
        if len(times) == 1:
            return httpx.Response(429, headers={"retry-after-ms": "1500"}, json={})
        return httpx.Response(200, content=b"".join(text_reply("ok").chunks))

    model, client = mock_model(handler)
    async with client:
        await collect(model)
        assert times[1] - times[0] == pytest.approx(1.5)
        times.clear()
        once = OpenAIChatModel("m", base_url="http://mock/v1", http_client=client, max_retries=0)
        with pytest.raises(ModelError, match=r"rate-limiting the request \(429\)$"):
            await collect(once)
    assert len(times) == 1


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            r"^the connection to http://mock/v1/chat/completions failed: Server disconnected "
            r"without sending a response\. \(gave up after 2 attempts\)$",
        ),
        (
            httpx.ReadTimeout(""),
            r"^http://mock/v1/chat/completions did not answer within 60 s \(ReadTimeout\) "
            r"\(gave up after 2 attempts\)$",
        ),
    ],
    ids=["disconnect", "timeout"],
)
async def test_failures_before_any_output_are_retried_then_named(
    error: httpx.RequestError, message: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A dropped or silent connection before any output is retried, then explained."""
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(trio.current_time())
        raise error

    model, client = mock_model(handler, max_retries=1)
    async with client:
        with pytest.raises(ModelError, match=message):
            await collect(model)
    assert len(calls) == 2


@attrs.define
class Body(httpx.AsyncByteStream):
    """A response body of given chunks, optionally ending in an error; records its close."""

    chunks: Sequence[bytes]
    then: Exception | None = None
    sent: int = 0
    closed: bool = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.sent += 1
            yield chunk
        if self.then is not None:
            raise self.then

    async def aclose(self) -> None:
        self.closed = True


async def test_a_timeout_after_some_text_is_not_retried() -> None:
    """The answer stalls mid-stream: a ModelError saying so, after the text, no retry."""
    bodies: list[Body] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(Body([delta("par")], then=httpx.ReadTimeout("")))
        return httpx.Response(200, stream=bodies[-1])

    model, client = mock_model(handler, timeout=30)
    seen: list[ModelEvent] = []
    async with client:
        with pytest.raises(
            ModelError,
            match=r"^http://mock/v1/chat/completions stopped sending mid-answer "
            r"\(nothing within 30 s\); try again$",
        ):
            await collect_into(seen, model)
    assert seen == [TextDelta("par")]
    assert len(bodies) == 1
    assert bodies[0].closed


async def test_an_undecodable_body_is_a_model_error_and_not_retried() -> None:
    """A body that is not the gzip its content-encoding claims is refused at once."""
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=b"plain")

    model, client = mock_model(handler)
    async with client:
        with pytest.raises(
            ModelError, match=r"^cannot decode the answer of http://mock/v1/chat/completions: "
        ):
            await collect(model)
    assert len(calls) == 1


async def test_the_body_after_done_is_drained_unread_and_closed() -> None:
    """Chunks after [DONE] are not parsed (garbage there is no error); the body is closed."""
    reply = text_reply("ok")
    body = Body([*reply.chunks, b"data: garbage\n\n", b"data: more garbage\n\n"])
    model, client = mock_model(lambda request: httpx.Response(200, stream=body))
    async with client:
        events = await collect(model)
    assert events == [TextDelta("ok"), Finished(FinishReason.STOP, Usage(3, 2))]
    assert body.sent == len(body.chunks)
    assert body.closed


async def test_an_https_endpoint_loads_the_ca_bundle_once_per_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The TLS context is made off the loop on the first https stream and then reused;
    an http endpoint never loads it."""
    loads: list[bool] = []
    create = httpx.create_ssl_context

    def counting_create() -> ssl.SSLContext:
        loads.append(trio.lowlevel.in_trio_run())
        return create()

    monkeypatch.setattr(httpx, "create_ssl_context", counting_create)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    secure = OpenAIChatModel("m", base_url=f"https://127.0.0.1:{port}/v1", max_retries=0)
    plain = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with trio.fail_after(10):
        for model in (secure, secure, plain):
            with pytest.raises(ModelError, match=rf"^cannot reach {re.escape(model.url)}: "):
                await collect(model)
    assert loads == [False]  # once, and in a worker thread


async def test_a_base_url_that_is_not_http_is_refused_at_once() -> None:
    """ftp:// is not retried: the message says what base_url must be."""
    model = OpenAIChatModel("m", base_url="ftp://127.0.0.1/v1")
    with pytest.raises(ModelError, match=r"base_url must start with http:// or https://$"):
        await collect(model)


# -- cancellation ------------------------------------------------------------------------------


async def test_cancelling_a_slow_stream_closes_the_connection(server: FakeServer) -> None:
    """Cancelled after the first delta: the stream closes and the server sees the close."""
    server.script(Reply(chunks=[delta("first ")], hang=True))
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
    server.script(Reply(chunks=[delta("first "), delta("second")], hang=True))
    with trio.fail_after(10):
        async with aclosing(local(server).stream(REQUEST)) as stream:
            async for e in stream:
                assert e == TextDelta("first ")
                break
        await server.seen[0].closed.wait()


async def test_cancelling_a_turn_leaves_no_request_running(
    server: FakeServer, tmp_path: Path
) -> None:
    """agent.cancel() mid-stream ends the turn cancelled, and the connection is closed."""
    server.script(Reply(chunks=[delta("thinking ")], hang=True))
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


async def test_an_agent_round_trips_a_tool_call_and_resumes_the_history(
    server: FakeServer, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Tool call, tool result, answer; after resume the server gets the same history."""
    server.script(
        Reply(
            chunks=[
                call(0, id="call_1", name="lookup", arguments='{"ke'),
                call(0, arguments='y": "x"}'),
                delta(None, "tool_calls"),
                DONE,
            ]
        ),
        text_reply("x ", "is ", "42"),
        text_reply("still 42"),
    )
    model = local(server, timeout=None)
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        await root.plugin(Tools(LOOKUP))
        handle = await root.agents.create(session_id="e2e")
        handle.agent.prompt("what is x?")
        await handle.agent.when_idle()
        (result,) = [r for r in handle.agent.session.records if isinstance(r, ToolCallEnded)]
        assert (result.content, result.is_error) == ("x = 42", False)
        await handle.dispose()
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        await root.plugin(Tools(LOOKUP))
        agent = (await root.agents.resume("e2e")).agent
        agent.prompt("and now?")
        await agent.when_idle()
        ends = [r.stop_reason for r in agent.session.records if isinstance(r, TurnEnded)]
        assert ends == [StopReason.COMPLETED, StopReason.COMPLETED]

    first, second, third = (s.body for s in server.seen)
    assert first["messages"] == [{"role": "user", "content": "what is x?"}]
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup"]
    assert second["messages"] == [
        *first["messages"],
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"key": "x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "x = 42"},
    ]
    assert third["messages"] == [
        *second["messages"],
        {"role": "assistant", "content": "x is 42"},
        {"role": "user", "content": "and now?"},
    ]


# -- live --------------------------------------------------------------------------------------


@pytest.mark.skipif(
    not os.environ.get("OPENAI_API_KEY"),
    reason="live test of the real endpoint: set OPENAI_API_KEY (and optionally OPENAI_MODEL, "
    "OPENAI_BASE_URL) to run it",
)
async def test_live_endpoint_streams_an_answer() -> None:
    """The configured endpoint answers a short prompt with text and a stop."""
    model = OpenAIChatModel(os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    request = ModelRequest(messages=(UserText("Reply with the single word: pong"),))
    with trio.fail_after(120):
        events = await collect(model, request)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "pong" in text.lower()
    assert isinstance(events[-1], Finished)
    assert events[-1].reason is FinishReason.STOP
