"""An MCP tool's image result reaches the model (a real MCP server, written with the SDK, run
as a child process): a model that takes images gets the image with the result, the echo model
reads that an image was there, and an image over the bound is named with the reason."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncGenerator

import attrs
import trio

import trio_agents.agent as ag
from tests.helpers.paths import SERVERS
from trio_agents.mcp import McpServer
from trio_agents.model import (
    CallTool,
    ImagePart,
    ModelEvent,
    ModelRequest,
    Say,
    ScriptedModel,
    ToolOutput,
)
from trio_agents.session import ImageAttached, MemoryStore, ToolCallEnded

IMAGE_SERVER = str(SERVERS / "image_server.py")
RED_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJ"
    "RU5ErkJggg=="
)


@attrs.define
class Recording:
    """A model that plays a script and keeps every request it was sent."""

    inner: ScriptedModel
    requests: list[ModelRequest] = attrs.Factory(list)
    name: str = "recording"
    context_window: int | None = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        self.requests.append(request)
        async with contextlib.aclosing(self.inner.stream(request)) as events:
            async for event in events:
                yield event


def image_server() -> McpServer:
    return McpServer("img", command=sys.executable, args=(IMAGE_SERVER,))


async def test_an_mcp_image_result_is_passed_to_the_model() -> None:
    """The server's PNG is in the tool output the model's next request carries (and in the
    session, before the result); the text names it."""
    model = Recording(ScriptedModel([[CallTool("img__screenshot", {})], [Say("red")]]))
    with trio.fail_after(30):
        async with ag.open_runtime(store=MemoryStore(), model=model) as root:
            await root.plugin(image_server())
            agent = (await root.agents.create()).agent
            assert await agent.ask("what is on the screen?") == "red"
            records = agent.session.records
    (output,) = [m for m in model.requests[-1].messages if isinstance(m, ToolOutput)]
    assert output.content == "the screen:\n[image: image/png, 73 bytes]"
    assert output.images == (ImagePart("image/png", RED_PNG),)
    kinds = [type(r) for r in records if isinstance(r, ImageAttached | ToolCallEnded)]
    assert kinds == [ImageAttached, ToolCallEnded]


async def test_the_echo_model_reads_that_an_mcp_tool_sent_an_image() -> None:
    """A model that sees no images is told, in its own words, that the result had one; an
    image over the bound is named with the reason and not sent."""
    with trio.fail_after(30):
        async with ag.open_runtime(store=MemoryStore()) as root:
            await root.plugin(image_server())
            agent = (await root.agents.create()).agent
            shown = await agent.ask("!tool img__screenshot {}")
            huge = await agent.ask("!tool img__huge {}")
            images = [r for r in agent.session.records if isinstance(r, ImageAttached)]
    assert shown == (
        "tool img__screenshot returned: the screen:\n[image: image/png, 73 bytes]\n"
        "[an image was attached (image/png, 73 bytes); this model cannot see images]"
    )
    assert huge.startswith("tool img__huge returned: [image: image/png, 6291456 bytes; not shown ")
    assert "an image is at most 5 MiB; this one is 6.0 MiB" in huge
    assert len(images) == 1
