"""What a tool call produced (:class:`ToolResult`), and the one cap on its size.

Rules:
- Every result is capped in one place, at the end of ``ToolRegistry.invoke``: past
  ``result_cap`` UTF-8 bytes (default :data:`RESULT_CAP`, 1 MiB, what bash keeps of a
  command's output) the middle is cut and replaced by one marker line saying how many bytes
  were dropped, so the model sees the start, the end and that it was cut, and nothing over
  the cap is stored or re-sent. Cutting costs time linear in the result.
"""

from __future__ import annotations

import attrs

from ..model import ImagePart


@attrs.frozen
class ToolResult:
    """What a tool call produced.

    Attributes:
        content: the text the model reads.
        is_error: whether the call failed (the model sees it as an error).
        started: whether the tool's function had begun; for a cancelled call, ``True`` means
            side effects are possible.
        images: images the model sees with the text (an MCP tool's, say); recorded in the
            session, each at most ``trio_agents.model.MAX_IMAGE_BYTES``.
    """

    content: str
    is_error: bool = False
    started: bool = True
    images: tuple[ImagePart, ...] = ()


#: The most UTF-8 bytes of a tool result that are kept, stored and sent to a model.
RESULT_CAP = 1 << 20


def _cut_marker(dropped: int) -> str:
    # The wording of the bash tool's own marker (shell/_tool_bash.py), so a model meets one.
    return f"[... {dropped} bytes of output dropped (over the tool result cap) ...]"


def cap_result(content: str, cap: int = RESULT_CAP) -> str:
    """``content`` if it is at most ``cap`` UTF-8 bytes; else its start and end, with one
    marker line between them that says how many bytes were dropped (the whole is within
    ``cap``, unless ``cap`` is smaller than the marker itself)."""
    if len(content) * 4 <= cap:  # at most 4 bytes a character: no need to encode
        return content
    # surrogatepass: a lone surrogate (a tool's decoding accident) is kept, not an error.
    data = content.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return content
    # The marker's length depends on the count it holds; the count's digits are at most
    # those of len(data), so reserving that many keeps the whole within the cap.
    room = max(0, cap - len(_cut_marker(len(data)).encode()) - 2)
    head, tail = room // 2, len(data) - (room - room // 2)
    # Cut on character boundaries: never inside a UTF-8 sequence (continuation bytes are
    # 0b10xxxxxx).
    while head > 0 and data[head] & 0xC0 == 0x80:
        head -= 1
    while tail < len(data) and data[tail] & 0xC0 == 0x80:
        tail += 1
    return (
        f"{data[:head].decode('utf-8', 'surrogatepass')}\n{_cut_marker(tail - head)}\n"
        f"{data[tail:].decode('utf-8', 'surrogatepass')}"
    )
