"""A config-declared agent run twice by the command keeps its definition (issue: resume
forgot the system prompt and the tool allow-list).

The command runs as a real subprocess against a loopback OpenAI-compatible server that keeps
every request it was sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.helpers.support import TRIO_AGENTS, FakeServer, Reply, serve

CONFIG = """\
[[agents]]
id = "reviewer"
model = "openai:test-model?base_url={url}&max_retries=0"
instructions = "Review tersely."
tools = []
"""


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeServer:
    return await serve(nursery, "/v1")


def text_reply(*words: str) -> Reply:
    """An OpenAI chat-completions stream of ``words``, then a stop."""
    chunks = [json.dumps({"choices": [{"index": 0, "delta": {"content": w}}]}) for w in words]
    chunks.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    return Reply(chunks=[f"data: {c}\n\n".encode() for c in [*chunks, "[DONE]"]])


async def run_command(config: Path, store: Path, home: Path, prompt: str) -> str:
    env = {**os.environ, "TRIO_AGENTS_HOME": str(home), "NO_COLOR": "1", "OPENAI_API_KEY": "k"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    args = ["run", prompt, "--session", "reviewer", "--config", str(config), "--store", str(store)]
    with trio.fail_after(60):
        done = await trio.run_process(
            [str(TRIO_AGENTS), *args], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def system_and_tools(body: Any) -> tuple[list[str], list[str]]:
    system = [m["content"] for m in body["messages"] if m["role"] == "system"]
    tools = [t["function"]["name"] for t in body.get("tools", [])]
    return system, tools


async def test_a_declared_agent_run_twice_keeps_its_instructions_and_tools(
    server: FakeServer, tmp_path: Path
) -> None:
    """Both runs send the declared system prompt and offer no tool, though the command loads
    bash;
    the second request carries the first exchange too (the same agent, resumed)."""
    config = tmp_path / "agents.toml"
    config.write_text(CONFIG.format(url=server.url))
    store = tmp_path / "sessions"
    server.script(text_reply("first ", "answer"), text_reply("second ", "answer"))
    assert await run_command(config, store, tmp_path, "one") == "first answer\n"
    assert await run_command(config, store, tmp_path, "two") == "second answer\n"
    first, second = (seen.body for seen in server.seen)
    assert system_and_tools(first) == system_and_tools(second) == (["Review tersely."], [])
    contents = [m.get("content") for m in second["messages"]]
    assert contents == ["Review tersely.", "one", "first answer", "two"]
