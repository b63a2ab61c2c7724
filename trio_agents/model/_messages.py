"""The conversation a model sees, and the tools it may call (provider-neutral values).

Rules (images):
- An :class:`ImagePart` is a whole image, base64 with its mime type (PNG, JPEG, GIF or WebP),
  checked when it is made: valid base64, at most :data:`MAX_IMAGE_BYTES` decoded bytes, else
  :class:`ImageError` (one line saying what is wrong and what to do).
- A user message and a tool's output may carry images (``images``). A provider whose API takes
  images sends them (the OpenAI-compatible and Anthropic wires); a model that sees no images
  (the scripted ones) reads :func:`image_placeholder` lines instead (:func:`text_with_images`),
  so it is told an image was there.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

import attrs

from .._errors import TrioAgentsError

#: The image types every provider here takes.
IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: The largest image, decoded (5 MiB: the Anthropic API's bound; OpenAI's is larger).
MAX_IMAGE_BYTES: Final = 5 * 1024 * 1024
#: The signatures of the image types, to tell a file's type by its bytes.
_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class ImageError(TrioAgentsError, ValueError):
    """An image that cannot be sent: an unknown type, bad base64, or over the size bound."""


def _size(data: str) -> int:
    # base64: 4 characters carry 3 bytes, less the padding.
    return len(data) * 3 // 4 - data[-2:].count("=")


def _too_large(size: int) -> str:
    return (
        f"an image is at most {MAX_IMAGE_BYTES // (1024 * 1024)} MiB; this one is "
        f"{size / (1024 * 1024):.1f} MiB: make it smaller (scale it down, or save it as JPEG)"
    )


def _check_mime(instance: object, attribute: object, value: str) -> None:
    if value not in IMAGE_TYPES:
        kinds = ", ".join(sorted(IMAGE_TYPES))
        raise ImageError(f"images are {kinds}; got {value!r}")


def _check_data(instance: object, attribute: object, value: str) -> None:
    size = _size(value)
    if size > MAX_IMAGE_BYTES:
        raise ImageError(_too_large(size))
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("an image's data must be base64; this is not") from None


@attrs.frozen
class ImagePart:
    """An image in a message: its mime type and its bytes as base64 (see the module rules).

    Raises:
        ImageError: the type is not an image type here, the data is not base64, or it is
            over :data:`MAX_IMAGE_BYTES`.
    """

    mime_type: str = attrs.field(validator=_check_mime)
    data: str = attrs.field(validator=_check_data, repr=lambda d: f"<{_size(d)} bytes>")

    @property
    def size(self) -> int:
        """The image's size in bytes."""
        return _size(self.data)

    @classmethod
    def from_bytes(cls, content: bytes, mime_type: str | None = None) -> ImagePart:
        """The image of ``content``; its type told by its first bytes unless given."""
        if len(content) > MAX_IMAGE_BYTES:  # refused before it is encoded
            raise ImageError(_too_large(len(content)))
        kind = mime_type or _sniff(content)
        if kind is None:
            kinds = ", ".join(sorted(IMAGE_TYPES))
            raise ImageError(f"not an image this agent can send ({kinds})")
        return cls(kind, base64.b64encode(content).decode("ascii"))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ImagePart:
        """The image in the file ``path``, its type told by its first bytes (never by its
        name: a file that is no image is not sent as one).

        Raises:
            ImageError: see the class; the message names the file.
            OSError: it cannot be read.
        """
        size = os.path.getsize(path)
        if size > MAX_IMAGE_BYTES:
            raise ImageError(f"{os.fspath(path)}: {_too_large(size)}")
        with open(path, "rb") as f:
            content = f.read()
        try:
            return cls.from_bytes(content)
        except ImageError as exc:
            raise ImageError(f"{os.fspath(path)}: {exc}") from None


def _sniff(content: bytes) -> str | None:
    for magic, kind in _MAGIC:
        if content.startswith(magic):
            return kind
    if content[:4] == b"RIFF" and content[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_placeholder(image: ImagePart) -> str:
    """The line a model that sees no images reads for one."""
    return (
        f"[an image was attached ({image.mime_type}, {image.size} bytes); "
        f"this model cannot see images]"
    )


def _copy(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    # A private copy: a caller mutating its dict later cannot change a sent message.
    return dict(mapping)


@attrs.frozen
class ToolCallPart:
    """A tool call the model made in an assistant message."""

    call_id: str
    name: str
    arguments: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class SystemText:
    """Instructions for the model."""

    content: str


@attrs.frozen
class UserText:
    """What the user said, and the images they attached."""

    content: str
    images: tuple[ImagePart, ...] = ()


@attrs.frozen
class AssistantText:
    """What the model said, and the tools it called in the same step."""

    content: str
    tool_calls: tuple[ToolCallPart, ...] = ()


@attrs.frozen
class ToolOutput:
    """The result of one tool call, answering :class:`ToolCallPart` ``call_id``."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()


ChatMessage: TypeAlias = SystemText | UserText | AssistantText | ToolOutput


def text_with_images(message: UserText | ToolOutput) -> str:
    """The text of ``message`` with a placeholder line for each of its images (for a model
    that sees no images)."""
    if not message.images:
        return message.content
    lines = [image_placeholder(image) for image in message.images]
    return "\n".join([message.content, *lines] if message.content else lines)


@attrs.frozen
class ToolSpec:
    """A tool as the model sees it: a name, a description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class OutputSpec:
    """The typed final answer a request asks for: JSON that matches ``schema``.

    The same request offers the final-answer tool (the :class:`ToolSpec` named ``tool``, whose
    parameters are ``schema``). A provider with a native JSON-schema mode may use it instead:
    it leaves that tool out and the model answers with the JSON as its text. Any other
    provider sends the request as it is, and the model answers by calling the tool.
    """

    tool: str
    schema: Mapping[str, Any] = attrs.field(converter=_copy, hash=False)


@attrs.frozen
class ModelRequest:
    """One model call: the conversation so far and the tools on offer.

    ``messages`` is any read-only sequence: a tuple, or the agent's own snapshot view of its
    history (which costs nothing to take however long the conversation is). Providers iterate
    it; they do not change it. ``output`` is the typed final answer the request asks for, or
    ``None`` (see :class:`OutputSpec`).
    """

    messages: Sequence[ChatMessage]
    tools: tuple[ToolSpec, ...] = ()
    output: OutputSpec | None = None
