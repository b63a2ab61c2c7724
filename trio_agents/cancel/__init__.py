"""Typed cancellation: causes as values, carried by cancel scopes (``docs/ownership.rst``).

``__all__`` is what users call. The package also offers, outside ``__all__``, what the layers
above it need of it and users do not: ``check_cause`` (the session converter) and
``forget_inherited_scopes`` (the kernel's fibers).
"""

from ._causes import BudgetExhausted as BudgetExhausted
from ._causes import CancelCause as CancelCause
from ._causes import DisposedCancel as DisposedCancel
from ._causes import HookCancel as HookCancel
from ._causes import LeaseLost as LeaseLost
from ._causes import ParentCancel as ParentCancel
from ._causes import UserCancel as UserCancel
from ._causes import check_cause as check_cause
from ._scope import CauseScope as CauseScope
from ._scope import current_cause as current_cause
from ._scope import forget_inherited_scopes as forget_inherited_scopes

__all__ = [
    "BudgetExhausted",
    "CancelCause",
    "CauseScope",
    "DisposedCancel",
    "HookCancel",
    "LeaseLost",
    "ParentCancel",
    "UserCancel",
    "current_cause",
]
