"""``FallbackModel``: a chain of models in which the next takes the request when one fails in a
way its own retries cannot fix.

Rules:
- A request goes to the first model. When its stream raises a :class:`ModelError` whose
  ``kind`` is in ``FALLBACK_KINDS`` (auth, not found, still rate-limited or overloaded or
  failing after its retries, unreachable, context too long for it) before it yielded
  anything, the same request goes to the next model, and so on.
- Each model first retries on its own, as its provider does: a 429 waits out its
  ``Retry-After`` and tries the same model again within that model's ``deadline``; only
  when the retries or the deadline are spent does the chain move on. So a rate limit is
  waited out and an outage is routed around, and the two are told apart by the provider's
  classification of the failure, not by the chain.
- A failure after some output, or of another kind (a refused request, a broken answer, an
  unclassified failure), ends the stream as it is: the consumer has seen the output, and
  another model would repeat it or be refused alike. A cancellation is never a failure.
- The ``Finished`` event names the model that answered (``Finished.model``: its ``name``),
  which a turn records on its ``ModelUsage``.
- When every model failed: one :class:`ModelError` naming each failure in order. Its kind is
  ``CONTEXT_TOO_LONG`` if any model said so (a turn then compacts its history and tries the
  step once more), else the last failure's kind; ``limit`` is the smallest window reported.
- ``context_window`` is the smallest known window of the members (a request sized to it
  fits every one of them), unless given; ``None`` when no member knows its own.
- ``preflight()`` passes when at least one member's does (a member without its key fails
  at its turn, as AUTH, and the chain moves on); it raises the first member's error when
  none can answer.
- A spec of the form ``SPEC | SPEC | ...`` builds a chain (``_spec``), and so does a list
  given to the constructor, whose strings are specs.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import final

import attrs
import trio

from ._errors import FALLBACK_KINDS, ModelError, ModelErrorKind
from ._messages import ModelRequest
from ._protocol import Model, check_context_window, preflight
from ._stream import Finished, ModelEvent


@final
class FallbackModel:
    """Models tried in order for each request; see the module rules.

    Args:
        models: two or more models (or spec strings), the preferred first.
        context_window: the window of the chain in tokens; default: the smallest known
            window of its models.

    Raises:
        ValueError: fewer than two models, or a bad ``context_window``.
        ModelSpecError: a string is not a valid spec.
    """

    __slots__ = ("context_window", "models", "name")

    def __init__(self, models: Sequence[Model | str], *, context_window: int | None = None) -> None:
        from ._spec import model_from_spec  # the spec module builds chains of this class

        if isinstance(models, str) or len(models) < 2:
            raise ValueError(
                f"a FallbackModel needs two or more models, the preferred first; got {models!r}"
            )
        self.models: tuple[Model, ...] = tuple(
            model_from_spec(m) if isinstance(m, str) else m for m in models
        )
        self.name = " | ".join(m.name for m in self.models)
        if context_window is None:
            known = [w for m in self.models if (w := getattr(m, "context_window", None))]
            context_window = min(known) if known else None
        self.context_window = check_context_window(context_window)

    def __repr__(self) -> str:
        return f"<FallbackModel {self.name!r}>"

    def preflight(self) -> None:
        """Pass when one of the models can answer as configured (see the module rules).

        Raises:
            ModelError: none can; the first model's error.
        """
        errors: list[ModelError] = []
        for model in self.models:
            try:
                preflight(model)
            except ModelError as exc:
                errors.append(exc)
            else:
                return
        raise errors[0]

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Stream the answer of the first model that gives one. See the module rules.

        Raises:
            ModelError: a model failed after output or in a way another model cannot mend,
                or every model failed.
        """
        await trio.lowlevel.checkpoint()
        failures: list[tuple[Model, ModelError]] = []
        for model in self.models:
            yielded = False
            try:
                async with aclosing(model.stream(request)) as events:
                    async for event in events:
                        yielded = True
                        if isinstance(event, Finished) and event.model is None:
                            event = attrs.evolve(event, model=model.name)
                        yield event
                return
            except ModelError as exc:
                if yielded or exc.kind not in FALLBACK_KINDS:
                    raise
                failures.append((model, exc))
        raise _all_failed(failures)


def _all_failed(failures: list[tuple[Model, ModelError]]) -> ModelError:
    """The error of a chain whose every model failed (see the module rules)."""
    said = "; ".join(f"{model.name}: {exc}" for model, exc in failures)
    kinds = [exc.kind for _, exc in failures]
    too_long = ModelErrorKind.CONTEXT_TOO_LONG
    kind = too_long if too_long in kinds else kinds[-1]
    limits = [exc.limit for _, exc in failures if exc.limit is not None]
    return ModelError(
        f"every model of the chain failed: {said}",
        kind=kind,
        limit=min(limits) if limits else None,
    )
