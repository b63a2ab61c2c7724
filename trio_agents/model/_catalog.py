"""The ``models`` service: the runtime's default model and model-spec resolution."""

from __future__ import annotations

from typing import Final, final

from ..kernel import Context, ServiceKey
from ._prices import DEFAULT_PRICES, PriceTable
from ._protocol import Model, preflight
from ._scripted import ScriptedModel
from ._spec import model_from_spec


@final
class ModelCatalog:
    """Resolves what ``create(model=...)`` was given into a :class:`Model`, and holds the
    runtime's :class:`PriceTable` (what a request to each model costs)."""

    def __init__(self, default: Model, prices: PriceTable = DEFAULT_PRICES) -> None:
        self.default = default
        self.prices = prices

    def resolve(self, model: Model | str | None) -> Model:
        """``None`` → the default; a spec string (``echo?delay=1``) → a new model; checked
        with :func:`preflight`, as an agent is about to be stored for it.

        Raises:
            ModelSpecError: ``model`` is a bad spec.
            ModelError: the model cannot answer as configured (a missing API key).
        """
        if model is None:
            resolved = self.default
        elif isinstance(model, str):
            resolved = model_from_spec(model)
        else:
            resolved = model
        preflight(resolved)
        return resolved


@final
class ModelsPlugin:
    """Provides the ``models`` service with ``default`` (``ScriptedModel.echo()`` if None)
    and ``prices`` (:data:`DEFAULT_PRICES` if None)."""

    name = "models"

    def __init__(
        self, default: Model | str | None = None, prices: PriceTable | None = None
    ) -> None:
        self._default = default
        self._prices = prices if prices is not None else DEFAULT_PRICES

    async def apply(self, ctx: Context, config: None) -> None:
        default = self._default
        if default is None:
            default = ScriptedModel.echo()
        elif isinstance(default, str):
            default = model_from_spec(default)
        ctx.provide(MODELS, ModelCatalog(default, self._prices))


#: The key of the ``models`` service.
MODELS: Final[ServiceKey[ModelCatalog]] = ServiceKey("models")
