"""The kernel: fibers, effects, services, typed events and reload (``docs/ownership.rst``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it need of it and users do not: ``current_context`` (the plugins' lookups from their own
tasks) and ``config_converter`` (the command's config file).
"""

from ._context import Context as Context
from ._context import current_context as current_context
from ._errors import ConfigError as ConfigError
from ._errors import FiberClosedError as FiberClosedError
from ._errors import ReloadError as ReloadError
from ._events import FiberFailed as FiberFailed
from ._events import ListenerFailed as ListenerFailed
from ._events import PluginReloaded as PluginReloaded
from ._fiber import Fiber as Fiber
from ._fiber import FiberStatistics as FiberStatistics
from ._plugin import config_converter as config_converter
from ._runtime import open_root as open_root
from ._service_key import ServiceKey as ServiceKey
from ._snapshot import Describer as Describer
from ._snapshot import EntrySnapshot as EntrySnapshot
from ._snapshot import FiberSnapshot as FiberSnapshot
from ._stack import Entry as Entry
from ._states import FiberState as FiberState
from ._watch import watch_plugins as watch_plugins

__all__ = [
    "ConfigError",
    "Context",
    "Describer",
    "Entry",
    "EntrySnapshot",
    "Fiber",
    "FiberClosedError",
    "FiberFailed",
    "FiberSnapshot",
    "FiberState",
    "FiberStatistics",
    "ListenerFailed",
    "PluginReloaded",
    "ReloadError",
    "ServiceKey",
    "open_root",
    "watch_plugins",
]
