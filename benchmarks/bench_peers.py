# The peers are installed only in ``nox -s bench-peers``'s venv, not in the type checker's:
# mypy: disable-error-code="import-not-found, import-untyped, untyped-decorator, misc"
"""The peer frameworks and trio_agents on the same scripted work in one run (``bench-peers``).

Three workloads, each on a scripted model that makes no network call and needs no key:

- **a turn**: one user message in, the model echoes it back as the final answer;
- **a tool turn**: the model calls an ``echo`` tool with the message, then answers with the
  tool's output (model -> tool -> model);
- **a cancel**: a run whose model is parked inside its call (on an Event never set) is
  cancelled, timed until the caller sees the run end; p50 of ``SAMPLES``.

Peers, each in its own idiom, the pinned versions in the ``peers`` dependency group:

- **OpenAI Agents** (``openai-agents``): ``Runner.run(agent, text)`` with a custom ``Model``
  (``get_response`` returns the scripted ``ModelResponse``); tracing disabled (it would export
  to OpenAI otherwise); the tool is a ``@function_tool``. A cancel is ``task.cancel()`` of the
  task awaiting ``Runner.run``.
- **Pydantic AI** (``pydantic-ai-slim``): ``agent.run(text)`` on a ``FunctionModel``; the tool
  is ``@agent.tool_plain``. A cancel is ``task.cancel()``.
- **LangGraph** (``langgraph``): the standard tool-calling graph, a ``StateGraph`` on
  ``MessagesState`` with a model node (an async function returning the scripted ``AIMessage``),
  ``ToolNode`` and ``tools_condition``, compiled once; ``graph.ainvoke`` per turn. A cancel is
  ``task.cancel()``.

Every peer runs on asyncio; its floor is raw asyncio in the same process: a long-lived task
that takes the message from an ``asyncio.Queue``, appends five records to a list (seven, with
the tool awaited, for the tool turn) and puts the reply on a second queue; for a cancel, a
task blocked on an ``asyncio.Event``, from ``task.cancel()`` until the awaiting caller sees it
end. trio_agents runs the same work in ``trio.run`` (``bench_agents``, ``bench_tools`` and
``bench_cancel``'s sides, their raw-trio floors too). Each round runs every side once, the
asyncio ones in one ``asyncio.run`` and the trio ones in one ``trio.run``, rounds interleaved;
each side keeps its best round (a noisy neighbour only ever makes a round slower).

Peers are stateless per run here (a fresh run with one message: no history, no session
store); trio_agents' turns keep their session (a ``MemoryStore``) and run on one agent, as
``bench_agents`` does. The "x best peer" column is trio_agents' rate over the best peer's (a
cancel: the best peer's p50 over trio_agents', so above 1 is faster either way).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

import trio

import trio_agents as ta

from . import bench_agents, bench_cancel, bench_tools

ROUNDS = 3
TURNS = 200
SAMPLES = 200
PEERS = ("openai-agents", "pydantic-ai-slim", "langgraph")

Timed = Callable[[int], Awaitable[float]]


# -- raw asyncio floor ---------------------------------------------------------------------


async def _asyncio_echo(text: str) -> str:
    await asyncio.sleep(0)
    return text


async def _asyncio_floor(turns: int, tool: bool) -> float:
    inbox: asyncio.Queue[str] = asyncio.Queue(1)
    replies: asyncio.Queue[str] = asyncio.Queue(1)
    records: list[tuple[str, ...]] = []

    async def agent() -> None:
        while True:
            message = await inbox.get()
            records.append(("inbox", message))
            records.append(("turn-started",))
            records.append(("user", message))
            if tool:
                records.append(("tool-call", message))
                reply = await _asyncio_echo(message)
                records.append(("tool-output", reply))
            else:
                reply = str(message)
            records.append(("assistant", reply))
            records.append(("turn-ended", "completed"))
            await replies.put(reply)

    task = asyncio.create_task(agent())
    start = time.perf_counter()
    for i in range(turns):
        inbox.put_nowait(f"hello {i}")
        await replies.get()
    elapsed = time.perf_counter() - start
    task.cancel()
    return elapsed


async def _asyncio_cancel() -> float:
    parked = asyncio.Event()

    async def waiter() -> None:
        parked.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(waiter())
    await parked.wait()
    return await _time_cancel(task)


async def _time_cancel(task: asyncio.Task[Any]) -> float:
    start = time.perf_counter()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return time.perf_counter() - start


async def _cancel_run(run: Callable[[asyncio.Event], Awaitable[object]]) -> float:
    """Start ``run``, wait until its model is parked, then time its cancel."""
    parked = asyncio.Event()
    task = asyncio.ensure_future(run(parked))
    await parked.wait()
    await asyncio.sleep(0)  # let the model's frame reach its wait
    return await _time_cancel(task)


async def _timed_runs(run: Callable[[str], Awaitable[str]], turns: int) -> float:
    start = time.perf_counter()
    for i in range(turns):
        text = f"hello {i}"
        answer = await run(text)
        assert answer == text, f"the peer answered {answer!r} to {text!r}"
    return time.perf_counter() - start


# -- OpenAI Agents -------------------------------------------------------------------------


def _openai_agents() -> tuple[Timed, Timed, Callable[[], Awaitable[float]]]:
    from agents import (
        Agent,
        Model,
        ModelResponse,
        Runner,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)

    def message(text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id="msg",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )

    def last_text(items: Any) -> tuple[str, str]:
        if isinstance(items, str):
            return "user", items
        last = items[-1]
        if last.get("type") == "function_call_output":
            return "tool", str(last["output"])
        return "user", str(last["content"])

    class Scripted(Model):
        def __init__(self, tools: bool = False, park: asyncio.Event | None = None) -> None:
            self.tools, self.park = tools, park

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            if self.park is not None:
                self.park.set()
                await asyncio.Event().wait()
            kind, text = last_text(input)
            if self.tools and kind == "user":
                call = ResponseFunctionToolCall(
                    id="fc",
                    call_id="call-1",
                    type="function_call",
                    name="echo",
                    arguments=json.dumps({"text": text}),
                )
                return ModelResponse(output=[call], usage=Usage(), response_id=None)
            return ModelResponse(output=[message(text)], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kw: Any) -> Any:
            raise NotImplementedError

    @function_tool
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    plain = Agent(name="bench", model=Scripted())
    tooled = Agent(name="bench-tool", model=Scripted(tools=True), tools=[echo])

    async def turn(agent: Any, text: str) -> str:
        result = await Runner.run(agent, text)
        return str(result.final_output)

    async def turns(n: int) -> float:
        return await _timed_runs(lambda text: turn(plain, text), n)

    async def tool_turns(n: int) -> float:
        return await _timed_runs(lambda text: turn(tooled, text), n)

    async def cancel() -> float:
        return await _cancel_run(
            lambda parked: Runner.run(Agent(name="p", model=Scripted(park=parked)), "go")
        )

    return turns, tool_turns, cancel


# -- Pydantic AI ---------------------------------------------------------------------------


def _pydantic_ai() -> tuple[Timed, Timed, Callable[[], Awaitable[float]]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def last_part(messages: Any) -> Any:
        return messages[-1].parts[-1]

    async def echo_model(messages: Any, info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(str(last_part(messages).content))])

    async def tool_model(messages: Any, info: AgentInfo) -> ModelResponse:
        part = last_part(messages)
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(str(part.content))])
        return ModelResponse(parts=[ToolCallPart("echo", {"text": part.content}, "call-1")])

    plain: Any = Agent(FunctionModel(echo_model))
    tooled: Any = Agent(FunctionModel(tool_model))

    @tooled.tool_plain
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    async def turn(agent: Any, text: str) -> str:
        result = await agent.run(text)
        return str(result.output)

    async def turns(n: int) -> float:
        return await _timed_runs(lambda text: turn(plain, text), n)

    async def tool_turns(n: int) -> float:
        return await _timed_runs(lambda text: turn(tooled, text), n)

    def parked_agent(parked: asyncio.Event) -> Any:
        async def model(messages: Any, info: AgentInfo) -> ModelResponse:
            parked.set()
            await asyncio.Event().wait()
            raise AssertionError("never reached")

        return Agent(FunctionModel(model))

    async def cancel() -> float:
        return await _cancel_run(lambda parked: parked_agent(parked).run("go"))

    return turns, tool_turns, cancel


# -- LangGraph -----------------------------------------------------------------------------


def _langgraph() -> tuple[Timed, Timed, Callable[[], Awaitable[float]]]:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    async def echo(text: str) -> str:
        """Return the text."""
        return text

    def graph(model: Callable[[MessagesState], Awaitable[dict[str, Any]]], tools: bool) -> Any:
        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_edge(START, "model")
        if tools:
            builder.add_node("tools", ToolNode([echo]))
            builder.add_conditional_edges("model", tools_condition)
            builder.add_edge("tools", "model")
        else:
            builder.add_edge("model", END)
        return builder.compile()

    async def echo_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=state["messages"][-1].content)]}

    async def tool_model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=last.content)]}
        call = {"name": "echo", "args": {"text": last.content}, "id": "call-1"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    plain, tooled = graph(echo_model, False), graph(tool_model, True)

    async def turn(compiled: Any, text: str) -> str:
        state = await compiled.ainvoke({"messages": [("user", text)]})
        return str(state["messages"][-1].content)

    async def turns(n: int) -> float:
        return await _timed_runs(lambda text: turn(plain, text), n)

    async def tool_turns(n: int) -> float:
        return await _timed_runs(lambda text: turn(tooled, text), n)

    def parked_graph(parked: asyncio.Event) -> Any:
        async def model(state: MessagesState) -> dict[str, Any]:
            parked.set()
            await asyncio.Event().wait()
            raise AssertionError("never reached")

        return graph(model, False)

    async def cancel() -> float:
        return await _cancel_run(lambda parked: parked_graph(parked).ainvoke({"messages": []}))

    return turns, tool_turns, cancel


_BUILDERS = {
    "openai-agents": _openai_agents,
    "pydantic-ai-slim": _pydantic_ai,
    "langgraph": _langgraph,
}


# -- the run -------------------------------------------------------------------------------


def _p50(samples: list[float]) -> float:
    return statistics.median(samples)


async def _asyncio_round(
    peers: dict[str, tuple[Timed, Timed, Callable[[], Awaitable[float]]]], turns: int, samples: int
) -> dict[str, float]:
    r: dict[str, float] = {
        "asyncio floor:turn": await _asyncio_floor(turns, tool=False),
        "asyncio floor:tool": await _asyncio_floor(turns, tool=True),
        "asyncio floor:cancel": _p50([await _asyncio_cancel() for _ in range(samples)]),
    }
    for name, (turn, tool, cancel) in peers.items():
        await turn(10)  # warm-up: imports, caches, schema builds
        await tool(10)
        r[f"{name}:turn"] = await turn(turns)
        r[f"{name}:tool"] = await tool(turns)
        r[f"{name}:cancel"] = _p50([await cancel() for _ in range(samples)])
    return r


async def _trio_round(turns: int, samples: int) -> dict[str, float]:
    r = {
        "trio floor:turn": await bench_agents.raw_turns(turns),
        "trio floor:tool": await bench_tools.raw_tool_turns(turns),
    }
    raw: list[float] = []
    cancels: list[float] = []
    async with ta.open_runtime(store=ta.MemoryStore()) as root:
        await bench_agents.agent_turns(root, 10)
        r["trio_agents:turn"] = await bench_agents.agent_turns(root, turns)
        r["trio_agents:tool"] = await bench_tools.tool_turns(root, turns)
        handle = await root.agents.create(model=bench_cancel.Parked())
        async with trio.open_nursery() as nursery:
            for _ in range(samples):
                raw.append(await bench_cancel.raw_cancel(nursery))
                cancels.append(await bench_cancel.agent_cancel(handle.agent))
        await handle.dispose()
    r["trio floor:cancel"] = _p50(raw)
    r["trio_agents:cancel"] = _p50(cancels)
    return r


def measure(rounds: int = ROUNDS, turns: int = TURNS, samples: int = SAMPLES) -> dict[str, float]:
    """Best-of-``rounds`` seconds of every side (``"side:workload"``), rounds interleaved."""
    peers = {name: _BUILDERS[name]() for name in PEERS}
    best: dict[str, float] = {}
    for _ in range(rounds):
        for side in (
            asyncio.run(_asyncio_round(peers, turns, samples)),
            trio.run(_trio_round, turns, samples),
        ):
            for key, seconds in side.items():
                best[key] = min(best.get(key, float("inf")), seconds)
    return best


SIDES = ("trio_agents", "trio floor", "asyncio floor", *PEERS)


def table(best: dict[str, float], turns: int = TURNS) -> list[str]:
    """The printed table: turns/s, tool turns/s, cancel p50 per side and x best peer."""
    rows = [f"  {'':<28}{'turns/s':>12}{'tool turns/s':>14}{'cancel p50':>14}"]
    for side in SIDES:
        label = side if side not in PEERS else f"{side} {version(side)}"
        rows.append(
            f"  {label:<28}{turns / best[f'{side}:turn']:>12,.0f}"
            f"{turns / best[f'{side}:tool']:>14,.0f}{best[f'{side}:cancel'] * 1e6:>11,.0f} us"
        )
    x = x_best_peer(best)
    rows.append(
        f"  {'trio_agents x best peer':<28}{x['x_best_turn']:>11.1f}x"
        f"{x['x_best_tool']:>13.1f}x{x['x_best_cancel']:>13.1f}x"
    )
    floor = [best[f"trio floor:{w}"] / best[f"trio_agents:{w}"] for w in ("turn", "tool", "cancel")]
    rows.append(
        f"  {'trio_agents x its trio floor':<28}{floor[0]:>11.2f}x{floor[1]:>13.2f}x"
        f"{floor[2]:>13.2f}x"
    )
    return rows


def missing() -> list[str]:
    """The peer frameworks not installed in this interpreter."""
    modules = {
        "openai-agents": "agents",
        "pydantic-ai-slim": "pydantic_ai",
        "langgraph": "langgraph",
    }
    return [name for name in PEERS if importlib.util.find_spec(modules[name]) is None]


def x_best_peer(best: dict[str, float]) -> dict[str, float]:
    """trio_agents over the best peer per workload (a cancel: the best p50 over trio_agents')."""
    return {
        f"x_best_{work}": min(best[f"{p}:{work}"] for p in PEERS) / best[f"trio_agents:{work}"]
        for work in ("turn", "tool", "cancel")
    }


def main(rounds: int = ROUNDS, turns: int = TURNS, samples: int = SAMPLES) -> dict[str, float]:
    """Measure and print the table; the best seconds of every side and the x-best-peer ratios,
    or nothing (said why) where the peers are not installed."""
    absent = missing()
    if absent:
        print(f"peers: not measured ({', '.join(absent)} not installed: nox -s bench-peers)")
        return {}
    best = measure(rounds, turns, samples)
    print(
        f"peers on the same scripted work (best of {rounds} rounds x {turns} turns, "
        f"cancel p50 of {samples}; fake models, no network):"
    )
    for row in table(best, turns):
        print(row)
    return {**best, **x_best_peer(best)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_peers")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="rounds, each side's best kept")
    parser.add_argument("--turns", type=int, default=TURNS, help="turns a round")
    parser.add_argument("--samples", type=int, default=SAMPLES, help="cancels a round")
    args = parser.parse_args()
    main(args.rounds, args.turns, args.samples)
