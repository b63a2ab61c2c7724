"""Typed service keys: ``ctx.get(key)``, ``ctx.service(key)``, ``ctx.provide(key, ...)``."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
import trio.testing

import trio_agents as ta
from tests.helpers.paths import TYPING
from tests.helpers.support import P, state_of
from trio_agents.kernel import Context, FiberState, ServiceKey, open_root
from trio_agents.kernel._errors import ServiceAccessError, ServiceConflictError

GREETING: ServiceKey[str] = ServiceKey("greeting")


def _provider(value: str) -> P:
    async def apply(ctx: Context, config: None) -> None:
        ctx.provide(GREETING, value)

    return P("provider", apply)


async def test_a_key_is_its_name_for_provide_get_and_attribute_access() -> None:
    """provide(key) publishes under key.name; get(key), get(name) and ctx.<name> agree."""
    seen: list[str | None] = []

    async def consume(ctx: Context, config: None) -> None:
        seen.extend([ctx.service(GREETING), ctx.greeting, ctx.get(GREETING), ctx.get("greeting")])

    async with open_root() as root:
        assert root.get(GREETING) is None
        await root.plugin(_provider("hi"))
        await root.plugin(P("consumer", consume, inject=("greeting",)))
    assert seen == ["hi"] * 4
    assert str(GREETING) == "greeting"


async def test_inject_takes_keys_and_waits_for_them() -> None:
    """A plugin that injects a key is pending until the key's service is provided."""

    class Consumer:
        name = "consumer"
        inject = (GREETING,)

        async def apply(self, ctx: Context, config: None) -> None:
            assert ctx.service(GREETING) == "late"

    async with open_root() as root:
        consumer = await root.plugin(Consumer())
        assert consumer.spec.inject == ("greeting",)
        assert state_of(consumer) is FiberState.PENDING
        await root.plugin(_provider("late"))
        await trio.testing.wait_all_tasks_blocked()
        assert state_of(consumer) is FiberState.ACTIVE


async def test_service_by_key_is_as_strict_as_attribute_access() -> None:
    """ctx.service(key) without the declaration raises the error that names the fix."""
    errors: list[str] = []

    async def undeclared(ctx: Context, config: None) -> None:
        with pytest.raises(ServiceAccessError) as caught:
            ctx.service(GREETING)
        errors.append(str(caught.value))

    async with open_root() as root:
        await root.plugin(_provider("hi"))
        await root.plugin(P("undeclared", undeclared))
    assert errors == [
        "plugin 'undeclared' did not declare 'greeting' in inject; add it, "
        "or use ctx.get('greeting') from foreign fibers"
    ]


async def test_service_by_key_of_a_missing_service_says_to_provide_it() -> None:
    """At the root (which may use every service) an absent service is refused with the fix."""
    async with open_root() as root:
        with pytest.raises(
            ServiceAccessError,
            match=r"^service 'greeting' is not provided; apply a plugin that provides it first$",
        ):
            root.service(GREETING)


async def test_a_key_collides_like_its_name() -> None:
    """Two providers of one key: the second is refused, naming the first."""
    async with open_root() as root:
        await root.plugin(_provider("one"))
        with pytest.raises(ServiceConflictError, match=r"^service 'greeting' is already provided"):
            await root.plugin(_provider("two"))


def _typed_plugin_module() -> ModuleType:
    # Loaded by path: the directory is named after what it checks (typing), not importable.
    path = TYPING / "typed_user_plugin.py"
    spec = importlib.util.spec_from_file_location("typed_user_plugin", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_the_typed_user_plugin_sees_the_runtime_services() -> None:
    """The mypy-checked plugin of tests/typing runs: typed services, agent, enum statuses."""
    module = _typed_plugin_module()
    plugin = module.TypedPlugin()
    async with ta.open_runtime() as root:
        await root.plugin(plugin)
        assert root.get("typed_greeting") == "hello"
    assert plugin.seen == [
        module.Probe(
            agents=0,
            tools=("whoami",),
            default_model="ScriptedModel",
            stored=True,
            shell=False,
            statuses=(
                ta.AgentStatus.RUNNING,
                ta.AgentStatus.IDLE,
                ta.AgentStatus.DISPOSING,
                ta.AgentStatus.DISPOSED,
            ),
            caller=plugin.seen[0].caller,
        )
    ]
    assert plugin.seen[0].caller is not None


def test_the_runtime_keys_name_the_core_services() -> None:
    """Each key the package exports is the name its provider publishes under."""
    names = {key.name for key in (ta.AGENTS, ta.TOOLS, ta.SESSIONS, ta.MODELS, ta.SHELL)}
    assert names == {"agents", "tools", "sessions", "models", "shell"}
