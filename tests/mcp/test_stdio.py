"""The stdio transport's line framing: each byte looked at once, whatever the chunking."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from trio_agents.mcp._stdio import LineFramer


def test_lines_split_across_chunks_are_joined() -> None:
    """A line cut over three chunks comes out once, whole; two lines in one chunk, both."""
    framer = LineFramer()
    assert framer.feed(b'{"a":') == []
    assert framer.feed(b" 1") == []
    assert framer.feed(b'}\n{"b": 2}\n{"c"') == [b'{"a": 1}', b'{"b": 2}']
    assert framer.feed(b": 3}\n") == [b'{"c": 3}']
    assert framer.feed(b"") == []


@given(
    lines=st.lists(st.binary().map(lambda b: b.replace(b"\n", b"")), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12),
)
def test_any_chunking_gives_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    """However the stream is cut into chunks, the framer yields exactly its lines."""
    stream = b"".join(line + b"\n" for line in lines)
    bounds = sorted({0, len(stream), *(min(c, len(stream)) for c in cuts)})
    framer = LineFramer()
    out: list[bytes] = []
    for start, end in itertools.pairwise(bounds):
        out.extend(framer.feed(stream[start:end]))
    assert out == lines
