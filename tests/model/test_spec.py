"""Model spec strings: echo forms and the scheme registry."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from trio_agents.model import (
    AnthropicModel,
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelSpecError,
    OpenAIChatModel,
    ScriptedModel,
    model_from_spec,
    register_model_scheme,
)


class _FakeModel:
    context_window: int | None = None

    def __init__(self, name: str) -> None:
        self.name = name

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        yield Finished(FinishReason.STOP)  # pragma: no cover


_ECHO_FORM = r"echo\?delay=SECONDS&context_window=TOKENS"


def test_echo_spec_builds_the_echo_model() -> None:
    """'echo' is ScriptedModel.echo() without delay."""
    model = model_from_spec("echo")
    assert isinstance(model, ScriptedModel)
    assert model.name == "echo"


@pytest.mark.parametrize("spec", ["echo?delay=2.5", " echo?delay=2.5 ", "echo?delay=0"])
def test_echo_spec_accepts_a_delay(spec: str) -> None:
    """'echo?delay=SECONDS' builds an echo model."""
    assert model_from_spec(spec).name == "echo"


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("echo?speed=2", r"echo takes delay and context_window \(got 'speed'\)"),
        ("echo?delay=1&delay=2", r"a repeated 'delay'"),
        ("echo?delay=fast", r"delay must be a number of seconds >= 0, got 'fast'"),
        ("echo?delay=-1", r"delay must be a number of seconds >= 0, got '-1'"),
        ("echo?delay=inf", r"got 'inf'"),
        ("echo?", r"echo takes delay and context_window"),
        ("echo?delay", r"echo takes delay and context_window \(got ''\)"),
        ("echo?context_window=0", r"context_window must be a whole number >= 1, got '0'"),
        ("echo?context_window=1.5", r"context_window must be a whole number >= 1, got '1.5'"),
        ("echo?context_window=", r"context_window must be a whole number >= 1, got ''"),
    ],
)
def test_bad_echo_parameters_list_the_valid_forms(spec: str, problem: str) -> None:
    """A bad echo query is a ModelSpecError naming the problem and the valid forms."""
    with pytest.raises(ModelSpecError, match=rf"^invalid model spec .*{problem}.*"):
        model_from_spec(spec)
    with pytest.raises(ValueError, match=rf"valid forms: echo, {_ECHO_FORM}$"):
        model_from_spec(spec)


@pytest.mark.parametrize("spec", ["x:y", "gpt", ""])
def test_unknown_spec_lists_the_known_forms(spec: str) -> None:
    """An unregistered scheme or unknown name is refused with the known forms."""
    with pytest.raises(
        ModelSpecError,
        match=rf"^unknown model spec {spec!r}; known: echo, {_ECHO_FORM}, "
        r"anthropic:MODEL, openai:MODEL, SPEC \| SPEC \(a chain\)$",
    ):
        model_from_spec(spec)


def test_registered_scheme_builds_through_its_factory() -> None:
    """'scheme:REST' calls the registered factory with REST; unregistering removes it."""
    seen: list[str] = []

    def factory(rest: str) -> _FakeModel:
        seen.append(rest)
        return _FakeModel(rest)

    unregister = register_model_scheme("fake", factory)
    try:
        assert model_from_spec("fake:big-model?temp=1").name == "big-model?temp=1"
        assert seen == ["big-model?temp=1"]
        with pytest.raises(
            ModelSpecError,
            match=rf"known: echo, {_ECHO_FORM}, anthropic:MODEL, fake:MODEL, openai:MODEL, "
            r"SPEC \| SPEC \(a chain\)$",
        ):
            model_from_spec("other:x")
        with pytest.raises(ModelSpecError, match=r"^model spec 'fake:' names no model"):
            model_from_spec("fake:")
        with pytest.raises(ValueError, match=r"^model scheme 'fake' is already registered"):
            register_model_scheme("fake", factory)
    finally:
        unregister()
    with pytest.raises(ModelSpecError, match=r"^unknown model spec"):
        model_from_spec("fake:big-model")


def test_a_stale_unregister_leaves_the_new_registration() -> None:
    """Unregistering after the scheme was registered again keeps the newer factory."""
    unregister_old = register_model_scheme("fake", _FakeModel)
    unregister_old()
    unregister_new = register_model_scheme("fake", lambda rest: _FakeModel(f"new {rest}"))
    try:
        unregister_old()
        assert model_from_spec("fake:m").name == "new m"
    finally:
        unregister_new()


@pytest.mark.parametrize("scheme", ["echo", "", "has space", "a:b"])
def test_invalid_scheme_names_are_refused(scheme: str) -> None:
    """Schemes are simple names, and 'echo' is reserved."""
    with pytest.raises(ValueError, match=r"^a model scheme is a name"):
        register_model_scheme(scheme, _FakeModel)


@pytest.mark.parametrize(
    ("spec", "window"),
    [
        ("echo", None),
        ("echo?context_window=2000", 2000),
        ("echo?delay=0.5&context_window=1", 1),
        ("openai:gpt-4o-mini?context_window=128000", 128000),
        ("anthropic:claude-haiku-4-5?context_window=200000&max_tokens=10", 200000),
        ("openai:gpt-4o-mini", None),
    ],
)
def test_specs_take_a_context_window(spec: str, window: int | None) -> None:
    """'?context_window=TOKENS' sets model.context_window; without it the window is unknown."""
    assert model_from_spec(spec).context_window == window


@pytest.mark.parametrize("raw", ["0", "-5", "1.5", "big", ""])
@pytest.mark.parametrize("scheme", ["echo?", "openai:m?", "anthropic:m?"])
def test_a_bad_context_window_is_a_clear_error(scheme: str, raw: str) -> None:
    """A context_window that is not a whole number >= 1 names the key, the rule and the value."""
    with pytest.raises(
        ModelSpecError, match=rf"context_window must be a whole number >= 1, got {raw!r}"
    ):
        model_from_spec(f"{scheme}context_window={raw}")


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_constructors_refuse_a_bad_context_window(value: object) -> None:
    """ScriptedModel and the providers refuse a window that is not a whole number >= 1."""
    with pytest.raises(ValueError, match=r"^context_window is a number of tokens >= 1"):
        ScriptedModel.echo(context_window=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^context_window is a number of tokens >= 1"):
        OpenAIChatModel("m", context_window=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^context_window is a number of tokens >= 1"):
        AnthropicModel("m", context_window=value)  # type: ignore[arg-type]
