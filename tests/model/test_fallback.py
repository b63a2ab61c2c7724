"""FallbackModel against two loopback provider servers: a failure that retries cannot fix hands
the request to the next model, a rate limit is waited out on the same model, and the usage
record names the model that answered.

Tests that wait (retries, Retry-After) run on the autojump clock with ``timeout=None`` on the
models, as the provider tests do; the others run on real time under ``trio.fail_after``.
"""

from __future__ import annotations

import os
import re
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agents.agent as ag
from tests.helpers.answer_streams import ANTHROPIC_WIRE, OPENAI_WIRE, Wire
from tests.helpers.support import TRIO_AGENTS, FakeServer, Reply, serve
from trio_agents.cli._config import ConfigFileError, load_config
from trio_agents.model import (
    AnthropicModel,
    FallbackModel,
    Finished,
    Model,
    ModelError,
    ModelErrorKind,
    ModelEvent,
    ModelRequest,
    ModelSpecError,
    OpenAIChatModel,
    ScriptedModel,
    TextDelta,
    UserText,
    model_from_spec,
    preflight,
)
from trio_agents.session import MemoryStore, ModelUsage, StopReason, TurnEnded

REQUEST = ModelRequest(messages=(UserText("hi"),))


@pytest.fixture
async def primary(nursery: trio.Nursery) -> FakeServer:
    """The server of the preferred model: OpenAI-compatible."""
    return await serve(nursery, OPENAI_WIRE.prefix)


@pytest.fixture
async def backup(nursery: trio.Nursery) -> FakeServer:
    """The server of the fallback model: the Anthropic Messages API."""
    return await serve(nursery, ANTHROPIC_WIRE.prefix)


def chain(primary: FakeServer, backup: FakeServer, **kwargs: Any) -> FallbackModel:
    """``openai:first`` at ``primary``, then ``anthropic:second`` at ``backup``, waiting
    without an idle timeout (for the autojump clock)."""
    return FallbackModel(
        [
            OpenAIChatModel("first", base_url=primary.url, timeout=None, **kwargs),
            AnthropicModel("second", base_url=backup.url, timeout=None),
        ]
    )


async def collect(model: Model, request: ModelRequest = REQUEST) -> list[ModelEvent]:
    async with aclosing(model.stream(request)) as stream:
        return [e async for e in stream]


def user_texts(wire: Wire, body: dict[str, Any]) -> list[str]:
    """The user texts of a request body of ``wire``."""
    texts: list[str] = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if wire is OPENAI_WIRE:
            texts.append(content)
        else:
            texts += [b["text"] for b in content if b["type"] == "text"]
    return texts


async def test_a_failing_server_hands_the_turn_to_the_second_one(
    primary: FakeServer, backup: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A primary that keeps failing with 503 is retried, then the same request goes to the
    backup inside the one turn, which completes; the usage record names the backup."""
    primary.script(*(OPENAI_WIRE.failure(503, "down") for _ in range(2)))
    backup.script(ANTHROPIC_WIRE.answer("from the backup"))
    async with ag.open_runtime(store=MemoryStore()) as root:
        agent = (await root.agents.create(model=chain(primary, backup, max_retries=1))).agent
        assert await agent.ask("hello") == "from the backup"
        records = agent.session.records
    assert len(primary.seen) == 2  # the first attempt and its one retry
    [handed] = backup.seen
    assert user_texts(ANTHROPIC_WIRE, handed.body) == ["hello"]
    assert user_texts(OPENAI_WIRE, primary.seen[0].body) == ["hello"]
    [usage] = [r for r in records if isinstance(r, ModelUsage)]
    assert usage.model == "second"
    [ended] = [r for r in records if isinstance(r, TurnEnded)]
    assert ended.stop_reason is StopReason.COMPLETED


async def test_a_rate_limit_is_waited_out_on_the_same_model(
    primary: FakeServer, backup: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 429 with Retry-After: 5 waits 5 s and asks the same model again: the backup is
    never asked, and the answer is the primary's."""
    primary.script(OPENAI_WIRE.failure(429, "slow down", retry_after="5"))
    primary.script(OPENAI_WIRE.answer("from the primary"))
    events = await collect(chain(primary, backup))
    assert events[0] == TextDelta("from the primary")
    assert events[-1] == Finished(events[-1].reason, events[-1].usage, model="first")  # type: ignore[union-attr]
    first, second = primary.seen
    assert 5.0 <= second.at - first.at < 5.1
    assert backup.seen == []


async def test_a_rate_limit_the_deadline_cannot_wait_out_moves_on(
    primary: FakeServer, backup: FakeServer, autojump_clock: trio.testing.MockClock
) -> None:
    """A 429 asking for a wait past the primary's deadline is not waited for: the backup
    answers at once."""
    primary.script(OPENAI_WIRE.failure(429, "slow down", retry_after="30"))
    backup.script(ANTHROPIC_WIRE.answer("from the backup"))
    start = trio.current_time()
    events = await collect(chain(primary, backup, deadline=10.0))
    assert events[0] == TextDelta("from the backup")
    assert len(primary.seen) == 1
    assert backup.seen[0].at - start < 1.0


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (OPENAI_WIRE.failure(401, "bad key"), ModelErrorKind.AUTH),
        (OPENAI_WIRE.failure(404, "no such model", "model_not_found"), ModelErrorKind.NOT_FOUND),
        (
            OPENAI_WIRE.failure(400, "maximum context length is 10", "context_length_exceeded"),
            ModelErrorKind.CONTEXT_TOO_LONG,
        ),
    ],
    ids=["auth", "not-found", "context"],
)
async def test_a_failure_no_retry_can_fix_moves_on_at_once(
    primary: FakeServer, backup: FakeServer, reply: Reply, kind: ModelErrorKind
) -> None:
    """Auth, an unknown model and a context too long for the primary go to the backup
    without a retry of the primary."""
    primary.script(reply)
    backup.script(ANTHROPIC_WIRE.answer("fine"))
    with trio.fail_after(10):
        events = await collect(chain(primary, backup))
    assert events[0] == TextDelta("fine")
    assert len(primary.seen) == 1


async def test_a_refused_request_is_not_handed_on(primary: FakeServer, backup: FakeServer) -> None:
    """A 400 that is not about the window is the request's fault: the chain ends with the
    primary's error and the backup is never asked."""
    primary.script(OPENAI_WIRE.failure(400, "messages[0].role is invalid"))
    with trio.fail_after(10), pytest.raises(ModelError) as caught:
        await collect(chain(primary, backup))
    assert re.fullmatch(
        r".* refused the request \(HTTP 400\): messages\[0\].role is invalid", str(caught.value)
    )
    assert caught.value.kind is ModelErrorKind.REFUSED
    assert backup.seen == []


async def test_a_failure_after_output_is_not_handed_on(
    primary: FakeServer, backup: FakeServer
) -> None:
    """Text already streamed is never repeated by another model: a primary cut mid-answer
    ends the stream with its error."""
    primary.script(Reply(chunks=[OPENAI_WIRE.text("half")], cut=True))
    seen: list[ModelEvent] = []

    async def read() -> None:
        async with aclosing(chain(primary, backup).stream(REQUEST)) as stream:
            async for event in stream:
                seen.append(event)

    with trio.fail_after(10), pytest.raises(ModelError, match=r"^the connection to .* was lost"):
        await read()
    assert seen == [TextDelta("half")]
    assert backup.seen == []


async def test_every_model_failing_names_each_failure(
    primary: FakeServer, backup: FakeServer
) -> None:
    """When the whole chain fails, one error names each model's failure in order."""
    primary.script(OPENAI_WIRE.failure(401, "bad key"))
    backup.script(ANTHROPIC_WIRE.failure(401, "invalid x-api-key", "authentication_error"))
    with trio.fail_after(10), pytest.raises(ModelError) as caught:
        await collect(chain(primary, backup))
    assert re.fullmatch(
        r"every model of the chain failed: first: .* refused the API key \(401 Unauthorized\): "
        r"bad key; check OPENAI_API_KEY; second: .* refused the API key \(401 "
        r"authentication_error\): invalid x-api-key; check ANTHROPIC_API_KEY",
        str(caught.value),
    )
    assert caught.value.kind is ModelErrorKind.AUTH


async def test_a_chain_saying_too_long_anywhere_is_too_long(
    primary: FakeServer, backup: FakeServer
) -> None:
    """A chain whose primary said "too long" and whose backup is down is too long (so a turn
    compacts), with the smallest window a provider reported."""
    primary.script(
        OPENAI_WIRE.failure(
            400, "This model's maximum context length is 8192 tokens.", "context_length_exceeded"
        )
    )
    backup.script(ANTHROPIC_WIRE.failure(403, "no access", "permission_error"))
    with trio.fail_after(10), pytest.raises(ModelError) as caught:
        await collect(chain(primary, backup))
    assert caught.value.kind is ModelErrorKind.CONTEXT_TOO_LONG
    assert caught.value.limit == 8192


async def test_a_chain_spec_builds_the_chain_and_falls_back(
    primary: FakeServer, backup: FakeServer
) -> None:
    """``SPEC | SPEC`` is a chain everywhere a spec is taken: an agent created with one
    falls back from an unreachable key to the second model."""
    spec = f"{OPENAI_WIRE.spec(primary, 'first')} | {ANTHROPIC_WIRE.spec(backup, 'second')}"
    primary.script(OPENAI_WIRE.failure(401, "bad key"))
    backup.script(ANTHROPIC_WIRE.answer("hello from second"))
    with trio.fail_after(10):
        async with ag.open_runtime(store=MemoryStore()) as root:
            agent = (await root.agents.create(model=spec)).agent
            assert agent.config.model == spec
            assert await agent.ask("hi") == "hello from second"
            [usage] = [r for r in agent.session.records if isinstance(r, ModelUsage)]
    assert usage.model == "second"


def test_a_chain_spec_is_checked_member_by_member() -> None:
    """An empty member or a bad member spec is refused with a one-line error."""
    with pytest.raises(ModelSpecError, match=r"^model spec 'echo \| ' has an empty member; "):
        model_from_spec("echo | ")
    with pytest.raises(ModelSpecError, match=r"^unknown model spec 'nope'; known: "):
        model_from_spec("echo | nope")
    chained = model_from_spec("echo?context_window=900 | echo?context_window=500 | echo")
    assert isinstance(chained, FallbackModel)
    assert chained.name == "echo | echo | echo"
    assert chained.context_window == 500  # a request sized to it fits every member
    assert repr(chained) == "<FallbackModel 'echo | echo | echo'>"
    assert FallbackModel(["echo", "echo"]).context_window is None
    assert FallbackModel(["echo", "echo"], context_window=300).context_window == 300


def test_a_chain_needs_two_models() -> None:
    """One model is not a chain."""
    with pytest.raises(ValueError, match=r"^a FallbackModel needs two or more models"):
        FallbackModel([ScriptedModel.echo()])


def test_preflight_passes_when_one_model_can_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain whose first model has no key still answers through the next; with no model
    able to answer, the first one's error is raised."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    preflight(model_from_spec("openai:gpt-4o | echo"))
    with pytest.raises(ModelError, match=r"^OPENAI_API_KEY is not set; export it"):
        preflight(model_from_spec("openai:gpt-4o | anthropic:claude-haiku-4-5"))


def test_a_config_file_takes_a_list_of_models_as_a_chain(tmp_path: Path) -> None:
    """``model = [SPEC, SPEC]`` in a configuration file (the default, or an agent's) is the
    chain ``SPEC | SPEC``; a bad member is reported with where it is."""
    path = tmp_path / "agents.toml"
    path.write_text(
        'model = ["echo?context_window=900", "echo"]\n'
        '[[agents]]\nid = "a"\nmodel = ["echo", "echo?delay=1"]\n'
    )
    config = load_config(path)
    assert config.model == "echo?context_window=900 | echo"
    assert [agent.model for agent in config.agents] == ["echo | echo?delay=1"]
    path.write_text('model = ["echo", "nope"]\n')
    with pytest.raises(ConfigFileError, match=r"model: unknown model spec 'nope'; known: "):
        load_config(path)


async def test_the_command_answers_through_a_chain(
    primary: FakeServer, backup: FakeServer, tmp_path: Path
) -> None:
    """``trio-agents run --model "SPEC | SPEC"``: a refused key on the first model, and the
    installed command prints the second model's answer and exits 0."""
    primary.script(OPENAI_WIRE.failure(401, "bad key"))
    backup.script(ANTHROPIC_WIRE.answer("pong"))
    spec = f"{OPENAI_WIRE.spec(primary, 'first')} | {ANTHROPIC_WIRE.spec(backup, 'second')}"
    env = {**os.environ, "NO_COLOR": "1", "OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "sk-y"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    command = [str(TRIO_AGENTS), "run", "ping", "--model", spec, "--store", str(tmp_path)]
    with trio.fail_after(60):
        done = await trio.run_process(
            command, capture_stdout=True, capture_stderr=True, env=env, check=False
        )
    assert (done.returncode, done.stdout) == (0, b"pong\n"), done.stderr.decode()
    assert (len(primary.seen), len(backup.seen)) == (1, 1)
