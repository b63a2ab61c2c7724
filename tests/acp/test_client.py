"""End to end: the real ACP client (the ``agent-client-protocol`` package, on asyncio)
drives the installed ``trio-agents acp`` command as a subprocess.

Each test is a sync function running its own ``asyncio.run``: the client is not trio code.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers.acp_client import LIMIT, Recorder, Wire, agent_process, run
from tests.helpers.paths import SERVERS
from tests.helpers.support import TRIO_AGENTS, processes_with

acp = pytest.importorskip("acp")

from acp import RequestError, text_block  # noqa: E402


def test_initialize_new_session_and_streaming_prompt() -> None:
    """initialize, session/new, then a prompt streams its chunks and ends end_turn."""

    async def main() -> None:
        recorder = Recorder()
        async with agent_process(recorder, "--store", "memory") as (conn, _):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("hello from the client")]
            )
            assert response.stop_reason == "end_turn"
            await recorder.wait_for(
                lambda: recorder.texts(session.session_id) == "hello from the client"
            )

    run(main)


def test_initialize_announces_version_1_and_load_session() -> None:
    """The real client reads protocol version 1 and loadSession from the answer."""

    async def main() -> None:
        async with acp.spawn_agent_process(
            Recorder(),
            str(TRIO_AGENTS),
            "acp",
            "--store",
            "memory",
            transport_kwargs={"stderr": None},
            env=dict(os.environ),
        ) as (conn, _):
            answer = await conn.initialize(protocol_version=1)
            assert answer.protocol_version == 1
            assert answer.agent_capabilities.load_session is True

    run(main)


def test_cancel_mid_stream_answers_cancelled_without_waiting_for_the_model() -> None:
    """The model would answer only after an hour: the prompt can end, cancelled, only
    because session/cancel stopped the turn, not because the model finished."""

    async def main() -> None:
        recorder = Recorder()
        wire = Wire()
        async with agent_process(
            recorder, "--store", "memory", "--model", "echo?delay=3600", wire=wire
        ) as (conn, _):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(session_id=session.session_id, prompt=[text_block("slow")])
            )
            await wire.wait_sent("session/prompt")
            await conn.cancel(session_id=session.session_id)
            response = await prompt
            assert response.stop_reason == "cancelled"
            assert recorder.texts(session.session_id) == ""

    run(main)


def test_two_sessions_one_cancelled_the_other_unaffected(tmp_path: Path) -> None:
    """Cancelling session A while both sessions run a command leaves session B's prompt to
    end end_turn with its command's output (no race: each command runs until the test lets
    it end, A's never)."""
    started_a, started_b, gate = (tmp_path / n for n in ("started-a", "started-b", "gate"))
    for fifo in (started_a, started_b, gate):
        os.mkfifo(fifo)
    sleeper = f"sleep 3599.{uuid.uuid4().int % 10**6:06d}"

    def wait_started(fifo: Path) -> str:
        with open(fifo) as f:
            return f.readline().strip()

    def open_gate() -> None:
        with open(gate, "w") as f:
            f.write("bee\n")

    async def main() -> None:
        recorder = Recorder()
        async with agent_process(recorder, "--store", "memory", "--allow-bash") as (conn, _):
            a = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            b = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            prompt_a = asyncio.ensure_future(
                conn.prompt(
                    session_id=a, prompt=[text_block(f"!bash echo a > {started_a} && {sleeper}")]
                )
            )
            prompt_b = asyncio.ensure_future(
                conn.prompt(
                    session_id=b, prompt=[text_block(f"!bash echo b > {started_b} && cat {gate}")]
                )
            )
            assert await asyncio.to_thread(wait_started, started_a) == "a"
            assert await asyncio.to_thread(wait_started, started_b) == "b"
            await conn.cancel(session_id=a)
            assert (await prompt_a).stop_reason == "cancelled"
            await asyncio.to_thread(open_gate)
            assert (await prompt_b).stop_reason == "end_turn"
            await recorder.wait_for(lambda: "bee" in recorder.texts(b))
            assert recorder.texts(a) == ""

    run(main)
    assert processes_with(sleeper) == []


def test_load_replays_history_before_the_response(tmp_path: Path) -> None:
    """A session stored by one process is loaded by another; its history arrives first."""

    async def first() -> str:
        async with agent_process(Recorder(), "--store", str(tmp_path)) as (conn, _):
            session_id: str = (await conn.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            await conn.prompt(session_id=session_id, prompt=[text_block("remember me")])
            return session_id

    session_id = run(first)

    async def second() -> None:
        wire = Wire()
        recorder = Recorder()
        async with agent_process(recorder, "--store", str(tmp_path), wire=wire) as (conn, _):
            await conn.load_session(cwd=os.getcwd(), session_id=session_id, mcp_servers=[])
            # The responses received: initialize's, then session/load's.
            answers = [i for i, m in enumerate(wire.incoming) if "method" not in m]
            assert len(answers) == 2
            answer = answers[1]
            replayed = [
                m["params"]["update"]["sessionUpdate"]
                for m in wire.incoming[:answer]
                if m.get("method") == "session/update"
            ]
            assert replayed == ["user_message_chunk", "agent_message_chunk"]
            await recorder.wait_for(lambda: len(recorder.updates) == 2)
            assert recorder.texts(session_id, "user_message_chunk") == "remember me"
            assert recorder.texts(session_id) == "remember me"
            listed = await conn.list_sessions()
            assert session_id in [s.session_id for s in listed.sessions]

    run(second)


def test_unknown_session_is_an_error() -> None:
    """Prompting or loading a session nobody has is a -32002 error."""

    async def main() -> None:
        async with agent_process(Recorder(), "--store", "memory") as (conn, _):
            with pytest.raises(RequestError) as prompted:
                await conn.prompt(session_id="s-000000000000", prompt=[text_block("x")])
            assert prompted.value.code == -32002
            with pytest.raises(RequestError) as loaded:
                await conn.load_session(
                    cwd=os.getcwd(), session_id="s-000000000000", mcp_servers=[]
                )
            assert loaded.value.code == -32002

    run(main)


def test_cancelled_permission_does_not_run_the_command(tmp_path: Path) -> None:
    """The client answers the permission request cancelled: no marker file, turn ends."""
    marker = tmp_path / "marker"

    async def main() -> None:
        recorder = Recorder(permission=None)
        async with agent_process(recorder, "--store", "memory") as (conn, _):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block(f"!bash touch {marker}")]
            )
            assert response.stop_reason == "cancelled"
            assert len(recorder.permission_requests) == 1
            assert recorder.permission_requests[0].kind == "execute"

    run(main)
    assert not marker.exists()


def test_allowed_permission_runs_the_command(tmp_path: Path) -> None:
    """allow_once: the real shell runs the command, and the turn ends end_turn."""
    marker = tmp_path / "marker"

    async def main() -> None:
        recorder = Recorder(permission="allow_once")
        async with agent_process(recorder, "--store", "memory") as (conn, _):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block(f"!bash touch {marker}")]
            )
            assert response.stop_reason == "end_turn"

    run(main)
    assert marker.exists()


def test_client_disconnect_mid_turn_exits_without_waiting_for_children(tmp_path: Path) -> None:
    """Closing stdin while a shell command runs: the agent exits, leaving no child behind.

    The command would run for an hour, so the agent can exit only by killing it.
    """
    tag = f"trio-agents-acp-{uuid.uuid4().hex}"
    fifo = tmp_path / "started"
    os.mkfifo(fifo)

    def wait_started() -> str:
        with open(fifo) as f:
            return f.readline()

    # A sleep whose command line is unique too: it is the grandchild that must not survive.
    sleeper = f"sleep 3599.{uuid.uuid4().int % 10**6:06d}"

    async def main() -> None:
        recorder = Recorder()
        async with agent_process(recorder, "--store", "memory", "--allow-bash") as (
            conn,
            process,
        ):
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            prompt = asyncio.ensure_future(
                conn.prompt(
                    session_id=session.session_id,
                    prompt=[text_block(f"!bash echo {tag} > {fifo} && {sleeper}")],
                )
            )
            # The shell tells the test it runs (a FIFO blocks until both ends are open).
            assert (await asyncio.to_thread(wait_started)).strip() == tag
            assert process.stdin is not None
            process.stdin.close()
            assert await process.wait() == 0
            prompt.cancel()

    run(main)
    assert processes_with(tag) == []
    assert processes_with(sleeper) == []


def test_a_session_works_in_its_own_cwd_and_lists_it(tmp_path: Path) -> None:
    """session/new with a project directory as cwd (the agent process runs elsewhere):
    ``!bash pwd`` prints that directory, session/list reports it and filters by it, and a
    later process that loads the session lists it there too."""
    project = tmp_path / "project"
    project.mkdir()
    store = tmp_path / "sessions"

    async def first() -> str:
        recorder = Recorder()
        async with agent_process(recorder, "--store", str(store), "--allow-bash") as (conn, _):
            assert Path.cwd() != project
            session_id: str = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            other = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            response = await conn.prompt(session_id=session_id, prompt=[text_block("!bash pwd")])
            assert response.stop_reason == "end_turn"

            await recorder.wait_for(lambda: str(project) in recorder.texts(session_id))
            listed = {s.session_id: s.cwd for s in (await conn.list_sessions()).sessions}
            assert listed == {session_id: str(project), other: str(tmp_path)}
            only = await conn.list_sessions(cwd=str(project))
            assert [s.session_id for s in only.sessions] == [session_id]
            return session_id

    session_id = run(first)

    async def second() -> None:
        async with agent_process(Recorder(), "--store", str(store)) as (conn, _):
            # Listed from the store, before anything is loaded.
            only = await conn.list_sessions(cwd=str(project))
            assert [(s.session_id, s.cwd) for s in only.sessions] == [(session_id, str(project))]

    run(second)


def test_new_session_with_an_mcp_server_runs_it_until_the_agent_exits() -> None:
    """The real client names a stdio MCP server in session/new: the agent starts it (its
    process is there while the session lives) and ends it when the connection closes."""
    from acp.schema import EnvVariable, McpServerStdio

    word = f"marker-{uuid.uuid4().hex}"
    server = McpServerStdio(
        name="tools",
        command=sys.executable,
        args=[str(SERVERS / "tools_server.py"), word],
        env=[EnvVariable(name="MCP_TEST", value="1")],
    )

    async def main() -> None:
        recorder = Recorder()
        # The whole environment (the client passes on only a safe few by default), so the
        # command imports the trio_agents under test wherever PYTHONPATH points.
        async with acp.spawn_agent_process(
            recorder,
            str(TRIO_AGENTS),
            "acp",
            "--store",
            "memory",
            env=dict(os.environ),
            transport_kwargs={"stderr": None},
        ) as (conn, process):
            answer = await conn.initialize(protocol_version=1)
            assert answer.agent_capabilities.mcp_capabilities.http is True
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[server])
            assert processes_with(word) != []
            response = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("still answers")]
            )
            assert response.stop_reason == "end_turn"
        await process.wait()
        for _ in range(1000):
            if not processes_with(word):
                break
            await asyncio.sleep(0.01)
        assert processes_with(word) == []

    run(main)


def test_sigint_of_the_command_ends_its_mcp_servers(tmp_path: Path) -> None:
    """Ctrl-C of ``trio-agents acp`` with a config file's MCP server: both exit, no orphan."""
    import signal
    import subprocess

    word = f"marker-{uuid.uuid4().hex}"
    script = str(SERVERS / "tools_server.py")
    config = tmp_path / "trio-agents.toml"
    config.write_text(
        f"[[mcp_servers]]\nname = 't'\ncommand = {sys.executable!r}\n"
        f"args = [{script!r}, {word!r}]\n"
    )
    with subprocess.Popen(
        [str(TRIO_AGENTS), "acp", "--store", "memory", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as agent:
        # The server is applied before serving starts: wait until its process exists.
        deadline = time.monotonic() + LIMIT
        while not processes_with(word):
            assert agent.poll() is None, agent.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        agent.send_signal(signal.SIGINT)
        agent.communicate(timeout=LIMIT)
    deadline = time.monotonic() + LIMIT
    while processes_with(word):
        assert time.monotonic() < deadline
        time.sleep(0.01)
