"""How the strict structuring policy (``_strict``) phrases a problem, for its audience.

Internal to the package: the kernel's config errors, the tools registry's argument errors,
the session's format errors and the command's config-file errors all read the same, and no
layer above needs these names in its public surface.

Rules:
- A problem is one line, "expected X, got Y" (or what is missing or extra), then `` @ path``.
- A list of problems is counted (``count_problems``) and then shown one per line
  (``list_problems``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import final

import attrs


class StrictTypeError(TypeError):
    """A value of the wrong type; its message is the whole problem."""


def json_type(value: object) -> str:
    """The JSON name of ``value``'s type (``integer``, ``array``, ...)."""
    if value is None:
        return "null"
    for kind, label in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, kind):
            return label
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _python_type(value: object) -> str:
    return type(value).__name__


@final
@attrs.frozen
class Wording:
    """How a converter's problems are phrased for its audience.

    Attributes:
        kinds: what is expected, by kind: ``str``, ``bool``, ``int``, ``float``, ``array``
            and ``object``.
        type_of: the name of a received value's type.
        missing: a required key is absent.
        extra: the lead of the list of unknown keys.
    """

    kinds: Mapping[str, str]
    type_of: Callable[[object], str]
    missing: str = "required field missing"
    extra: str = "unknown keys"

    def mismatch(self, kind: str, value: object) -> StrictTypeError:
        """The problem "expected ``kind``, got ``value``"."""
        return self.expected(self.kinds[kind], value)

    def expected(self, expected: str, value: object) -> StrictTypeError:
        """The problem "expected ``expected`` (already phrased), got ``value``" (a long value
        is shown by its start: a stored line or a model's argument can be megabytes)."""
        return StrictTypeError(f"expected {expected}, got {self.type_of(value)} {_shown(value)}")

    @staticmethod
    def config() -> Wording:
        """For files people write (plugin configs, the TOML file): Python's names."""
        return _CONFIG

    @staticmethod
    def json() -> Wording:
        """For JSON a model writes (tool arguments): JSON's names."""
        return _JSON

    @staticmethod
    def stored() -> Wording:
        """For JSON the package wrote itself (session records), read back by a developer
        when a file is damaged: JSON's kinds, Python's type names."""
        return _STORED


#: The longest ``repr`` of a received value a problem shows whole.
_SHOWN = 80


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."


_CONFIG = Wording(
    {
        "str": "str",
        "bool": "bool",
        "int": "int",
        "float": "float",
        "array": "a list",
        "object": "dict",
    },
    _python_type,
)

_JSON = Wording(
    {
        "str": "a string",
        "bool": "a boolean",
        "int": "an integer",
        "float": "a number",
        "array": "an array",
        "object": "an object",
    },
    json_type,
    missing="required argument missing",
    extra="unknown arguments",
)


_STORED = Wording(
    {
        "str": "a string",
        "bool": "a boolean",
        "int": "an integer",
        "float": "a number",
        "array": "a JSON array",
        "object": "a JSON object",
    },
    _python_type,
)


def count_problems(problems: Sequence[str]) -> str:
    """``"1 problem"``, ``"3 problems"``."""
    return f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"


def list_problems(problems: Sequence[str]) -> str:
    """One indented ``- problem`` line for each, each on its own line."""
    return "".join(f"\n  - {p}" for p in problems)
