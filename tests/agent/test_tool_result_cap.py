"""The tool result cap: every result is bounded where the registry answers, and so is what the
history re-sends; the model sees that it was cut."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import trio_agents.agent as ag
from tests.helpers.mcp_support import tools_server
from tests.helpers.support import conversation
from trio_agents.agent._results import RESULT_CAP, cap_result
from trio_agents.kernel import Context
from trio_agents.model import CallTool, Say, ScriptedModel, ToolOutput
from trio_agents.session import ToolCallEnded

MARKER = re.compile(
    r"\n\[\.\.\. (\d+) bytes of output dropped \(over the tool result cap\) \.\.\.\]\n"
)


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with ag.open_runtime() as root:
        yield root


def test_the_cap_is_what_bash_keeps() -> None:
    """One MiB, the bash tool's output cap."""
    assert RESULT_CAP == 1 << 20


def test_a_result_within_the_cap_is_kept_as_is() -> None:
    """At or under the cap, the very same string comes back."""
    text = "é" * 50
    assert cap_result(text, 100) is text
    assert cap_result("x" * 100, 100) == "x" * 100


def test_a_result_over_the_cap_keeps_its_start_and_end_and_says_what_was_cut() -> None:
    """Over the cap: the start, a marker naming the bytes dropped, the end; within the cap."""
    text = "A" * 1000 + "B" * 100_000 + "Z" * 1000
    capped = cap_result(text, 1000)
    assert _size(capped) <= 1000
    head, dropped, tail = MARKER.split(capped)
    assert head == "A" * len(head)
    assert tail == "Z" * len(tail)
    assert len(head) + int(dropped) + len(tail) == len(text)
    assert len(head) > 400
    assert len(tail) > 400


@given(
    text=st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", "😀", "é"])),
    cap=st.integers(min_value=120, max_value=400),
)
def test_cutting_never_splits_a_character(text: str, cap: int) -> None:
    """Multi-byte characters and lone surrogates survive whole; the bytes add up; the cap
    holds."""
    text *= 3
    capped = cap_result(text, cap)
    assert _size(capped) <= cap
    parts = MARKER.split(capped)
    if len(parts) == 1:
        assert capped == text
        return
    head, dropped, tail = parts
    assert text.startswith(head)
    assert text.endswith(tail)
    assert _size(head) + int(dropped) + _size(tail) == _size(text)


async def test_the_registry_caps_every_answer(root: Context) -> None:
    """A tool's long text, and a long error it raised, both come back within the cap."""
    registry = ag.ToolRegistry(result_cap=200)

    async def long(call: ag.ToolContext, arguments: object) -> str:
        await trio.lowlevel.checkpoint()
        return "x" * 10_000

    async def loud(call: ag.ToolContext, arguments: object) -> str:
        raise RuntimeError("y" * 10_000)

    registry.register(ag.Tool("long", "Long text.", None, long))
    registry.register(ag.Tool("loud", "Fails loudly.", None, loud))
    answer = await registry.invoke("long", {})
    assert (_size(answer.content) <= 200, answer.is_error) == (True, False)
    assert MARKER.search(answer.content)
    failed = await registry.invoke("loud", {})
    assert failed.is_error
    assert failed.content.startswith("tool 'loud' failed: RuntimeError: yyy")
    assert _size(failed.content) <= 200
    for wrong in (0, RESULT_CAP + 1):
        with pytest.raises(
            ValueError,
            match=rf"^result_cap is a number of bytes from 1 to "
            rf"1048576; got {wrong}$",
        ):
            ag.ToolRegistry(result_cap=wrong)


async def test_a_10_mb_mcp_result_is_stored_capped(root: Context) -> None:
    """An MCP tool answers 10 MB of text: the ToolCallEnded stored is within 1 MiB, starts
    as the answer did, ends with its end, and says how much was cut."""
    await root.plugin(tools_server())
    model = ScriptedModel([[CallTool("t__big", {"megabytes": 10})], [Say("done")]])
    agent = (await root.agents.create(model=model)).agent
    agent.prompt("big")
    with trio.fail_after(60):
        await agent.when_idle()
    [ended] = [r for r in agent.session.records if isinstance(r, ToolCallEnded)]
    assert not ended.is_error
    assert _size(ended.content) <= RESULT_CAP
    head, dropped, tail = MARKER.split(ended.content)
    assert head.startswith("x" * 99 + "\n")
    assert tail.endswith("END")
    assert len(head) + int(dropped) + len(tail) == 10_000_000


def test_the_history_bounds_a_result_stored_uncapped() -> None:
    """A ToolCallEnded stored whole (before the cap, or by another writer) is re-sent capped."""
    record = ToolCallEnded(turn_id="t", call_id="c", name="n", content="z" * (3 << 20))
    [message] = [m for m in conversation([record]) if isinstance(m, ToolOutput)]
    assert _size(message.content) <= RESULT_CAP
    assert MARKER.search(message.content)
