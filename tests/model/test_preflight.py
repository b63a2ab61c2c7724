"""What a model needs is checked before anything is stored for it (issue 34, item 3).

A missing ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` used to be found only when the first
turn asked the model, after the session was stored: every try left a session behind.
``model.preflight`` checks it when the model is resolved (``agents.create``/``resume``) and
when the command reads its options, so nothing is stored.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

import trio_agents as ta
from tests.helpers.support import TRIO_AGENTS
from trio_agents.model import (
    AnthropicModel,
    ModelError,
    OpenAIChatModel,
    ScriptedModel,
    model_from_spec,
    preflight,
)

KEYS = {"openai": "OPENAI", "anthropic": "ANTHROPIC"}


@pytest.fixture(params=sorted(KEYS))
def scheme(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A provider scheme, with its key and base URL unset in this process."""
    value: str = request.param
    monkeypatch.delenv(f"{KEYS[value]}_API_KEY", raising=False)
    monkeypatch.delenv(f"{KEYS[value]}_BASE_URL", raising=False)
    return value


def entries(directory: Path) -> list[Path]:
    """What ``directory`` holds (nothing if it does not exist)."""
    return list(directory.iterdir()) if directory.exists() else []


def missing(scheme: str) -> str:
    return rf"^{KEYS[scheme]}_API_KEY is not set; export it or pass api_key=$"


def test_preflight_refuses_a_provider_without_its_key(scheme: str) -> None:
    """preflight() names the missing variable; building the model alone does not."""
    model = model_from_spec(f"{scheme}:test-model")
    with pytest.raises(ModelError, match=missing(scheme)):
        preflight(model)


def test_preflight_passes_a_key_another_endpoint_or_a_model_without_the_method(
    scheme: str,
) -> None:
    """A key, another endpoint (a local server needs none), or a model with no preflight()."""
    preflight(model_from_spec(f"{scheme}:test-model?base_url=http://127.0.0.1:9"))
    preflight(OpenAIChatModel("m", api_key="k"))
    preflight(AnthropicModel("m", api_key="k"))
    preflight(ScriptedModel.echo())


async def test_create_without_the_key_stores_nothing(scheme: str, tmp_path: Path) -> None:
    """agents.create with a spec (or a default model) lacking its key raises ModelError and
    leaves no session, stored or live."""
    store = ta.JsonlStore(tmp_path)
    async with ta.open_runtime(store=store, model=f"{scheme}:test-model") as root:
        with pytest.raises(ModelError, match=missing(scheme)):
            await root.agents.create(session_id="s1")
        with pytest.raises(ModelError, match=missing(scheme)):
            await root.agents.create(model=f"{scheme}:test-model", session_id="s2")
        assert root.agents.list() == ()
        assert await store.list() == []
    assert entries(tmp_path) == []


async def test_resume_onto_a_model_without_its_key_changes_nothing(
    scheme: str, tmp_path: Path
) -> None:
    """Resuming onto a provider without its key raises ModelError; the stored session is
    left as it was."""
    store = ta.JsonlStore(tmp_path)
    async with ta.open_runtime(store=store) as root:
        handle = await root.agents.create(session_id="s1")
        await handle.agent.ask("hello")
        await handle.dispose()
        before = (tmp_path / "s1.jsonl").read_bytes()
        with pytest.raises(ModelError, match=missing(scheme)):
            await root.agents.resume("s1", model=f"{scheme}:test-model")
        assert root.agents.list() == ()
    assert (tmp_path / "s1.jsonl").read_bytes() == before


async def test_run_without_the_key_is_one_line_and_stores_nothing(
    scheme: str, tmp_path: Path
) -> None:
    """``trio-agents run --store DIR --model SCHEME:x`` with the key unset: exit 1, one line
    naming the variable, and DIR holds no session."""
    env = {**os.environ, "TRIO_AGENTS_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env.pop("TRIO_AGENTS_DEBUG", None)
    store = tmp_path / "sessions"
    args = ["run", "hello", "--store", str(store), "--model", f"{scheme}:x"]
    with trio.fail_after(60):
        done = await trio.run_process(
            [str(TRIO_AGENTS), *args], capture_stdout=True, capture_stderr=True, env=env,
            check=False,
        )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == b""
    assert done.stderr.decode() == (
        f"trio-agents: error: {KEYS[scheme]}_API_KEY is not set; export it or pass api_key=\n"
    )
    assert entries(store) == []
