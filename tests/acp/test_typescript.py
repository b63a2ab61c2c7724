"""The official TypeScript ACP client (``@agentclientprotocol/sdk``, pinned in
tests/acp_ts/package.json) against the installed ``trio-agents acp``, end to end: a real
``node`` process runs tests/acp_ts/client.mjs, which spawns the agent twice (a new session
with two prompts, then a fresh process that lists and loads it) and prints what it saw as one
JSON object; the assertions are here.

The SDK is installed by ``npm ci --prefix tests/acp_ts`` (``.ci/run`` and ``nox -s tests`` do
it); without node or the SDK this test fails saying so, it never skips.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.helpers.paths import TESTS
from tests.helpers.support import TRIO_AGENTS

CLIENT_DIR = TESTS / "acp_ts"
CLIENT = CLIENT_DIR / "client.mjs"
SDK = "@agentclientprotocol/sdk"
INSTALL = "run `npm ci --prefix tests/acp_ts` (it installs the pinned TypeScript ACP SDK)"
WRITE_PROMPT = '!tool write_file {"path": "note.txt", "content": "hi"}'
# Safety net only: the client ends when its two connections have; this bounds a broken run.
LIMIT = 60.0


def client_problem() -> str | None:
    """Why the TypeScript client cannot run here (one line that says what to do), or None."""
    if shutil.which("node") is None:
        return f"the TypeScript ACP client test needs node (20 or later) on PATH; then {INSTALL}"
    pinned = json.loads((CLIENT_DIR / "package.json").read_text())["dependencies"][SDK]
    installed = CLIENT_DIR / "node_modules" / SDK / "package.json"
    if not installed.is_file():
        return f"the TypeScript ACP SDK ({SDK} {pinned}) is not installed; {INSTALL}"
    version = json.loads(installed.read_text())["version"]
    if version != pinned:
        return f"tests/acp_ts has {SDK} {version} installed, the pin is {pinned}; {INSTALL}"
    return None


@pytest.fixture
def typescript_client() -> Path:
    """client.mjs, once node and the pinned SDK are there; else the test fails saying how to
    install them (a sync fixture: the one line is not wrapped in trio's exception group)."""
    problem = client_problem()
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    return CLIENT


async def run_client(client: Path, cwd: Path, store: Path) -> dict[str, Any]:
    """What client.mjs saw, or the test fails with its exit status and its stderr."""
    command = ["node", str(client), str(TRIO_AGENTS), str(cwd), str(store)]
    with trio.fail_after(LIMIT):
        result = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, check=False
        )
    if result.returncode != 0:
        stderr = result.stderr.decode(errors="replace")
        pytest.fail(f"client.mjs exited with {result.returncode}:\n{stderr}", pytrace=False)
    seen: dict[str, Any] = json.loads(result.stdout)
    return seen


@pytest.mark.usefixtures("cli_environment")
async def test_the_typescript_sdk_client_prompts_edits_through_its_fs_and_loads(
    tmp_path: Path, typescript_client: Path
) -> None:
    """The TypeScript SDK's client gets the echoed text, write_file as an asked-for 'edit'
    with its diff written through fs/write_text_file, and the session listed and replayed by
    a fresh agent process."""
    cwd = (tmp_path / "work").resolve()
    cwd.mkdir()
    note = str(cwd / "note.txt")

    seen = await run_client(typescript_client, cwd, tmp_path / "sessions")

    assert (seen["protocolVersion"], seen["loadSession"]) == (1, True)
    assert seen["hello"] == {
        "stopReason": "end_turn",
        "userText": "",
        "agentText": "hello",
        "toolCalls": [],
    }
    write = seen["write"]
    assert write["stopReason"] == "end_turn"
    assert re.fullmatch(r"tool write_file returned: wrote note\.txt\b.*", write["agentText"])
    assert write["toolCalls"] == [
        {
            "announced": True,
            "title": "write_file: note.txt",
            "kind": "edit",
            "statuses": ["pending", "in_progress", "completed"],
            "locations": [note],
            "diffs": [{"path": note, "oldText": None, "newText": "hi"}],
            "contentTypes": ["diff", "content"],
        }
    ]
    # Asked once, with the four standard options; the client allowed once.
    [asked] = seen["permissions"]
    assert (asked["title"], asked["kind"]) == ("write_file: note.txt", "edit")
    assert [option["kind"] for option in asked["options"]] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    # The old text was asked of the client twice (no such file): for the diff the question
    # shows, then by the tool; the new one written by it.
    assert seen["reads"] == [note, note]
    assert seen["writes"] == [{"path": note, "content": "hi"}]
    assert seen["onDisk"] == "hi"

    assert seen["listed"] == [{"isTheSession": True, "cwd": str(cwd)}]
    load = seen["load"]
    assert load["userText"] == "hello" + WRITE_PROMPT
    assert re.fullmatch(r"hellotool write_file returned: wrote note\.txt\b.*", load["agentText"])
    [replayed] = load["toolCalls"]
    assert (replayed["title"], replayed["kind"], replayed["locations"]) == (
        "write_file: note.txt",
        "edit",
        [note],
    )
    assert replayed["statuses"][-1] == "completed"
    # A loaded session still shows the change (its arguments' diff), with the result.
    assert replayed["contentTypes"] == ["diff", "content"]
    assert replayed["diffs"] == [{"path": note, "oldText": None, "newText": "hi"}]
