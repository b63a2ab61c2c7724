"""Session files written by hand: a JSONL header, a good record line, raw bytes."""

from __future__ import annotations

from pathlib import Path

from trio_agents.session import (
    UserMessage,
    dump_record,
)

HEADER = '{"format":"trio-agents-session","version":1,"session_id":"%s"}\n'


def good_line(seq: int = 0) -> str:
    return dump_record(UserMessage(message_id="m", content="hello", turn_id="t", seq=seq)) + "\n"


def write(path: Path, text: str | bytes) -> None:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
