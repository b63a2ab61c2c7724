"""Images: checked and bounded (``ImagePart``), recorded in the session, sent by the
OpenAI-compatible and Anthropic wires (real HTTP on 127.0.0.1, end to end from
``agent.prompt(images=...)`` and a tool's result), and told to the scripted models as a line."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.support import FakeServer, Reply, Tools, serve
from trio_agents.model import (
    MAX_IMAGE_BYTES,
    AnthropicModel,
    ImageError,
    ImagePart,
    Model,
    OpenAIChatModel,
)
from trio_agents.session import (
    AssistantMessage,
    ImageAttached,
    JsonlStore,
    MemoryStore,
    UserMessage,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
PNG64 = base64.b64encode(PNG).decode()
IMAGE = ImagePart("image/png", PNG64)
CHART = ImagePart("image/jpeg", base64.b64encode(b"\xff\xd8\xff" + b"\x01" * 8).decode())


@pytest.fixture
async def server(nursery: trio.Nursery) -> FakeServer:
    return await serve(nursery, "")


# -- the two APIs' streams, the least each needs -------------------------------------------------


def openai_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def openai_text(text: str) -> Reply:
    chunks = [
        openai_event({"choices": [{"index": 0, "delta": {"content": text}}]}),
        openai_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        b"data: [DONE]\n\n",
    ]
    return Reply(chunks=chunks)


def openai_call(call_id: str, name: str) -> Reply:
    part = {"index": 0, "id": call_id, "type": "function"}
    part["function"] = {"name": name, "arguments": "{}"}
    chunks = [
        openai_event({"choices": [{"index": 0, "delta": {"tool_calls": [part]}}]}),
        openai_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        b"data: [DONE]\n\n",
    ]
    return Reply(chunks=chunks)


def sse(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def _anthropic(block: dict[str, Any], reason: str, *deltas: dict[str, Any]) -> Reply:
    usage = {"input_tokens": 3, "output_tokens": 1}
    return Reply(
        chunks=[
            sse("message_start", message={"id": "m", "role": "assistant", "usage": usage}),
            sse("content_block_start", index=0, content_block=block),
            *(sse("content_block_delta", index=0, delta=d) for d in deltas),
            sse("content_block_stop", index=0),
            sse("message_delta", delta={"stop_reason": reason}, usage={"output_tokens": 1}),
            sse("message_stop"),
        ]
    )


def anthropic_text(text: str) -> Reply:
    delta = {"type": "text_delta", "text": text}
    return _anthropic({"type": "text", "text": ""}, "end_turn", delta)


def anthropic_call(call_id: str, name: str) -> Reply:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
    return _anthropic(block, "tool_use", {"type": "input_json_delta", "partial_json": "{}"})


# -- a tool that answers with an image ------------------------------------------------------------


@attrs.frozen
class NoArgs:
    pass


async def screenshot(call: ag.ToolContext, args: NoArgs) -> ag.ToolResult:
    await trio.lowlevel.checkpoint()
    return ag.ToolResult("the screen", images=(CHART,))


SCREENSHOT = ag.Tool("screenshot", "Take a screenshot.", NoArgs, screenshot)


async def run_agent(model: Model, store: Any = None) -> ag.Agent:
    async with ag.open_runtime(store=store or MemoryStore(), model=model) as root:
        await root.plugin(Tools(SCREENSHOT))
        handle = await root.agents.create(session_id="pics")
        handle.agent.prompt("what is this?", images=[IMAGE])
        await handle.agent.when_idle()
        handle.agent.prompt("and the screen?")
        await handle.agent.when_idle()
        await handle.dispose()
        agent: ag.Agent = handle.agent
        return agent


# -- the wires ------------------------------------------------------------------------------------


async def test_openai_wire_sends_images_as_data_url_parts(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A prompt's image is an image_url part (a data: URL of its base64) after the text; a
    tool's image follows the tool message, in a user message naming the call."""
    server.script(openai_text("a png"), openai_call("c1", "screenshot"), openai_text("a chart"))
    model = OpenAIChatModel("m", base_url=server.url, api_key="k", timeout=None)
    await run_agent(model)
    first, second, third = (s.body["messages"] for s in server.seen)
    assert first == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
            ],
        }
    ]
    assert second[:2] == [*first, {"role": "assistant", "content": "a png"}]
    assert third[-2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": "the screen"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "the images of the result of tool call c1 (screenshot):"},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{CHART.data}"}},
            ],
        },
    ]


async def test_anthropic_wire_sends_images_as_base64_blocks(
    server: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A prompt's image is an image block with a base64 source; a tool's image is a block of
    its tool_result's content, after the text."""
    server.script(
        anthropic_text("a png"), anthropic_call("t1", "screenshot"), anthropic_text("a chart")
    )
    model = AnthropicModel("c", base_url=server.url, api_key="k", timeout=None, cache=False)
    await run_agent(model)
    first, _, third = (s.body["messages"] for s in server.seen)
    source = {"type": "base64", "media_type": "image/png", "data": PNG64}
    assert first == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": source},
            ],
        }
    ]
    chart = {"type": "base64", "media_type": "image/jpeg", "data": CHART.data}
    assert third[-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [
                    {"type": "text", "text": "the screen"},
                    {"type": "image", "source": chart},
                ],
            }
        ],
    }


async def test_images_are_recorded_and_sent_again_after_a_resume(
    server: FakeServer, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The session stores each image whole (ImageAttached, before its message); a resumed
    agent sends the stored image again."""
    server.script(openai_text("a png"), openai_call("c1", "screenshot"), openai_text("x"))
    server.script(openai_text("again"))
    model = OpenAIChatModel("m", base_url=server.url, api_key="k", timeout=None)
    agent = await run_agent(model, JsonlStore(tmp_path))
    images = [r for r in agent.session.records if isinstance(r, ImageAttached)]
    prompted = next(r for r in agent.session.records if isinstance(r, UserMessage))
    assert [(i.message_id, i.call_id, i.mime_type, i.data) for i in images] == [
        (prompted.message_id, None, "image/png", PNG64),
        (None, "c1", "image/jpeg", CHART.data),
    ]
    async with ag.open_runtime(store=JsonlStore(tmp_path), model=model) as root:
        await root.plugin(Tools(SCREENSHOT))
        resumed = (await root.agents.resume("pics")).agent
        resumed.prompt("once more")
        await resumed.when_idle()
    last = server.seen[-1].body["messages"]
    assert last[0]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG64}"
    assert last[-3]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


async def test_the_echo_model_is_told_an_image_was_attached() -> None:
    """A model that sees no images reads one line per image, in the prompt and in a tool's
    result."""
    async with ag.open_runtime(store=MemoryStore()) as root:
        await root.plugin(Tools(SCREENSHOT))
        agent = (await root.agents.create()).agent
        agent.prompt("look", images=[IMAGE])
        await agent.when_idle()
        agent.prompt("!tool screenshot {}")
        await agent.when_idle()
        texts = [r.content for r in agent.session.records if isinstance(r, AssistantMessage)]
    assert texts[-2] == (
        f"look\n[an image was attached (image/png, {len(PNG)} bytes); this model cannot see images]"
    )
    assert texts[-1] == (
        "tool screenshot returned: the screen\n[an image was attached (image/jpeg, 11 bytes); "
        "this model cannot see images]"
    )


# -- the checks -----------------------------------------------------------------------------------


def test_an_image_over_the_bound_is_refused_with_its_size() -> None:
    """Over 5 MiB decoded: one line with the bound, the size and what to do."""
    data = base64.b64encode(b"\0" * (MAX_IMAGE_BYTES + 1)).decode()
    with pytest.raises(ImageError, match=r"^an image is at most 5 MiB; this one is 5\.0 MiB: "):
        ImagePart("image/png", data)
    assert ImagePart("image/png", base64.b64encode(b"\0" * MAX_IMAGE_BYTES).decode()).size == (
        MAX_IMAGE_BYTES
    )


@pytest.mark.parametrize(
    ("mime", "data", "message"),
    [
        ("image/bmp", PNG64, r"^images are image/gif, image/jpeg, image/png, image/webp; got "),
        ("image/png", "not base64!", r"^an image's data must be base64; this is not$"),
    ],
)
def test_a_bad_image_is_one_clear_error(mime: str, data: str, message: str) -> None:
    """An unknown type or data that is not base64 is an ImageError (a ValueError)."""
    with pytest.raises(ImageError, match=message):
        ImagePart(mime, data)


def test_an_image_file_is_read_with_its_type_from_its_bytes(tmp_path: Path) -> None:
    """from_file tells the type by the file's first bytes; a file that is no image, or is
    over the bound, is an error naming the file."""
    path = tmp_path / "shot.bin"
    path.write_bytes(PNG)
    assert ImagePart.from_file(path) == IMAGE
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ImageError, match=rf"^{text}: not an image this agent can send "):
        ImagePart.from_file(text)
    big = tmp_path / "big.png"
    big.write_bytes(PNG + b"\0" * MAX_IMAGE_BYTES)
    with pytest.raises(ImageError, match=rf"^{big}: an image is at most 5 MiB"):
        ImagePart.from_file(big)
