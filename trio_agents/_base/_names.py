"""Names that reach a model API in a tool's name: the one rule for their characters.

Rules:
- Such a name is 1 to ``most`` letters, digits, ``_`` or ``-``: what model APIs accept in a
  tool name (a tool's name, at most 64; an MCP server's, which prefixes its tools' names).
- The refusal is one line: what the name is, the rule with its reason, and the name given.
"""

from __future__ import annotations

import re

_API_NAME = re.compile(r"[A-Za-z0-9_-]+")


def api_name_refusal(name: object, what: str, most: int, why: str) -> str | None:
    """``None`` if ``name`` is 1 to ``most`` of the characters a model API accepts in a tool
    name, else the refusal: ``"{what} is 1-{most} letters, ... ({why}); got {name!r}"``."""
    if isinstance(name, str) and len(name) <= most and _API_NAME.fullmatch(name):
        return None
    return f"{what} is 1-{most} letters, digits, '_' or '-' ({why}); got {name!r}"
