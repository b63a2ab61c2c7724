"""The ``models`` service: the runtime's default model and model-spec resolution."""

from __future__ import annotations

from typing import Final, final

from ..kernel import Context, ServiceKey
from ._protocol import Model, preflight
from ._scripted import ScriptedModel
from ._spec import model_from_spec

__all__ = ["MODELS", "ModelCatalog", "ModelsPlugin"]


@final
class ModelCatalog:
    """Resolves what ``create(model=...)`` was given into a :class:`Model`."""

    def __init__(self, default: Model) -> None:
        self.default = default

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
    """Provides the ``models`` service with ``default`` (``ScriptedModel.echo()`` if None)."""

    name = "models"

    def __init__(self, default: Model | str | None = None) -> None:
        self._default = default

    async def apply(self, ctx: Context, config: None) -> None:
        default = self._default
        if default is None:
            default = ScriptedModel.echo()
        elif isinstance(default, str):
            default = model_from_spec(default)
        ctx.provide(MODELS, ModelCatalog(default))


#: The key of the ``models`` service.
MODELS: Final[ServiceKey[ModelCatalog]] = ServiceKey("models")
