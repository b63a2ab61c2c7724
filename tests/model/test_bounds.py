"""The time and memory bounds of the HTTP providers (issue #18), against a loopback server.

Each test runs on both providers (OpenAI-compatible and Anthropic), as they share one
driver (``model/_retry.py``). The server is ``support.FakeServer``, in-process under trio;
what the client took from the network is counted by ``support.CountingTransport`` (httpx's
own transport), so "memory stays bounded" is checked as "the client read at most the bound
plus one network read", not by sampling RSS.

Time: httpx on trio uses real sockets, but its timeouts and our deadline are trio deadlines,
so the autojump clock drives them: a server that sleeps 2 s between keep-alives makes every
task block, and the clock jumps to the earliest deadline (the server's next keep-alive, the
idle timeout, or the overall deadline), in virtual time and deterministically. Tests with
no waiting at all run on real time with ``trio.fail_after`` as a safety net.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

from tests.helpers.answer_streams import WIRES, Wire
from tests.helpers.support import CountingTransport, FakeServer, Reply, serve
from trio_agents.model import (
    AnthropicModel,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelSpecError,
    OpenAIChatModel,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    UserText,
    model_from_spec,
)
from trio_agents.model._http import ERROR_BODY_LIMIT
from trio_agents.model._protocol import Model

REQUEST = ModelRequest(messages=(UserText("hi"),))
NETWORK_READ = 64 * 1024  # the most httpcore takes from a socket at once


@attrs.frozen
class Provider:
    """What a test needs to know of one provider."""

    scheme: str
    kind: Callable[..., Model]
    prefix: str  # the path of the API root on the server
    path: str  # the endpoint below it
    first_text: tuple[bytes, ...]  # events that stream the text "hi"
    keep_alive: bytes

    def spec(self, server: FakeServer, query: str) -> str:
        return f"{self.scheme}:test-model?base_url={server.url}&{query}"

    def model(
        self, server: FakeServer, query: str, client: httpx.AsyncClient | None = None
    ) -> Model:
        """The model of the spec with ``query``; through ``client`` if given (a spec cannot
        name a client: then the constructor gets the same values)."""
        if client is None:
            return model_from_spec(self.spec(server, query))
        return self.kind("test-model", base_url=server.url, http_client=client, **_kwargs(query))


def _kwargs(query: str) -> dict[str, Any]:
    pairs = (p.split("=") for p in query.split("&"))
    return {k: (float(v) if k in ("timeout", "deadline") else int(v)) for k, v in pairs}


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


TEXT_HI = {"type": "text_delta", "text": "hi"}
OPENAI = Provider(
    "openai",
    OpenAIChatModel,
    "/v1",
    "/chat/completions",
    (_sse({"choices": [{"index": 0, "delta": {"content": "hi"}}]}),),
    b": keep-alive\n\n",
)
ANTHROPIC = Provider(
    "anthropic",
    AnthropicModel,
    "",
    "/v1/messages",
    (
        _sse({"type": "message_start", "message": {"usage": {"input_tokens": 1}}}),
        _sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        _sse({"type": "content_block_delta", "index": 0, "delta": TEXT_HI}),
    ),
    b'event: ping\ndata: {"type": "ping"}\n\n',
)


@pytest.fixture(params=[OPENAI, ANTHROPIC], ids=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> Provider:
    value: Provider = request.param
    return value


@pytest.fixture
async def server(nursery: trio.Nursery, provider: Provider) -> FakeServer:
    return await serve(nursery, provider.prefix)


async def collect_into(events: list[ModelEvent], model: Model) -> None:
    async with aclosing(model.stream(REQUEST)) as stream:
        async for event in stream:
            events.append(event)


# -- memory ------------------------------------------------------------------------------------


async def test_an_endless_error_body_is_read_up_to_its_bound(
    server: FakeServer, provider: Provider
) -> None:
    """A 500 whose body never ends: the client reads 64 KiB (plus one network read), closes
    the connection, and the error quotes the start of the body and says it was cut."""
    server.script(Reply(500, chunks=[b"Internal trouble: "], repeat=b"x" * 16384))
    counting = CountingTransport()
    async with httpx.AsyncClient(transport=counting) as client:
        model = provider.model(server, "max_retries=0", client)
        with trio.fail_after(10), pytest.raises(ModelError) as info:
            await collect_into([], model)
        await server.seen[0].closed.wait()
    assert ERROR_BODY_LIMIT < counting.received <= ERROR_BODY_LIMIT + NETWORK_READ
    message = str(info.value)
    assert message.startswith(f"{server.url}{provider.path} failed with ")
    assert "HTTP 500: Internal trouble: xxx" in message
    assert message.endswith("... (the error body was cut at 65536 bytes)")


async def test_a_retried_error_body_is_bounded_on_every_attempt(
    server: FakeServer, provider: Provider, autojump_clock: trio.testing.MockClock
) -> None:
    """Each retried 500 costs one bounded read; the attempts are counted in the message."""
    endless = Reply(503, chunks=[b"busy "], repeat=b"y" * 16384)
    server.script(endless, endless)
    counting = CountingTransport()
    async with httpx.AsyncClient(transport=counting) as client:
        model = provider.model(server, "max_retries=1", client)
        with pytest.raises(ModelError, match=r"cut at 65536 bytes\) \(gave up after 2 attempts\)$"):
            await collect_into([], model)
    assert counting.received <= 2 * (ERROR_BODY_LIMIT + NETWORK_READ)


async def test_an_endless_line_is_refused_at_the_bound(
    server: FakeServer, provider: Provider
) -> None:
    """After some text, a line that never ends: a ModelError once max_line characters are
    held, the client having read no more than that plus one network read."""
    server.script(Reply(chunks=[*provider.first_text, b"data: "], repeat=b"z" * 16384))
    counting = CountingTransport()
    seen: list[ModelEvent] = []
    async with httpx.AsyncClient(transport=counting) as client:
        model = provider.model(server, "max_line=100000&max_retries=0", client)
        with trio.fail_after(10), pytest.raises(ModelError) as info:
            await collect_into(seen, model)
        await server.seen[0].closed.wait()
    assert seen == [TextDelta("hi")]
    assert counting.received <= 100_000 + NETWORK_READ
    assert str(info.value) == (
        f"{server.url}{provider.path} sent a line longer than 100000 characters in its event "
        "stream; if its events are really this large, raise max_line= "
        "(?max_line=N in the model spec)"
    )


async def test_an_event_of_endless_data_lines_is_refused_at_the_bound(
    server: FakeServer, provider: Provider
) -> None:
    """Short data lines with no blank line to end the event: refused at max_line too."""
    server.script(Reply(chunks=provider.first_text, repeat=b"data: " + b"w" * 1000 + b"\n"))
    with (
        trio.fail_after(10),
        pytest.raises(
            ModelError, match=r" sent the data of an event longer than 50000 characters in its "
        ),
    ):
        await collect_into([], provider.model(server, "max_line=50000&max_retries=0"))


# -- the answer ------------------------------------------------------------------------------


def wire_of(provider: Provider) -> Wire:
    return next(w for w in WIRES if w.scheme == provider.scheme)


def answer_too_long(server: FakeServer, provider: Provider, limit: int) -> str:
    return (
        rf"^{re.escape(server.url + provider.path)} sent an answer longer than {limit} "
        r"characters \(text, reasoning and tool-call arguments together\), so the turn ended "
        r"there; if answers are really this large, raise max_answer= \(\?max_answer=N in the "
        r"model spec\)$"
    )


async def test_an_endless_answer_is_cut_at_max_answer(
    server: FakeServer, provider: Provider
) -> None:
    """Text deltas of 10,000 characters forever: the stream yields the pieces that fit in
    max_answer (never one character more), then a ModelError naming the bound; the client
    read little more than the bound."""
    wire = wire_of(provider)
    server.script(Reply(chunks=wire.opening(), repeat=wire.text("a" * 10_000)))
    counting = CountingTransport()
    seen: list[ModelEvent] = []
    async with httpx.AsyncClient(transport=counting) as client:
        model = provider.model(server, "max_answer=95000&max_retries=0", client)
        with (
            trio.fail_after(10),
            pytest.raises(ModelError, match=answer_too_long(server, provider, 95000)),
        ):
            await collect_into(seen, model)
        await server.seen[0].closed.wait()
    assert seen == [TextDelta("a" * 10_000)] * 9
    assert counting.received <= 95_000 + 2 * NETWORK_READ


async def test_a_tool_call_of_endless_arguments_is_cut_at_max_answer(
    server: FakeServer, provider: Provider
) -> None:
    """Some text, then a tool call whose arguments never end: the text and the arguments
    count together, and the call is never delivered."""
    wire = wire_of(provider)
    opening = [*wire.opening(), wire.text("b" * 30_000), wire.tool_start("bash")]
    start = '{"command": "'
    server.script(
        Reply(chunks=[*opening, wire.tool_piece(start)], repeat=wire.tool_piece("x" * 8192))
    )
    seen: list[ModelEvent] = []
    with (
        trio.fail_after(10),
        pytest.raises(ModelError, match=answer_too_long(server, provider, 80000)),
    ):
        await collect_into(seen, provider.model(server, "max_answer=80000&max_retries=0"))
    await server.seen[0].closed.wait()
    assert seen == [TextDelta("b" * 30_000)]
    assert not any(isinstance(event, ToolCallRequested) for event in seen)


async def test_reasoning_counts_against_max_answer(server: FakeServer, provider: Provider) -> None:
    """Reasoning is streamed as thoughts, not the answer, and endless reasoning is cut at the
    bound all the same."""
    wire = wire_of(provider)
    opening = [*wire.opening(), wire.text("hi"), *wire.reasoning_start()]
    server.script(Reply(chunks=opening, repeat=wire.reasoning("r" * 4096)))
    seen: list[ModelEvent] = []
    with (
        trio.fail_after(10),
        pytest.raises(ModelError, match=answer_too_long(server, provider, 50000)),
    ):
        await collect_into(seen, provider.model(server, "max_answer=50000&max_retries=0"))
    assert seen[0] == TextDelta("hi")
    thoughts = seen[1:]
    assert all(isinstance(event, ThoughtDelta) for event in thoughts)
    assert sum(len(event.text) for event in thoughts if isinstance(event, ThoughtDelta)) <= 50000


async def test_an_answer_of_exactly_max_answer_is_whole(
    server: FakeServer, provider: Provider
) -> None:
    """The bound is inclusive: text and tool arguments that add up to max_answer arrive whole."""
    wire = wire_of(provider)
    arguments = '{"command": "' + "y" * 37 + '"}'  # 52 characters
    chunks = [
        *wire.opening(),
        wire.text("z" * 48),
        wire.tool_start("bash"),
        wire.tool_piece(arguments[:20]),
        wire.tool_piece(arguments[20:]),
        *wire.closing("tool_calls"),
    ]
    server.script(Reply(chunks=chunks))
    seen: list[ModelEvent] = []
    with trio.fail_after(10):
        await collect_into(seen, provider.model(server, "max_answer=100&max_retries=0"))
    assert seen[0] == TextDelta("z" * 48)
    assert isinstance(seen[1], ToolCallRequested)
    assert seen[1].arguments == {"command": "y" * 37}


# -- time --------------------------------------------------------------------------------------


async def test_keep_alives_do_not_keep_a_turn_alive_past_the_deadline(
    server: FakeServer, provider: Provider, autojump_clock: trio.testing.MockClock
) -> None:
    """Text, then a keep-alive every 2 s forever: each one resets the idle timeout (5 s), so
    only the deadline (30 s) ends the answer, at 30 s, with the text kept."""
    server.script(Reply(chunks=provider.first_text, repeat=provider.keep_alive, every=2.0))
    seen: list[ModelEvent] = []
    start = trio.current_time()
    with pytest.raises(ModelError) as info:
        await collect_into(seen, provider.model(server, "timeout=5&deadline=30&max_retries=0"))
    assert trio.current_time() - start == pytest.approx(30.0)
    assert seen == [TextDelta("hi")]
    await server.seen[0].closed.wait()
    assert server.seen[0].sent >= 14 * len(provider.keep_alive)  # the idle timeout never fired
    assert str(info.value) == (
        f"{server.url}{provider.path} did not finish its answer within the deadline of 30 s; "
        "try again, or allow more time (deadline= or ?deadline=SECONDS in the model spec)"
    )


async def test_keep_alives_rarer_than_the_idle_timeout_end_the_answer(
    server: FakeServer, provider: Provider, autojump_clock: trio.testing.MockClock
) -> None:
    """A keep-alive only every 10 s, the idle timeout 5 s: the answer stops at 5 s."""
    server.script(Reply(chunks=provider.first_text, repeat=provider.keep_alive, every=10.0))
    start = trio.current_time()
    with pytest.raises(
        ModelError, match=r" stopped sending mid-answer \(nothing within 5 s\); try again$"
    ):
        await collect_into([], provider.model(server, "timeout=5&deadline=30"))
    assert trio.current_time() - start == pytest.approx(5.0)
    assert len(server.seen) == 1  # output was streamed: never retried


async def test_a_retry_that_would_pass_the_deadline_is_not_waited_for(
    server: FakeServer, provider: Provider, autojump_clock: trio.testing.MockClock
) -> None:
    """A 503 asking for 20 s when the deadline is 10 s: the error at once, saying why."""
    body = json.dumps({"error": {"type": "x", "message": "busy"}}).encode()
    server.script(Reply(503, (("retry-after", "20"),), [body]))
    start = trio.current_time()
    with pytest.raises(
        ModelError, match=r"busy; the deadline of 10 s leaves no time for another attempt$"
    ):
        await collect_into([], provider.model(server, "deadline=10&max_retries=3"))
    assert trio.current_time() - start < 0.1
    assert len(server.seen) == 1


async def test_the_deadline_covers_the_retries(
    server: FakeServer, provider: Provider, autojump_clock: trio.testing.MockClock
) -> None:
    """A first attempt fails, the second never answers: the deadline ends the whole call,
    counting both attempts."""
    body = json.dumps({"error": {"type": "x", "message": "busy"}}).encode()
    server.script(Reply(503, (("retry-after", "4"),), [body]), Reply(hang=True))
    start = trio.current_time()
    with pytest.raises(
        ModelError, match=r"within the deadline of 10 s; .* \(gave up after 2 attempts\)$"
    ):
        await collect_into([], provider.model(server, "timeout=60&deadline=10"))
    assert trio.current_time() - start == pytest.approx(10.0)


# -- configuration -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("deadline=0", r"deadline must be a number of seconds > 0, got '0'$"),
        ("deadline=never", r"deadline must be a number of seconds > 0, got 'never'$"),
        ("max_line=0", r"max_line must be a whole number >= 1, got '0'$"),
        ("max_line=1.5", r"max_line must be a whole number >= 1, got '1\.5'$"),
        ("max_answer=0", r"max_answer must be a whole number >= 1, got '0'$"),
        ("max_answer=4MiB", r"max_answer must be a whole number >= 1, got '4MiB'$"),
    ],
)
def test_bad_bounds_in_a_spec_say_what_is_wrong(
    provider: Provider, query: str, problem: str
) -> None:
    """A bad deadline or max_line in a spec is a ModelSpecError naming it."""
    with pytest.raises(ModelSpecError, match=rf"^invalid model spec .*: {problem}"):
        model_from_spec(f"{provider.scheme}:m?{query}")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"deadline": 0.0}, r"^deadline must be a number of seconds > 0 or None; got 0\.0$"),
        ({"deadline": float("nan")}, r"^deadline must be a number of seconds > 0 or None"),
        ({"max_line": 0}, r"^max_line must be a whole number >= 1; got 0$"),
        ({"max_answer": 0}, r"^max_answer must be a whole number >= 1; got 0$"),
    ],
)
def test_bad_bounds_in_the_constructor_are_value_errors(
    provider: Provider, kwargs: dict[str, Any], message: str
) -> None:
    """The constructors refuse bounds the driver cannot use."""
    with pytest.raises(ValueError, match=message):
        provider.kind("m", base_url="http://127.0.0.1:9", **kwargs)
