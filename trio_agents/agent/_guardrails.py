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
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeAlias, TypeVar, final

import attrs

from ..cancel import HookCancel
from ._hook_points import TurnEnd, TurnStart

#: A guardrail's check of one text: ``None``/``False``/``""`` passes, ``True`` or a reason trips.
GuardrailCheck: TypeAlias = Callable[[str], "Awaitable[bool | str | None] | bool | str | None"]

E = TypeVar("E")


@final
@attrs.define(eq=False, repr=False)
class Guardrail(Generic[E]):
    """A guardrail as a hook: ``check`` each text that ``texts`` reads from the point's event
    (see the module rules)."""

    name: str
    check: GuardrailCheck
    texts: Callable[[E], Iterable[str]]

    async def __call__(self, event: E) -> HookCancel | None:
        for text in self.texts(event):
            answer = self.check(text)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is None or answer is False or answer == "":
                continue
            why = f": {answer}" if isinstance(answer, str) else ""
            return HookCancel(f"guardrail {self.name!r} tripped{why}")
        return None


def input_hook(name: str, check: GuardrailCheck) -> Guardrail[TurnStart]:
    """The ``turn_start`` hook of an input guardrail: it checks each message the turn claimed."""
    return Guardrail(name, check, lambda event: event.messages)


def output_hook(name: str, check: GuardrailCheck) -> Guardrail[TurnEnd]:
    """The ``turn_end`` hook of an output guardrail: it checks the final answer of the turn."""
    return Guardrail(name, check, lambda event: (event.answer,))
