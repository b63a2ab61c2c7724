"""The ACP side of modes and config options: ``session/set_mode``, ``session/set_config_option``.

Rules:
- Every session offers the agent's modes (:data:`~trio_agents.agent.MODES`) as ``modes``
  (``currentModeId``, ``availableModes``) and two select config options as ``configOptions``:
  ``mode`` (category ``mode``, the same modes) and ``model`` (category ``model``: the specs
  the bridge was given, ``AcpBridge(models=...)``, the config file's ``models``, plus the
  agent's current one), in the answers to ``session/new``, ``session/load`` and
  ``session/resume``.
- ``session/set_mode`` and ``session/set_config_option`` change the running agent
  (``Agent.set_mode``, ``Agent.set_model``) from its next tool call or model request; the
  change is recorded in its session, so a load or a resume is back in it. A model is only
  ever one of the options offered (a client cannot make the agent run an arbitrary spec).
- Every change, whichever request made it, is announced with ``current_mode_update`` (the
  modes selector) and ``config_option_update`` (every option with its value), queued after the
  answer. ``set_config_option`` answers with every option too, as the schema says.
- An unknown mode, option or model, or a value of the wrong type, is invalid params naming
  what there is; a model that cannot answer (a missing API key) is invalid params with the
  model's one line. Nothing changes then.
- Only this package's :class:`~trio_agents.agent.Agent` has modes and a model switch: the
  session of another factory's agent (an ``AgentLike``) offers neither, and a switch of it is
  invalid params saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, final

from ..agent import MODES, Agent, AgentLike, UnknownModeError
from ..model import ModelError, ModelSpecError
from ._jsonrpc import ErrorCode, RpcError
from ._protocol import required_str


def mode_state(agent: Agent) -> dict[str, Any]:
    """The ``modes`` of a session (``SessionModeState``)."""
    return {
        "currentModeId": agent.mode.id,
        "availableModes": [
            {"id": m.id, "name": m.name, "description": m.description} for m in MODES
        ],
    }


def current_model(agent: Agent) -> str:
    """The value of the ``model`` option: the agent's model spec, else its model's name."""
    return agent.config.model or agent.model.name


def model_choices(agent: Agent, models: Iterable[str]) -> list[str]:
    """The model specs offered to ``agent``: the declared ones, then its own if not among them."""
    choices = list(dict.fromkeys(models))
    current = current_model(agent)
    return choices if current in choices else [*choices, current]


def config_options(agent: Agent, models: Iterable[str]) -> list[dict[str, Any]]:
    """The ``configOptions`` of a session: ``mode`` and ``model`` (``SessionConfigOption``)."""
    return [
        {
            "type": "select",
            "id": "mode",
            "name": "Mode",
            "description": "what the agent may do without asking",
            "category": "mode",
            "currentValue": agent.mode.id,
            "options": [
                {"value": m.id, "name": m.name, "description": m.description} for m in MODES
            ],
        },
        {
            "type": "select",
            "id": "model",
            "name": "Model",
            "description": "the model that answers the next request",
            "category": "model",
            "currentValue": current_model(agent),
            "options": [{"value": s, "name": s} for s in model_choices(agent, models)],
        },
    ]


def current_mode_update(agent: Agent) -> dict[str, Any]:
    """The ``current_mode_update`` of ``agent``'s session."""
    return {"sessionUpdate": "current_mode_update", "currentModeId": agent.mode.id}


def config_option_update(agent: Agent, models: Iterable[str]) -> dict[str, Any]:
    """The ``config_option_update`` of ``agent``'s session (every option, with its value)."""
    return {"sessionUpdate": "config_option_update", "configOptions": config_options(agent, models)}


def _invalid(message: str) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, f"invalid params: {message}")


def _switchable(agent: AgentLike) -> Agent:
    if not isinstance(agent, Agent):
        raise _invalid(
            f"the agent of session {agent.id!r} ({type(agent).__name__}) has no modes or "
            f"model switch; its session offers no config options"
        )
    return agent


@final
class SessionSettings:
    """What a bridge's sessions may be switched to: the modes, and the models it offers."""

    def __init__(self, models: Iterable[str] = ()) -> None:
        self.models = tuple(dict.fromkeys(models))

    def offer(self, agent: AgentLike) -> dict[str, Any]:
        """The ``modes`` and ``configOptions`` members of a session's answer (none for
        another factory's agent)."""
        if not isinstance(agent, Agent):
            return {}
        return {"modes": mode_state(agent), "configOptions": config_options(agent, self.models)}

    def updates(self, agent: Agent) -> list[dict[str, Any]]:
        """What announces a change: ``current_mode_update``, then ``config_option_update``."""
        return [current_mode_update(agent), config_option_update(agent, self.models)]

    def set_mode(self, agent: AgentLike, params: Mapping[str, Any]) -> Agent:
        """``session/set_mode``: put the agent in ``modeId``."""
        switched = _switchable(agent)
        self._mode(switched, required_str(params, "modeId"))
        return switched

    def set_option(
        self, agent: AgentLike, params: Mapping[str, Any]
    ) -> tuple[Agent, list[dict[str, Any]]]:
        """``session/set_config_option``: set ``configId`` to ``value``; the agent, and every
        option after."""
        switched = _switchable(agent)
        return switched, self._option(switched, params)

    def _option(self, agent: Agent, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        config_id = required_str(params, "configId")
        value = params.get("value")
        if config_id not in ("mode", "model"):
            raise _invalid(f"unknown config option {config_id!r}; the options are mode, model")
        if not isinstance(value, str) or params.get("type", "select") != "select":
            raise _invalid(f"config option {config_id!r} is a select: 'value' is one of its ids")
        if config_id == "mode":
            self._mode(agent, value)
        else:
            self._model(agent, value)
        return config_options(agent, self.models)

    @staticmethod
    def _mode(agent: Agent, mode: str) -> None:
        try:
            agent.set_mode(mode)
        except UnknownModeError as exc:
            raise _invalid(str(exc)) from None

    def _model(self, agent: Agent, spec: str) -> None:
        choices = model_choices(agent, self.models)
        if spec not in choices:
            raise _invalid(f"unknown model {spec!r}; the models here are {', '.join(choices)}")
        if spec == current_model(agent):
            return
        try:
            agent.set_model(spec)
        except (ModelSpecError, ModelError) as exc:
            raise _invalid(f"model {spec!r} cannot be used: {exc}") from None
