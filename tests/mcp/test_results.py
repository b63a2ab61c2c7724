"""What the model reads of an MCP tool's answer, and the names tools get (plain functions)."""

from __future__ import annotations

import mcp.types as mt
import pytest

from trio_agents.agent import ToolResult
from trio_agents.mcp._results import describe, to_result, tool_name


@pytest.mark.parametrize(
    ("block", "text"),
    [
        (mt.TextContent(type="text", text="hello"), "hello"),
        (
            mt.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png"),
            "[image: image/png, 5 bytes]",
        ),
        (
            mt.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            "[audio: audio/wav, 3 bytes; not played to the model]",
        ),
        (
            mt.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
            "[resource link: file:///a.txt (a)]",
        ),
        (
            mt.EmbeddedResource(
                type="resource",
                resource=mt.TextResourceContents(uri="file:///a.txt", text="inside"),
            ),
            "inside",
        ),
        (
            mt.EmbeddedResource(
                type="resource",
                resource=mt.BlobResourceContents(uri="file:///b.bin", blob="AAAA"),
            ),
            "[resource file:///b.bin: application/octet-stream, 3 bytes]",
        ),
    ],
)
def test_each_content_kind_is_read_or_described(block: mt.ContentBlock, text: str) -> None:
    """Text is as is; every other kind is one bracketed line, never dropped."""
    assert describe(block) == text


def test_blocks_are_joined_and_is_error_is_kept() -> None:
    """Several blocks are lines of one answer; isError makes an error result."""
    result = mt.CallToolResult(
        content=[mt.TextContent(type="text", text="a"), mt.TextContent(type="text", text="b")],
        is_error=True,
    )
    assert to_result(result) == ToolResult("a\nb", is_error=True)


def test_structured_content_alone_is_read_as_json() -> None:
    """With no content blocks, the structured content is the answer."""
    result = mt.CallToolResult(content=[], structured_content={"n": 1})
    assert to_result(result) == ToolResult('{"n": 1}')


def test_names_keep_to_what_model_apis_accept() -> None:
    """Refused characters become '_' and the name is cut to 64."""
    assert tool_name("fs__", "read.file") == "fs__read_file"
    assert tool_name("p_", "x" * 100) == "p_" + "x" * 62
