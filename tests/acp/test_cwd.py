"""``trio-agents acp`` refuses a session whose cwd it cannot work in, at ``session/new``."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.raw_acp import command


async def test_the_command_refuses_a_missing_cwd_and_goes_on_serving(tmp_path: Path) -> None:
    """A cwd that does not exist is -32602 with the reason; a good one then works."""
    missing = tmp_path / "gone"
    async with command() as raw:
        await raw.initialize()
        await raw.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(missing), "mcpServers": []},
            }
        )
        refused = await raw.answer_to(2)
        assert refused["error"]["code"] == -32602
        assert re.fullmatch(
            rf"invalid params: 'cwd' '{re.escape(str(missing))}' does not exist",
            refused["error"]["message"],
        )
        assert re.fullmatch(r"s-.+", (await raw.new_session(3))["result"]["sessionId"])
