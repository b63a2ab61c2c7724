"""Metrics of a traced runtime: GenAI token usage and durations, live up-down counters."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import attrs
import trio
import trio.testing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import trio_agents.agent as ag
from tests.helpers.support import Tools
from tests.helpers.tracing_support import counts, in_memory, metrics_reader, points
from trio_agents.model import CallTool, Say, ScriptedModel
from trio_agents.session import ModelUsage, Record
from trio_agents.shell import JobDone, LocalShell, tool_bash


@attrs.frozen
class SleepParams:
    seconds: float


async def _sleep(call: ag.ToolContext, params: SleepParams) -> str:
    await trio.sleep(params.seconds)
    return "slept"


SLEEP = ag.Tool("sleep", "Sleep for a while.", SleepParams, _sleep)


def durations(
    reader: InMemoryMetricReader, operation: str
) -> list[tuple[float, dict[str, object]]]:
    """(sum, attributes) of each duration series of ``operation``."""
    found = points(reader, "gen_ai.client.operation.duration")
    return [
        (p.sum, dict(p.attributes))
        for p in found
        if p.attributes["gen_ai.operation.name"] == operation
    ]


async def _run_to_idle(model: ScriptedModel, meters: MeterProvider) -> tuple[Record, ...]:
    """Prompt one traced, metered agent with the sleep tool; its records once it is idle."""
    provider, _ = in_memory()
    async with ag.open_runtime(
        model=model, tracer_provider=provider, meter_provider=meters
    ) as root:
        await root.plugin(Tools(SLEEP))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await agent.when_idle()
        records: tuple[Record, ...] = agent.session.records
        return records


async def test_token_usage_and_durations_follow_the_genai_conventions(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tokens by type, and durations of the turn, its requests and its tool call, exactly."""
    meters, reader = metrics_reader()
    model = ScriptedModel([[CallTool("sleep", {"seconds": 2})], [Say("done", delay=0.5)]])
    records = await _run_to_idle(model, meters)
    usage = [r for r in records if isinstance(r, ModelUsage)]
    tokens = {
        p.attributes["gen_ai.token.type"]: (p.count, p.sum)
        for p in points(reader, "gen_ai.client.token.usage")
    }
    assert tokens == {
        "input": (2, sum(u.input_tokens for u in usage)),
        "output": (2, sum(u.output_tokens for u in usage)),
    }
    [(chat, chat_attributes)] = durations(reader, "chat")
    assert chat == 0.5
    assert chat_attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "trio_agents.scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
    }
    assert durations(reader, "execute_tool") == [
        (2.0, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "sleep"})
    ]
    assert durations(reader, "invoke_agent") == [(2.5, {"gen_ai.operation.name": "invoke_agent"})]


async def test_a_cancelled_turn_and_call_are_measured_with_their_error_type(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A cancel mid-call: the durations of the turn and the call say error.type=cancelled."""
    provider, _ = in_memory()
    meters, reader = metrics_reader()
    model = ScriptedModel([[CallTool("sleep", {"seconds": 100})]])
    async with ag.open_runtime(
        model=model, tracer_provider=provider, meter_provider=meters
    ) as root:
        await root.plugin(Tools(SLEEP))
        agent = (await root.agents.create()).agent
        agent.prompt("go")
        await trio.sleep(3)
        assert counts(reader)["trio_agents.turns.running"] == 1
        agent.cancel()
        await agent.when_idle()
        assert counts(reader)["trio_agents.turns.running"] == 0
    [(turn, turn_attributes)] = durations(reader, "invoke_agent")
    assert (turn, turn_attributes["error.type"]) == (3.0, "cancelled")
    [(call, call_attributes)] = durations(reader, "execute_tool")
    assert (call, call_attributes["error.type"]) == (3.0, "cancelled")


async def test_live_agents_running_turns_and_jobs_are_counted_up_and_down() -> None:
    """The up-down counters follow an agent, its turn and a background job, back to zero."""
    meters, reader = metrics_reader()
    model = ScriptedModel(
        [[CallTool("bash", {"command": "sleep 30", "run_in_background": True})], [Say("ok")]]
    )
    async with ag.open_runtime(model=model, meter_provider=meters) as root:
        await root.plugin(LocalShell())
        await root.plugin(tool_bash)
        done = trio.Event()
        root.on(JobDone, lambda event: done.set())
        assert counts(reader)["trio_agents.agents"] == 0
        handle = await root.agents.create()
        other = await root.agents.create()
        assert counts(reader)["trio_agents.agents"] == 2
        await other.dispose()
        handle.agent.prompt("go")
        await handle.agent.when_idle()
        assert counts(reader) == {
            "trio_agents.agents": 1,
            "trio_agents.turns.running": 0,
            "trio_agents.jobs.running": 1,
        }
        shell = root.get("shell")
        await shell.kill("bash-1")
        await done.wait()
        assert counts(reader)["trio_agents.jobs.running"] == 0
        await handle.dispose()
        assert counts(reader)["trio_agents.agents"] == 0


async def test_a_failed_call_leaves_the_next_calls_measure_without_its_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tool's calls share their series' attributes: an error marks only its own measure."""
    meters, reader = metrics_reader()
    model = ScriptedModel(
        [
            [CallTool("sleep", {"seconds": "long"})],
            [CallTool("sleep", {"seconds": 1})],
            [Say("done")],
        ]
    )
    await _run_to_idle(model, meters)
    calls = sorted(durations(reader, "execute_tool"), key=lambda found: found[0])
    assert calls == [
        (
            0.0,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "sleep",
                "error.type": "tool_error",
            },
        ),
        (1.0, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "sleep"}),
    ]


GLOBAL_METER_SCRIPT = textwrap.dedent(
    """
    import trio
    import trio_agents as ta
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    async def main():
        async with ta.open_runtime(tracer_provider=TracerProvider()) as root:
            agent = (await root.agents.create()).agent
            agent.prompt("hi")
            await agent.when_idle()

    trio.run(main)
    data = reader.get_metrics_data()
    found = data.resource_metrics if data else ()
    print(sum(len(scope.metrics) for r in found for scope in r.scope_metrics))
    """
)


def test_a_runtime_traced_without_a_meter_provider_records_no_metric() -> None:
    """Spans only: no instrument is called, not even on a global meter provider."""
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_METER_SCRIPT],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "0\n"), done.stderr
