"""A kit for testing one's own agents: pytest fixtures, an event collector, a recording model.

The fixtures (``ta_runtime``, ``ta_model``, ``ta_agent``, ``ta_events``) come from the pytest
plugin :mod:`trio_agents.testing.pytest_plugin`, which loads itself once trio-agents is
installed. :class:`~trio_agents.model.ScriptedModel` records every request it was sent
(``model.requests``), and :meth:`Agent.ask <trio_agents.agent.Agent.ask>` prompts and returns
the answer. See the "Testing your agents" page.
"""

from ..model import CallTool as CallTool
from ..model import Fail as Fail
from ..model import Say as Say
from ..model import ScriptedModel as ScriptedModel
from ..model import Wait as Wait
from ._events import EventCollector as EventCollector
from ._events import collect_events as collect_events

__all__ = ["CallTool", "EventCollector", "Fail", "Say", "ScriptedModel", "Wait", "collect_events"]
