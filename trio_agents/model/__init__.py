"""Models: the ``Model`` protocol, the conversation it sees, ``ScriptedModel``,
``OpenAIChatModel`` (any OpenAI-compatible endpoint), ``AnthropicModel`` (the Anthropic
Messages API) and ``FallbackModel`` (a chain of them).

The layer depends only on the kernel, the cancel layer and the package's error base.

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it need of it and users do not: ``ModelsPlugin`` (applied by ``open_runtime``), and the
conversation's ``ChatMessage``, ``OutputSpec`` and ``ToolCallPart`` (the agent's history).
"""

from ._anthropic import AnthropicModel as AnthropicModel
from ._catalog import MODELS as MODELS
from ._catalog import ModelCatalog as ModelCatalog
from ._catalog import ModelsPlugin as ModelsPlugin
from ._errors import FALLBACK_KINDS as FALLBACK_KINDS
from ._errors import ModelError as ModelError
from ._errors import ModelErrorKind as ModelErrorKind
from ._errors import ModelSpecError as ModelSpecError
from ._fallback import FallbackModel as FallbackModel
from ._messages import MAX_IMAGE_BYTES as MAX_IMAGE_BYTES
from ._messages import AssistantText as AssistantText
from ._messages import ChatMessage as ChatMessage
from ._messages import ImageError as ImageError
from ._messages import ImagePart as ImagePart
from ._messages import ModelRequest as ModelRequest
from ._messages import OutputSpec as OutputSpec
from ._messages import SystemText as SystemText
from ._messages import ToolCallPart as ToolCallPart
from ._messages import ToolOutput as ToolOutput
from ._messages import ToolSpec as ToolSpec
from ._messages import UserText as UserText
from ._openai import OpenAIChatModel as OpenAIChatModel
from ._prices import DEFAULT_PRICES as DEFAULT_PRICES
from ._prices import Price as Price
from ._prices import PriceTable as PriceTable
from ._protocol import Model as Model
from ._protocol import preflight as preflight
from ._scripted import CallTool as CallTool
from ._scripted import Fail as Fail
from ._scripted import Say as Say
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import Think as Think
from ._scripted import Wait as Wait
from ._spec import model_from_spec as model_from_spec
from ._spec import register_model_scheme as register_model_scheme
from ._stream import Finished as Finished
from ._stream import FinishReason as FinishReason
from ._stream import ModelEvent as ModelEvent
from ._stream import TextDelta as TextDelta
from ._stream import ThoughtDelta as ThoughtDelta
from ._stream import ToolCallRequested as ToolCallRequested
from ._stream import Usage as Usage

__all__ = [
    "DEFAULT_PRICES",
    "FALLBACK_KINDS",
    "MAX_IMAGE_BYTES",
    "MODELS",
    "AnthropicModel",
    "AssistantText",
    "CallTool",
    "Fail",
    "FallbackModel",
    "FinishReason",
    "Finished",
    "ImageError",
    "ImagePart",
    "Model",
    "ModelCatalog",
    "ModelError",
    "ModelErrorKind",
    "ModelEvent",
    "ModelRequest",
    "ModelSpecError",
    "OpenAIChatModel",
    "Price",
    "PriceTable",
    "Say",
    "ScriptedModel",
    "SystemText",
    "TextDelta",
    "Think",
    "ThoughtDelta",
    "ToolCallRequested",
    "ToolOutput",
    "ToolSpec",
    "Usage",
    "UserText",
    "Wait",
    "model_from_spec",
    "preflight",
    "register_model_scheme",
]
