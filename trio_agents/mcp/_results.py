"""What the model reads of an MCP tool's answer, and the names MCP tools get here.

Rules:
- Text content is passed as is; every other kind of content is described in one bracketed
  line (audio, a link or an embedded binary resource is not text a model reads here), so
  nothing the server said is silently dropped. An embedded text resource is text.
- An image is passed to the model with the result (``ToolResult.images``: a provider that
  takes images shows it, another reads that it was there), and named in the text by one
  bracketed line; one that cannot be sent (not PNG, JPEG, GIF or WebP, or over the size
  bound) is only named, with the reason.
- With no content at all, the structured content (if any) is the answer, as JSON.
- ``isError`` makes an error result: the model reads what the server said went wrong.
- A registered name is ``<prefix><tool>``; characters model APIs refuse become ``_`` and the
  name is cut to 64 characters (what :class:`~trio_agents.agent.Tool` accepts).
"""

from __future__ import annotations

import json
import re

import mcp.types as mt

from ..agent import ToolResult
from ..model import ImageError, ImagePart

_REFUSED = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(prefix: str, tool: str) -> str:
    """The registry name of the server tool ``tool`` under ``prefix``."""
    return _REFUSED.sub("_", prefix + tool)[:64]


def _size(data: str) -> str:
    # base64: 4 characters carry 3 bytes.
    return f"{len(data) * 3 // 4} bytes"


def describe(block: mt.ContentBlock) -> str:
    """One content block as the model reads it."""
    if isinstance(block, mt.TextContent):
        return block.text
    if isinstance(block, mt.ImageContent):
        try:
            image = ImagePart(block.mime_type, block.data)
        except ImageError as exc:
            return f"[image: {block.mime_type}, {_size(block.data)}; not shown to the model: {exc}]"
        return f"[image: {block.mime_type}, {image.size} bytes]"
    if isinstance(block, mt.AudioContent):
        return f"[audio: {block.mime_type}, {_size(block.data)}; not played to the model]"
    if isinstance(block, mt.ResourceLink):
        return f"[resource link: {block.uri} ({block.name})]"
    # What is left of the union: an embedded resource.
    resource = block.resource
    if isinstance(resource, mt.TextResourceContents):
        return resource.text
    mime = resource.mime_type or "application/octet-stream"
    return f"[resource {resource.uri}: {mime}, {_size(resource.blob)}]"


def to_result(result: mt.CallToolResult) -> ToolResult:
    """The tool result the model reads for the server's answer."""
    parts = [describe(block) for block in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    images = []
    for block in result.content:
        if isinstance(block, mt.ImageContent):
            try:
                images.append(ImagePart(block.mime_type, block.data))
            except ImageError:
                continue  # named in the text, with the reason
    return ToolResult("\n".join(parts), is_error=bool(result.is_error), images=tuple(images))
