"""``open_runtime``: a root context with the core plugins applied."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..kernel import Context, open_root
from ..model import DEFAULT_PRICES, Model, ModelsPlugin, Price, PriceTable
from ..session import MemoryStore, SessionStore, store_from_spec
from ..tracing import open_tracing
from ._collector import check_gc_threshold, collector_threshold
from ._compaction import CompactionPlugin, Compactor
from ._definitions import AgentDefinition
from ._events import AgentCancelRequested, AgentCreated, AgentDisposed
from ._factory import AgentFactory, DefaultAgentFactory, FactoryPlugin
from ._hooks import hooks_plugin
from ._loop import AgentLoop, DeclaredAgent, agent_loop
from ._tools import tools_plugin

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider


@asynccontextmanager
async def open_runtime(
    *,
    store: SessionStore | str | None = None,
    model: Model | str | None = None,
    agents: list[DeclaredAgent] | None = None,
    compactor: Compactor | None = None,
    factory: AgentFactory[Any] | None = None,
    core: bool = True,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    deps: object = None,
    definitions: list[AgentDefinition] | None = None,
    prices: PriceTable | Mapping[str, Price] | None = None,
    gc_threshold: int | None = None,
) -> AsyncIterator[Context]:
    """Open a runtime and yield its root :class:`Context`.

    Args:
        store: the session store, or a store spec (``DIR``, ``"memory"``,
            ``"sqlite:PATH"``, ``"postgresql://..."``; see ``store_from_spec``); a
            :class:`MemoryStore` when ``None``.
        model: the default model (a :class:`Model` or a spec such as ``"echo?delay=1"``);
            ``ScriptedModel.echo()`` when ``None``.
        agents: agents to declare in the ``AgentLoop``'s configuration (it owns them).
        compactor: the compaction policy (the service ``compaction``); a
            :class:`SummarizingCompactor` when ``None``.
        factory: what builds the agents of ``ctx.agents`` (the service ``agent_factory``);
            a :class:`DefaultAgentFactory` (today's :class:`Agent`) when ``None``.
        core: apply the core plugins (sessions, models, tools, agent loop); ``False`` gives a
            bare kernel root.
        tracer_provider: an OpenTelemetry ``TracerProvider`` to trace the runtime with
            (:doc:`/observability`; the ``otel`` extra); tracing is off when ``None``.
        meter_provider: an OpenTelemetry ``MeterProvider`` for the runtime's metrics
            (token usage, durations, live agents, turns and jobs); none are recorded
            without one.
        deps: the application's own dependencies (a database pool, a client, settings):
            every agent's tools see them as ``ctx.deps`` unless the agent was given its own
            (``create(..., deps=...)``). Held by the agent loop, never stored.
        definitions: agent definitions the ``task`` tool starts children from, owned by the
            agent loop (``ctx.agents.define`` adds more, owned by the caller).
        prices: what each model's tokens cost (US dollars per million): a
            :class:`PriceTable`, or prices by model name added to ``DEFAULT_PRICES``.
            A request's cost is recorded on its ``ModelUsage`` and counts against a
            ``cost`` budget.
        gc_threshold: CPython's cyclic garbage collector's generation-0 threshold while the
            runtime is open (``gc.set_threshold``; CPython 3.11 and 3.12 default to 700),
            the previous thresholds restored when it closes. The setting is process-global,
            so it is off unless given. With thousands of agents running turns at once,
            ``100_000`` keeps the collector from walking every agent's objects again and
            again (:doc:`/benchmarks`, "Many agents").

    Leaving the block tears everything down in reverse order of set-up: the agent loop (and so
    every agent, each flushing its session) before the factory, the compaction policy, the
    tools, models and session store.

    Raises:
        StoreSpecError: ``store`` is a spec that is not valid.
        ValueError: ``gc_threshold`` is not an int >= 1.
    """
    check_gc_threshold(gc_threshold)
    if isinstance(store, str):
        store = store_from_spec(store)
    async with (
        # First in, last out: the previous threshold is back only after the last teardown.
        collector_threshold(gc_threshold),
        open_root() as root,
        open_tracing(
            root,
            tracer_provider,
            meter_provider=meter_provider,
            live=(AgentCreated, AgentDisposed, AgentCancelRequested),
        ),
    ):
        if core:
            await root.plugin(store if store is not None else MemoryStore())
            if prices is not None and not isinstance(prices, PriceTable):
                prices = DEFAULT_PRICES.with_prices(prices)
            await root.plugin(ModelsPlugin(model, prices))
            await root.plugin(tools_plugin)
            await root.plugin(hooks_plugin)
            await root.plugin(CompactionPlugin(compactor))
            await root.plugin(FactoryPlugin(factory or DefaultAgentFactory()))
            loop = agent_loop if deps is None else AgentLoop(deps=deps)
            await root.plugin(
                loop,
                AgentLoop.Config(agents=list(agents or ()), definitions=list(definitions or ())),
            )
        yield root
