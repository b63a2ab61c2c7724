"""``@path`` of an image in ``run`` and ``chat`` (the installed command, the echo model), and
ACP ``image`` prompt blocks (in process): the image reaches the model with the prompt."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

from tests.helpers.acp_support import serve_bridge
from tests.helpers.command_support import env_for
from tests.helpers.support import TRIO_AGENTS
from trio_agents.model import MAX_IMAGE_BYTES
from trio_agents.session import ImageAttached

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
SEEN = f"[an image was attached (image/png, {len(PNG)} bytes); this model cannot see images]"


def command(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TRIO_AGENTS), *args, "--store", "memory"],
        input=stdin,
        capture_output=True,
        text=True,
        env=env_for(tmp_path),
        cwd=tmp_path,
        timeout=60,
        check=False,
    )


def test_run_attaches_an_image_named_with_at(tmp_path: Path) -> None:
    """`run 'what is @shot.png'`: the image goes with the prompt (the echo model says so);
    an @word that is no image file stays text."""
    (tmp_path / "shot.png").write_bytes(PNG)
    done = command(tmp_path, "run", "what is @shot.png and @notes.txt")
    assert done.returncode == 0, done
    assert done.stdout == f"what is @shot.png and @notes.txt\n{SEEN}\n"


def test_run_refuses_an_image_over_the_bound_in_one_line(tmp_path: Path) -> None:
    """An @image over 5 MiB: one line naming it and the bound, status 2, nothing sent."""
    (tmp_path / "big.png").write_bytes(PNG + b"\0" * MAX_IMAGE_BYTES)
    done = command(tmp_path, "run", "look at @big.png")
    assert done.returncode != 0
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("trio-agents: error: cannot attach @big.png: ")
    assert "an image is at most 5 MiB" in line


def test_chat_attaches_an_image_and_says_when_it_cannot(tmp_path: Path) -> None:
    """In chat, @shot.png goes with the line; an image that cannot be sent is one red note
    and the line is not sent."""
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "fake.png").write_text("not a picture")
    done = command(tmp_path, "chat", stdin="@fake.png hi\nsee @shot.png\n/quit\n")
    assert done.returncode == 0, done
    assert f"see @shot.png\n{SEEN}" in done.stdout
    assert "cannot attach @fake.png: " in done.stdout
    assert done.stdout.count("@fake.png hi") == 1  # the input echoed, never answered


async def test_an_acp_image_block_reaches_the_model() -> None:
    """An image block (base64 with its mimeType) goes with the prompt's text: recorded in the
    session, read by the echo model as an attached image."""
    data = base64.b64encode(PNG).decode()
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        blocks = [
            {"type": "text", "text": "what is this?"},
            {"type": "image", "mimeType": "image/png", "data": data},
        ]
        request = await s.client.request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}
        )
        seen, response = await s.client.until(request)
        assert response["result"] == {"stopReason": "end_turn"}
        text = "".join(
            m["params"]["update"]["content"]["text"]
            for m in seen
            if m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )
        assert text == f"what is this?\n{SEEN}"
        agent = s.agents.get(session_id)
        assert agent is not None
        [image] = [r for r in agent.session.records if isinstance(r, ImageAttached)]
        assert (image.mime_type, image.data) == ("image/png", data)


async def test_an_acp_image_that_cannot_be_sent_is_invalid_params() -> None:
    """A bad image block is -32602 naming the block and why; nothing is queued."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session()
        blocks = [{"type": "image", "mimeType": "image/tiff", "data": "AAAA"}]
        error = await s.client.error("session/prompt", {"sessionId": session_id, "prompt": blocks})
        assert error["code"] == -32602
        assert error["message"].startswith("invalid params: prompt[0]: images are image/gif, ")
        assert s.bridge.statistics().prompts == 0
