"""A JSON-escaped lone surrogate in a model's answer is read as U+FFFD (issue 34, item 7).

``"\\ud800"`` without its pair is valid JSON but not Unicode text: it could be neither printed
nor stored, and the turn used to end with three lines of developer advice. The providers'
wire readers mend it into the replacement character, as they already do with bytes that are
not UTF-8, wherever it is: text, tool-call arguments (and their keys), error bodies.
"""

from __future__ import annotations

import json
import os
from contextlib import aclosing
from pathlib import Path

import pytest
import trio

from tests.helpers.answer_streams import WIRES, Wire
from tests.helpers.support import TRIO_AGENTS, FakeServer, Reply, serve
from trio_agents.model import (
    ModelError,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    UserText,
    model_from_spec,
)
from trio_agents.model._wire import loads

LONE = "\ud800"  # json.dumps writes it as the escape "\\ud800"
REQUEST = ModelRequest(messages=(UserText("hi"),))


@pytest.fixture(params=WIRES, ids=[w.scheme for w in WIRES])
def wire(request: pytest.FixtureRequest) -> Wire:
    value: Wire = request.param
    return value


@pytest.fixture
async def server(nursery: trio.Nursery, wire: Wire) -> FakeServer:
    return await serve(nursery, wire.prefix)


def spec(server: FakeServer, wire: Wire) -> str:
    return f"{wire.scheme}:test-model?base_url={server.url}&max_retries=0"


async def answer(server: FakeServer, wire: Wire) -> list[ModelEvent]:
    events: list[ModelEvent] = []
    async with aclosing(model_from_spec(spec(server, wire)).stream(REQUEST)) as stream:
        async for event in stream:
            events.append(event)
    return events


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": "x\\ud800y"}', {"a": "x\ufffdy"}),
        ('{"a": "\\udfff"}', {"a": "\ufffd"}),
        (
            '{"\\uDC00k": ["\\uD83D", {"b": "\\ud83d\\ude00"}]}',
            {"\ufffdk": ["\ufffd", {"b": "😀"}]},
        ),
        ('{"a": "\\\\ud800"}', {"a": "\\ud800"}),
    ],
)
def test_loads_reads_lone_surrogates_as_the_replacement_character(
    text: str, expected: object
) -> None:
    """Lone surrogates in strings and keys become U+FFFD; a pair and an escaped backslash stay."""
    assert loads(text) == expected


async def test_a_lone_surrogate_in_the_text_is_read_as_u_fffd(
    server: FakeServer, wire: Wire
) -> None:
    """Text holding a lone surrogate escape streams with U+FFFD in its place."""
    server.script(Reply(chunks=[*wire.opening(), wire.text(f"bad {LONE} here"), *wire.closing()]))
    events = await answer(server, wire)
    assert events[0] == TextDelta("bad \ufffd here")


async def test_a_lone_surrogate_in_tool_arguments_is_read_as_u_fffd(
    server: FakeServer, wire: Wire
) -> None:
    """Tool arguments (values and keys) holding lone surrogate escapes arrive mended."""
    arguments = json.dumps({"command": f"echo {LONE}", f"k{LONE}": 1})
    chunks = [*wire.opening(), wire.tool_start("bash"), wire.tool_piece(arguments)]
    server.script(Reply(chunks=[*chunks, *wire.closing("tool_calls")]))
    call = (await answer(server, wire))[0]
    assert isinstance(call, ToolCallRequested)
    assert call.arguments == {"command": "echo \ufffd", "k\ufffd": 1}


async def test_a_lone_surrogate_in_an_error_body_is_read_as_u_fffd(
    server: FakeServer, wire: Wire
) -> None:
    """An error body's message with a lone surrogate is quoted with U+FFFD."""
    body = json.dumps({"type": "error", "error": {"type": "invalid", "message": f"no {LONE}"}})
    server.script(Reply(400, chunks=[body.encode()]))
    with pytest.raises(ModelError) as info:
        await answer(server, wire)
    assert "no \ufffd" in str(info.value)
    assert LONE not in str(info.value)


async def test_the_command_prints_and_stores_a_lone_surrogate_as_u_fffd(
    server: FakeServer, wire: Wire, tmp_path: Path
) -> None:
    """Through ``trio-agents run``: exit 0, the text printed with U+FFFD, no error on stderr,
    and the stored session shows the same text."""
    reply = Reply(chunks=[*wire.opening(), wire.text(f"bad {LONE} here"), *wire.closing()])
    server.script(reply)
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path), "NO_COLOR": "1"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    store = tmp_path / "sessions"
    run = ["run", "hi", "--store", str(store), "--session", "s1", "--model", spec(server, wire)]
    show = ["sessions", "show", "s1", "--store", str(store)]
    with trio.fail_after(60):
        done = await trio.run_process(
            [str(TRIO_AGENTS), *run], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )  # fmt: skip
        shown = await trio.run_process(
            [str(TRIO_AGENTS), *show], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.startswith(b"session s1 ")  # where it was stored, and nothing else
    assert b"error" not in done.stderr
    assert done.stdout.decode() == "bad \ufffd here\n"
    assert shown.returncode == 0, shown.stderr.decode()
    assert "bad \ufffd here" in shown.stdout.decode()
