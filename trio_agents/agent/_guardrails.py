"""Guardrails: checks of the prompt and of the final answer, as hooks.

Rules:
- An input guardrail is a ``turn_start`` hook that checks each message the turn claimed; an
  output guardrail is a ``turn_end`` hook that checks the final answer of a turn whose steps
  are over. Neither is anything but a hook: same order, timeout, policy and ownership.
- A check answers ``None``, ``False`` or ``""`` (passed), ``True`` (tripped) or a text
  (tripped; the text says why). It may be a plain or an async function.
- A tripped guardrail is a :class:`HookCancel` whose reason names it: the turn ends
  ``blocked``, and ``ask`` raises ``TurnFailedError`` saying which guardrail tripped.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeAlias, final

import attrs

from ..cancel import HookCancel
from ._hook_points import TurnEnd, TurnStart

#: A guardrail's check of one text: ``None``/``False``/``""`` passes, ``True`` or a reason trips.
GuardrailCheck: TypeAlias = Callable[[str], "Awaitable[bool | str | None] | bool | str | None"]


async def _verdict(name: str, check: GuardrailCheck, text: str) -> HookCancel | None:
    answer = check(text)
    if inspect.isawaitable(answer):
        answer = await answer
    if answer is None or answer is False or answer == "":
        return None
    why = f": {answer}" if isinstance(answer, str) else ""
    return HookCancel(f"guardrail {name!r} tripped{why}")


@final
@attrs.define(eq=False, repr=False)
class InputGuardrail:
    """The ``turn_start`` hook of an input guardrail (see the module rules)."""

    name: str
    check: GuardrailCheck

    async def __call__(self, event: TurnStart) -> HookCancel | None:
        for message in event.messages:
            tripped = await _verdict(self.name, self.check, message)
            if tripped is not None:
                return tripped
        return None


@final
@attrs.define(eq=False, repr=False)
class OutputGuardrail:
    """The ``turn_end`` hook of an output guardrail (see the module rules)."""

    name: str
    check: GuardrailCheck

    async def __call__(self, event: TurnEnd) -> HookCancel | None:
        return await _verdict(self.name, self.check, event.answer)
