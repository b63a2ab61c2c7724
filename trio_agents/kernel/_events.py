"""Events the kernel itself emits. Events are frozen attrs classes."""

from __future__ import annotations

import attrs


@attrs.frozen
class ListenerFailed:
    """A listener raised; the emitter and the later listeners were not affected."""

    event: object
    listener: str
    error: BaseException = attrs.field(eq=False)


@attrs.frozen
class FiberFailed:
    """A fiber's ``apply`` or one of its background tasks raised; the fiber was torn down."""

    fiber_id: str
    plugin: str
    error: BaseException = attrs.field(eq=False)


@attrs.frozen
class PluginReloaded:
    """``reload`` replaced the fibers of a plugin with fibers of its new code."""

    plugin: str
    module: str
    old_fiber_ids: tuple[str, ...]
    new_fiber_ids: tuple[str, ...]
