"""Model spec strings: one string selects a model everywhere (CLI, config).

Rules:
- ``echo`` and ``echo?delay=SECONDS`` are built in; ``delay`` is the only parameter.
- ``SCHEME:REST`` goes to the factory registered for ``SCHEME`` (``openai:MODEL``), which gets
  ``REST``. An unregistered scheme is an error that lists the known forms.
- ``openai`` is registered here: ``openai:MODEL?base_url=URL&timeout=SECONDS&deadline=SECONDS&
  max_line=N&max_retries=N``.
- ``anthropic`` too: ``anthropic:MODEL?base_url=URL&max_tokens=N&timeout=SECONDS&
  deadline=SECONDS&max_line=N&max_retries=N``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeAlias
from urllib.parse import parse_qsl

from ._anthropic import anthropic_from_spec
from ._errors import ModelSpecError
from ._openai import openai_from_spec
from ._protocol import Model
from ._scripted import ScriptedModel

__all__ = ["ModelFactory", "model_from_spec", "register_model_scheme"]

#: Builds a model from what follows ``SCHEME:`` in a spec.
ModelFactory: TypeAlias = Callable[[str], Model]

_ECHO_FORMS = ("echo", "echo?delay=SECONDS")
_schemes: dict[str, ModelFactory] = {}


def _known() -> str:
    return ", ".join((*_ECHO_FORMS, *(f"{s}:MODEL" for s in sorted(_schemes))))


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
    """Build the model that ``spec`` names: ``echo``, ``echo?delay=2.5``, ``openai:MODEL``.

    Raises:
        ModelSpecError: the spec is unknown or malformed; the message lists the valid forms.
    """
    text = spec.strip()
    base, sep, query = text.partition("?")
    if base == "echo":
        return ScriptedModel.echo(_echo_delay(spec, query) if sep else 0.0)
    scheme, colon, rest = text.partition(":")
    factory = _schemes.get(scheme) if colon else None
    if factory is None:
        raise ModelSpecError(f"unknown model spec {spec!r}; known: {_known()}")
    if not rest:
        raise ModelSpecError(f"model spec {spec!r} names no model; write {scheme}:MODEL")
    return factory(rest)


def _echo_delay(spec: str, query: str) -> float:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        pairs = [("", "")]
    keys = [k for k, _ in pairs]
    if keys != ["delay"]:
        bad = ", ".join(repr(k) for k in keys if k != "delay") or "a repeated 'delay'"
        raise ModelSpecError(
            f"invalid model spec {spec!r}: echo takes only 'delay' (got {bad}); "
            f"valid forms: {', '.join(_ECHO_FORMS)}"
        )
    raw = pairs[0][1]
    try:
        delay = float(raw)
    except ValueError:
        delay = math.nan
    if not (math.isfinite(delay) and delay >= 0):
        raise ModelSpecError(
            f"invalid model spec {spec!r}: delay must be a number of seconds >= 0, "
            f"got {raw!r}; valid forms: {', '.join(_ECHO_FORMS)}"
        )
    return delay


register_model_scheme("openai", openai_from_spec)
register_model_scheme("anthropic", anthropic_from_spec)
