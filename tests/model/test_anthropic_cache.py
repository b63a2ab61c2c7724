"""Prompt caching on the Anthropic wire, end to end: the breakpoints an agent's requests carry
to a loopback Messages API server, the cache tokens it reports counted in the usage records,
and shown by the installed ``trio-agents sessions show``."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

import trio_agents.agent as ag
from tests.helpers.support import TRIO_AGENTS, FakeServer, Reply, Tools, serve
from trio_agents.session import JsonlStore, ModelUsage

EPHEMERAL = {"type": "ephemeral"}


def sse(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def answer(blocks: list[dict[str, Any]], stop: str, usage: dict[str, int], out: int) -> Reply:
    """A streamed answer of ``blocks`` (text or tool_use, whole) with ``usage`` at its start."""
    chunks = [sse("message_start", message={"id": "msg", "role": "assistant", "usage": usage})]
    for index, block in enumerate(blocks):
        chunks.append(sse("content_block_start", index=index, content_block=block))
        chunks.append(sse("content_block_stop", index=index))
    chunks.append(sse("message_delta", delta={"stop_reason": stop}, usage={"output_tokens": out}))
    chunks.append(sse("message_stop"))
    return Reply(chunks=chunks)


@attrs.frozen
class Key:
    key: str


async def lookup(call: ag.ToolContext, params: Key) -> str:
    return f"{params.key} = 42"


def marked(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Where the messages of ``body`` carry a breakpoint: (role, block type) in order."""
    return [
        (message["role"], block["type"])
        for message in body["messages"]
        for block in message["content"]
        if block.get("cache_control") == EPHEMERAL
    ]


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeServer:
    return await serve(nursery, "")


async def test_an_agent_marks_its_prefix_and_counts_the_cache_tokens(
    server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn of two steps: each request marks the tools, the system text and its stable
    history prefix; the cache tokens the server reports are in the usage records and in
    ``sessions show``."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-cache")
    call = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "x"}}
    server.script(
        answer([call], "tool_use", {"input_tokens": 5, "cache_creation_input_tokens": 1200}, 7),
        answer(
            [{"type": "text", "text": "x is 42"}],
            "end_turn",
            {"input_tokens": 3, "cache_creation_input_tokens": 40, "cache_read_input_tokens": 1200},
            4,
        ),
    )
    model = f"anthropic:claude-test?base_url={server.url}"
    with trio.fail_after(20):
        async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
            await root.plugin(Tools(ag.Tool("lookup", "Look a key up.", Key, lookup)))
            agent = (await root.agents.create(instructions="Answer from tools.")).agent
            assert await agent.ask("what is x?") == "x is 42"
            records = agent.session.records
            session_id = agent.id

    first, second = (seen.body for seen in server.seen)
    for body in (first, second):
        assert body["system"] == [
            {"type": "text", "text": "Answer from tools.", "cache_control": EPHEMERAL}
        ]
        assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert marked(first) == [("user", "text")]
    # The second request ends with the tool's result and finds the first one's prefix at
    # the prompt: both are marked (four breakpoints with the tools and the system text).
    assert marked(second) == [("user", "text"), ("user", "tool_result")]
    assert json.dumps(second).count("cache_control") == 4

    usages = [
        (u.input_tokens, u.output_tokens, u.cache_creation_tokens, u.cache_read_tokens, u.model)
        for u in records
        if isinstance(u, ModelUsage)
    ]
    assert usages == [(1205, 7, 1200, 0, "claude-test"), (1243, 4, 40, 1200, "claude-test")]

    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    with trio.fail_after(60):
        shown = await trio.run_process(
            [str(TRIO_AGENTS), "sessions", "show", session_id, "--store", str(tmp_path)],
            capture_stdout=True,
            env=env,
        )
    lines = shown.stdout.decode().splitlines()
    figures = r"2,448 in \(1,200 read from the cache, 1,240 written to it\), 11 out tokens"
    ended = rf"turn t-1: completed · {figures} \(2 requests\)"
    assert any(re.fullmatch(ended, line) for line in lines)
    assert lines[-1] == (
        "usage: 2,448 in (1,200 read from the cache, 1,240 written to it), 11 out tokens "
        "(2 requests)"
    )
