"""Model spec strings: one string selects a model everywhere (CLI, config).

Rules:
- ``echo`` is built in; its parameters are ``delay`` (seconds) and ``context_window`` (tokens):
  ``echo?delay=2.5&context_window=2000``.
- ``SCHEME:REST`` goes to the factory registered for ``SCHEME`` (``openai:MODEL``), which gets
  ``REST``. An unregistered scheme is an error that lists the known forms.
- ``openai`` is registered here: ``openai:MODEL?base_url=URL&timeout=SECONDS&deadline=SECONDS&
  max_line=N&max_retries=N&max_answer=N&context_window=TOKENS``.
- ``anthropic`` too: ``anthropic:MODEL?base_url=URL&max_tokens=N&timeout=SECONDS&
  deadline=SECONDS&max_line=N&max_retries=N&max_answer=N&context_window=TOKENS&cache=0|1``.
- ``SPEC | SPEC | ...`` is a fallback chain (:class:`FallbackModel`) of the models the specs
  name, the preferred first; a member that is not a valid spec is refused with its own error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from ._anthropic import anthropic_from_spec
from ._errors import ModelSpecError
from ._fallback import FallbackModel
from ._openai import openai_from_spec
from ._protocol import Model
from ._scripted import ScriptedModel
from ._spec_query import spec_number, spec_params

#: Builds a model from what follows ``SCHEME:`` in a spec.
ModelFactory: TypeAlias = Callable[[str], Model]

_ECHO_FORMS = ("echo", "echo?delay=SECONDS&context_window=TOKENS")
_ECHO_KEYS = ("delay", "context_window")
_schemes: dict[str, ModelFactory] = {}


def _known() -> str:
    forms = (*_ECHO_FORMS, *(f"{s}:MODEL" for s in sorted(_schemes)), "SPEC | SPEC (a chain)")
    return ", ".join(forms)


def register_model_scheme(scheme: str, factory: ModelFactory) -> Callable[[], None]:
    """Make ``SCHEME:REST`` specs build their model with ``factory(REST)``.

    Returns:
        A function that unregisters the scheme again (if ``factory`` is still the one
        registered), for tests and for plugins that own the registration.

    Raises:
        ValueError: ``scheme`` is not an identifier-like name, is ``echo``, or is taken.
    """
    if not scheme.replace("-", "_").isidentifier() or scheme == "echo":
        raise ValueError(f"a model scheme is a name such as 'openai' (not 'echo'); got {scheme!r}")
    if scheme in _schemes:
        raise ValueError(f"model scheme {scheme!r} is already registered; unregister it first")
    _schemes[scheme] = factory

    def unregister() -> None:
        if _schemes.get(scheme) is factory:
            del _schemes[scheme]

    return unregister


def model_from_spec(spec: str) -> Model:
    """Build the model that ``spec`` names: ``echo``, ``echo?delay=2.5``, ``openai:MODEL``,
    or a fallback chain ``anthropic:MODEL | openai:MODEL``.

    Raises:
        ModelSpecError: the spec is unknown or malformed; the message lists the valid forms.
    """
    text = spec.strip()
    if "|" in text:
        members = [member.strip() for member in text.split("|")]
        if not all(members):
            raise ModelSpecError(
                f"model spec {spec!r} has an empty member; a fallback chain is "
                "SPEC | SPEC | ... (anthropic:MODEL | openai:MODEL)"
            )
        return FallbackModel([model_from_spec(member) for member in members])
    base, sep, query = text.partition("?")
    if base == "echo":
        return _echo(spec, query) if sep else ScriptedModel.echo()
    scheme, colon, rest = text.partition(":")
    factory = _schemes.get(scheme) if colon else None
    if factory is None:
        raise ModelSpecError(f"unknown model spec {spec!r}; known: {_known()}")
    if not rest:
        raise ModelSpecError(f"model spec {spec!r} names no model; write {scheme}:MODEL")
    return factory(rest)


def _echo(spec: str, query: str) -> ScriptedModel:
    try:
        _, params = spec_params("echo", f"echo?{query}", _ECHO_KEYS)
    except ModelSpecError as exc:
        raise ModelSpecError(
            f"invalid model spec {spec!r}: {str(exc).partition(': ')[2]}; "
            f"valid forms: {', '.join(_ECHO_FORMS)}"
        ) from None
    delay = 0.0
    window: int | None = None
    try:
        if "delay" in params:
            delay = float(spec_number(spec, "delay", params["delay"], float, zero=True))
        if "context_window" in params:
            raw = params["context_window"]
            window = int(spec_number(spec, "context_window", raw, int, minimum=1))
    except ModelSpecError as exc:
        raise ModelSpecError(f"{exc}; valid forms: {', '.join(_ECHO_FORMS)}") from None
    return ScriptedModel.echo(delay, context_window=window)


register_model_scheme("openai", openai_from_spec)
register_model_scheme("anthropic", anthropic_from_spec)
