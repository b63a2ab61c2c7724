"""Model spec strings: echo forms and the scheme registry."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from trio_agents.model import (
    Finished,
    FinishReason,
    ModelEvent,
    ModelRequest,
    ModelSpecError,
    ScriptedModel,
    model_from_spec,
    register_model_scheme,
)


class _FakeModel:
    def __init__(self, name: str) -> None:
        self.name = name

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        yield Finished(FinishReason.STOP)  # pragma: no cover


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
        ("echo?speed=2", r"echo takes only 'delay' \(got 'speed'\)"),
        ("echo?delay=1&delay=2", r"a repeated 'delay'"),
        ("echo?delay=fast", r"delay must be a number of seconds >= 0, got 'fast'"),
        ("echo?delay=-1", r"delay must be a number of seconds >= 0, got '-1'"),
        ("echo?delay=inf", r"got 'inf'"),
        ("echo?", r"echo takes only 'delay'"),
        ("echo?delay", r"echo takes only 'delay' \(got ''\)"),
    ],
)
def test_bad_echo_parameters_list_the_valid_forms(spec: str, problem: str) -> None:
    """A bad echo query is a ModelSpecError naming the problem and the valid forms."""
    with pytest.raises(ModelSpecError, match=rf"^invalid model spec .*{problem}.*"):
        model_from_spec(spec)
    with pytest.raises(ValueError, match=r"valid forms: echo, echo\?delay=SECONDS$"):
        model_from_spec(spec)


@pytest.mark.parametrize("spec", ["x:y", "gpt", ""])
def test_unknown_spec_lists_the_known_forms(spec: str) -> None:
    """An unregistered scheme or unknown name is refused with the known forms."""
    with pytest.raises(
        ModelSpecError,
        match=rf"^unknown model spec {spec!r}; known: echo, echo\?delay=SECONDS, "
        r"anthropic:MODEL, openai:MODEL$",
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
            match=r"known: echo, echo\?delay=SECONDS, anthropic:MODEL, fake:MODEL, openai:MODEL$",
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
