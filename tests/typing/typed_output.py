"""Typed final output as mypy sees it (checked by ``nox -s typecheck``).

mypy checks this file with ``--disallow-any-expr`` (the comment below): ``ask(..., output=T)``
returns ``T`` and ``last_output(T)`` returns ``T | None``, so reading a field the class lacks
fails the type check. ``tests/agent/test_output.py`` also runs :func:`judge`.
"""
# mypy: disallow-any-expr

from __future__ import annotations

from typing import assert_type

import attrs

import trio_agents as ta

__all__ = ["Verdict", "judge"]


# attrs' own decorator is typed with Any (its overloads take converters and validators); the
# class it makes is not, and that is what the checks below are about.
@attrs.frozen  # type: ignore[misc]
class Verdict:
    """What the agent decided."""

    ok: bool
    reason: str


async def judge(agent: ta.Agent) -> tuple[bool, str]:
    """Ask for a verdict; return its fields, and the latest one's reason."""
    verdict = await agent.ask("Is it fine?", output=Verdict, output_retries=1)
    assert_type(verdict, Verdict)
    text = await agent.ask("Say why.")
    assert_type(text, str)
    latest = agent.last_output(Verdict)
    assert_type(latest, Verdict | None)
    return verdict.ok, latest.reason if latest is not None else text
