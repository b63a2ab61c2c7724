"""The one rule for names that reach a model API in a tool name: tools' and MCP servers'."""

from __future__ import annotations

import pytest

from trio_agents._base import api_name_refusal


@pytest.mark.parametrize("name", ["a", "A-z_0", "x" * 48])
def test_a_name_of_the_api_characters_within_the_limit_passes(name: str) -> None:
    """Letters, digits, '_' and '-', from 1 to the limit: no refusal."""
    assert api_name_refusal(name, "a name", 48, "why") is None


@pytest.mark.parametrize("name", ["", "x" * 49, "a.b", "a b", "é", 7, None])
def test_anything_else_is_refused_in_one_line_naming_the_rule(name: object) -> None:
    """Empty, too long, another character or not a string: the refusal says what and why."""
    refusal = api_name_refusal(name, "a name", 48, "why")
    assert refusal == f"a name is 1-48 letters, digits, '_' or '-' (why); got {name!r}"
