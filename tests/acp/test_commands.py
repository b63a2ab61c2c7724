"""Commands over ACP: ``available_commands_update`` after ``session/new`` and ``session/load``
(``/compact`` and the project's ``.trio-agents/commands/*.md``), and prompts that start with
``/name``: a prompt command becomes its prompt, ``/compact`` compacts, an unknown one is
answered without the model. In process with the raw client of :mod:`acp_support`, and end to
end with the official ACP client against the installed ``trio-agents acp``."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.acp_support import Client, Message, Served, serve_bridge
from tests.helpers.support import TRIO_AGENTS
from trio_agents.model import Say, ScriptedModel
from trio_agents.session import Compacted, UserMessage
from trio_agents.workspace import PromptCommand
from trio_agents.workspace._commands import CommandCall, parse_command, prompt_commands

acp = pytest.importorskip("acp")

from acp import text_block  # noqa: E402

# Safety net only: the end-to-end test ends on events, this bounds a broken run.
LIMIT = 30.0


def project(root: Path) -> Path:
    """A project with the prompt commands ``review`` (takes arguments) and ``hello``, and
    files that are not commands."""
    commands = root / ".trio-agents" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text("# Review a file\n\nReview $ARGUMENTS carefully.\n")
    (commands / "hello.md").write_text("Say hello\n")
    (commands / "notes.txt").write_text("not a command\n")
    (commands / "bad name.md").write_text("a stem that is no command name\n")
    return root


def listed(message: Message) -> list[dict[str, Any]]:
    update = message["params"]["update"]
    assert update["sessionUpdate"] == "available_commands_update"
    commands: list[dict[str, Any]] = update["availableCommands"]
    return commands


def chunks(messages: list[Message]) -> str:
    return "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def settle(client: Client) -> None:
    """Every frame the bridge queued before now has been read (one outbound queue)."""
    await client.call("session/list", {})


def user_messages(served: Served, session_id: str) -> list[str]:
    agent = served.agents.get(session_id)
    assert agent is not None
    return [r.content for r in agent.session.records if isinstance(r, UserMessage)]


async def prompt(client: Client, session_id: str, text: str) -> tuple[list[Message], Message]:
    return await client.until(await client.prompt(session_id, text))


# -- the pure part ------------------------------------------------------------------------------


def test_parse_command_takes_a_name_and_the_stripped_rest() -> None:
    """``/name rest`` is a call; a path, a bare slash or text before the slash is not."""
    assert parse_command("/review  src/a.py \n") == CommandCall("review", "src/a.py")
    assert parse_command("/compact") == CommandCall("compact", "")
    assert parse_command("/multi line\nargs") == CommandCall("multi", "line\nargs")
    assert parse_command("/tmp/x is a path") is None
    assert parse_command("/") is None
    assert parse_command("say /review") is None


def test_prompt_commands_read_md_files_by_name(tmp_path: Path) -> None:
    """Each ``*.md`` with a command-name stem is a command; its first line describes it."""
    assert prompt_commands(str(project(tmp_path))) == (
        PromptCommand("hello", "Say hello", "Say hello\n"),
        PromptCommand(
            "review", "Review a file", "# Review a file\n\nReview $ARGUMENTS carefully.\n"
        ),
    )
    assert prompt_commands(str(tmp_path / "elsewhere")) == ()


# -- in process ---------------------------------------------------------------------------------


async def test_new_session_announces_compact_and_the_project_commands(tmp_path: Path) -> None:
    """After the session/new answer: one update listing /compact, then the prompt files by
    name (an input hint for the one that takes ``$ARGUMENTS``)."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(project(tmp_path)))
        await settle(s.client)
        [message] = s.client.commands
        assert message["params"]["sessionId"] == session_id
        assert listed(message) == [
            {"name": "compact", "description": listed(message)[0]["description"]},
            {"name": "hello", "description": "Say hello"},
            {"name": "review", "description": "Review a file", "input": {"hint": "arguments"}},
        ]


async def test_the_bridges_own_commands_come_before_the_files_which_win(tmp_path: Path) -> None:
    """``AcpBridge(commands=...)`` adds commands to every session; a prompt file of the same
    name replaces one."""
    given = (
        PromptCommand("hello", "Greet", "Hi from the bridge"),
        PromptCommand("tests", "Run the tests", "Run the tests of $ARGUMENTS"),
    )
    async with serve_bridge(commands=given) as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(project(tmp_path)))
        await settle(s.client)
        assert [(c["name"], c["description"]) for c in listed(s.client.commands[0])][1:] == [
            ("hello", "Say hello"),
            ("tests", "Run the tests"),
            ("review", "Review a file"),
        ]
        seen, _ = await prompt(s.client, session_id, "/tests unit")
        assert chunks(seen) == "Run the tests of unit"


async def test_load_announces_the_commands_again(tmp_path: Path) -> None:
    """session/load of a stored session is followed by its commands, as session/new is."""
    cwd = str(project(tmp_path))
    async with serve_bridge() as first:
        await first.client.initialize()
        session_id = await first.client.new_session(cwd)
        await prompt(first.client, session_id, "remember me")
        store = first.store
    async with serve_bridge(store=store) as second:
        await second.client.initialize()
        await second.client.call(
            "session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        )
        await settle(second.client)
        [message] = second.client.commands
        assert [c["name"] for c in listed(message)] == ["compact", "hello", "review"]


async def test_a_prompt_command_sends_its_text_with_the_arguments(tmp_path: Path) -> None:
    """``/review src/a.py`` reaches the model as the file's text with the arguments in it."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(project(tmp_path)))
        seen, answer = await prompt(s.client, session_id, "/review src/a.py")
        assert answer["result"] == {"stopReason": "end_turn"}
        expanded = "# Review a file\n\nReview src/a.py carefully.\n"
        assert chunks(seen) == expanded  # the echo model answers with what it was sent
        assert user_messages(s, session_id) == [expanded]


async def test_an_unknown_command_is_answered_without_the_model(tmp_path: Path) -> None:
    """``/nope`` ends the turn with one line naming the commands; the model sees nothing
    (while ``/tmp/x ...``, no command, reaches it as it is)."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(project(tmp_path)))
        seen, answer = await prompt(s.client, session_id, "/nope do it")
        assert answer["result"] == {"stopReason": "end_turn"}
        assert re.fullmatch(
            r"unknown command /nope; the commands here are /compact, /hello, /review "
            r"\(prompt commands are the files of \.trio-agents/commands/\*\.md\)",
            chunks(seen),
        )
        assert user_messages(s, session_id) == []
        seen, _ = await prompt(s.client, session_id, "/tmp/x holds what?")
        assert chunks(seen) == "/tmp/x holds what?"
        assert user_messages(s, session_id) == ["/tmp/x holds what?"]


async def test_compact_compacts_the_history_and_ends_the_turn(tmp_path: Path) -> None:
    """``/compact`` after a few turns records a compaction and says the sizes."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(tmp_path))
        for word in ("one", "two", "three", "four"):
            await prompt(s.client, session_id, word)
        seen, answer = await prompt(s.client, session_id, "/compact")
        assert answer["result"] == {"stopReason": "end_turn"}
        assert re.fullmatch(r"compacted: [\d,]+ -> [\d,]+ tokens", chunks(seen)), chunks(seen)
        agent = s.agents.get(session_id)
        assert agent is not None
        assert [r for r in agent.session.records if isinstance(r, Compacted)]
        assert user_messages(s, session_id) == ["one", "two", "three", "four"]


async def test_compact_with_nothing_to_compact_says_so(tmp_path: Path) -> None:
    """``/compact`` in a new session compacts nothing and says why."""
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(tmp_path))
        seen, answer = await prompt(s.client, session_id, "/compact")
        assert answer["result"] == {"stopReason": "end_turn"}
        assert chunks(seen) == "nothing to compact: the conversation is only its latest turns"


async def test_a_prompt_file_named_compact_does_not_replace_the_builtin(tmp_path: Path) -> None:
    """A ``compact.md`` is not listed; ``/compact`` still compacts."""
    commands = tmp_path / ".trio-agents" / "commands"
    commands.mkdir(parents=True)
    (commands / "compact.md").write_text("Pretend to compact\n")
    async with serve_bridge() as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(tmp_path))
        await settle(s.client)
        assert [c["name"] for c in listed(s.client.commands[0])] == ["compact"]
        seen, _ = await prompt(s.client, session_id, "/compact")
        assert chunks(seen).startswith("nothing to compact")


async def test_cancel_aborts_a_compact_and_answers_cancelled(
    tmp_path: Path, autojump_clock: trio.abc.Clock
) -> None:
    """session/cancel while ``/compact`` summarizes: ``cancelled``, nothing compacted."""
    slow = ScriptedModel([[Say("a b c", delay=1.0)]], name="summarizer")
    async with serve_bridge(compactor=ag.SummarizingCompactor(model=slow)) as s:
        await s.client.initialize()
        session_id = await s.client.new_session(str(tmp_path))
        for word in ("one", "two", "three", "four", "five"):
            await prompt(s.client, session_id, word)
        request_id = await s.client.prompt(session_id, "/compact")
        await trio.testing.wait_all_tasks_blocked()
        assert s.bridge.statistics().prompts == 1
        await s.client.notify("session/cancel", {"sessionId": session_id})
        seen, answer = await s.client.until(request_id)
        assert answer["result"] == {"stopReason": "cancelled"}
        assert chunks(seen) == ""
        agent = s.agents.get(session_id)
        assert agent is not None
        assert not [r for r in agent.session.records if isinstance(r, Compacted)]


# -- end to end ---------------------------------------------------------------------------------


class Editor:
    """The client side: records every update (permission is never asked here)."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.changed = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def wait_for(self, kind: str) -> Any:
        while True:
            for update in self.updates:
                if update.session_update == kind:
                    return update
            self.changed.clear()
            await self.changed.wait()


def test_the_official_client_sees_the_commands_and_runs_one(tmp_path: Path) -> None:
    """The ``agent-client-protocol`` client gets the typed commands update after
    session/new, and ``/review x`` comes back (echo model) as the expanded prompt."""
    cwd = str(project(tmp_path))

    async def main() -> None:
        editor = Editor()
        async with acp.spawn_agent_process(
            editor,
            str(TRIO_AGENTS),
            "acp",
            "--store",
            "memory",
            transport_kwargs={"stderr": None},
            env=dict(os.environ),
        ) as (conn, _):
            await conn.initialize(protocol_version=1)
            session = await conn.new_session(cwd=cwd, mcp_servers=[])
            update = await editor.wait_for("available_commands_update")
            assert [(c.name, c.input is not None) for c in update.available_commands] == [
                ("compact", False),
                ("hello", False),
                ("review", True),
            ]
            answer = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("/review x.py")]
            )
            assert answer.stop_reason == "end_turn"
            text = "".join(
                u.content.text for u in editor.updates if u.session_update == "agent_message_chunk"
            )
            assert text == "# Review a file\n\nReview x.py carefully.\n"

    asyncio.run(asyncio.wait_for(main(), LIMIT))
